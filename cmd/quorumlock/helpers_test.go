package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockclient"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// binDir holds the quorumlock binary, built once by quorumlockBin for the
// tests that need a process of their own (signals, SIGSTOP, two hosts).
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

// quorumlockBin builds this command with go build (once per test binary)
// and returns its path.
func quorumlockBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		p := filepath.Join(binDir, "quorumlock")
		out, err := exec.Command("go", "build", "-o", p, ".").CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binPath = p
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

// runMain runs the command in this process with the process's environment.
func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads, that wakes waiters on each write.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{})} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a quorumlock binary running as a test's "host".
type proc struct {
	t              *testing.T
	name           string
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	code           int
}

// startProc starts the quorumlock binary with args and env added to the
// test's environment. It is killed, if still running, when the test ends.
func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, stdout: newSyncBuffer(), stderr: newSyncBuffer(), done: make(chan struct{})}
	p.cmd = exec.Command(quorumlockBin(t), args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	// A command that outlives run (a bug) keeps the output pipes open: do
	// not wait for it to close them once run has exited.
	p.cmd.WaitDelay = 2 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = exitStatus(err)
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit (at most limit) and returns its
// status.
func (p *proc) wait(limit time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(limit):
		p.t.Fatalf("%s still running after %v; stderr:\n%s", p.name, limit, p.stderr.String())
	}
	return -1
}

// waitStderr waits until the process's stderr contains s (at most limit).
func (p *proc) waitStderr(s string, limit time.Duration) {
	p.t.Helper()
	deadline := time.After(limit)
	for {
		p.stderr.mu.Lock()
		has, changed := strings.Contains(p.stderr.b.String(), s), p.stderr.changed
		p.stderr.mu.Unlock()
		if has {
			return
		}
		select {
		case <-changed:
		case <-p.done:
			if !strings.Contains(p.stderr.String(), s) {
				p.t.Fatalf("%s exited (status %d) without saying %q; stderr:\n%s", p.name, p.code, s, p.stderr.String())
			}
			return
		case <-deadline:
			p.t.Fatalf("%s did not say %q within %v; stderr:\n%s", p.name, s, limit, p.stderr.String())
		}
	}
}

// waitUntil polls cond every 10ms until it holds, failing the test after
// limit with what.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// waitWhile is waitUntil while the process runs: it fails at once, with
// the process's stderr, when the process exits before cond holds.
func (p *proc) waitWhile(limit time.Duration, what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		select {
		case <-p.done:
			if !cond() {
				p.t.Fatalf("%s exited (status %d) before %s; stderr:\n%s", p.name, p.code, what, p.stderr.String())
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out after %v waiting for %s; %s's stderr:\n%s", limit, what, p.name, p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// readLog returns the lines of a log file the children append to ("" when
// it does not exist yet).
func readLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// logHas reports whether the log has the line.
func logHas(lines []string, line string) bool {
	for _, l := range lines {
		if l == line {
			return true
		}
	}
	return false
}

// indexOf is the index of the first line equal to line, -1 when absent.
func indexOf(lines []string, line string) int {
	for i, l := range lines {
		if l == line {
			return i
		}
	}
	return -1
}

// script writes an sh script to dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// startMasters starts n redis-server processes with the extra arguments
// and returns their host:port addresses.
func startMasters(t *testing.T, n int, args ...string) []string {
	t.Helper()
	var addrs []string
	for range n {
		addrs = append(addrs, redisproc.StartT(t, redisproc.Config{Args: args}).Addr())
	}
	return addrs
}

// admin returns a raw client of the master at addr (closed with the test).
func admin(t *testing.T, opt *redis.Options) *redis.Client {
	t.Helper()
	c := redis.NewClient(lockclient.Configure(opt))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// nodesEnv is the QUORUMLOCK_NODES setting for addrs.
func nodesEnv(addrs []string) string { return envNodes + "=" + strings.Join(addrs, ",") }

// requirePass gives the default user of the master at addr a password
// (redisproc's readiness check needs none at start).
func requirePass(t *testing.T, addr, pw string) {
	t.Helper()
	if err := admin(t, &redis.Options{Addr: addr}).ConfigSet(context.Background(), "requirepass", pw).Err(); err != nil {
		t.Fatal(err)
	}
}

// link is a TCP forwarder to one master, for a host whose path to the
// master a test cuts while other hosts still reach it directly.
type link struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

// newLink starts a forwarder to target on a free loopback port; it is cut
// when the test ends.
func newLink(t *testing.T, target string) *link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &link{ln: ln, target: target}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.Cut)
	return l
}

// Addr is the address that reaches the master through the link.
func (l *link) Addr() string { return l.ln.Addr().String() }

func (l *link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed by Cut
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = c.Close() // the master is down: so is the path
			continue
		}
		l.mu.Lock()
		if l.cut {
			l.mu.Unlock()
			_, _ = c.Close(), up.Close()
			continue
		}
		l.conns = append(l.conns, c, up)
		l.wg.Add(2)
		l.mu.Unlock()
		go l.pipe(c, up)
		go l.pipe(up, c)
	}
}

// pipe copies src to dst until either ends, then closes both.
func (l *link) pipe(dst, src net.Conn) {
	defer l.wg.Done()
	_, _ = io.Copy(dst, src)
	_, _ = dst.Close(), src.Close()
}

// Cut closes the link's connections and stops listening: the host's
// connections through it end, and new ones are refused.
func (l *link) Cut() {
	l.mu.Lock()
	l.cut = true
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	_ = l.ln.Close()
	l.wg.Wait()
}
