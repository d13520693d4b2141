// Package redisproc starts and controls local redis-server processes on free
// 127.0.0.1 ports, each in its own temporary directory. Tests and the process
// backend of package faultinject use it; it is internal to the module.
package redisproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config describes one redis-server process.
type Config struct {
	// Binary is the redis-server executable. Default: "redis-server" from PATH.
	Binary string
	// Port to listen on; 0 picks a free port.
	Port int
	// Dir is the working directory (AOF and RDB files). Default: a new
	// temporary directory, removed by Stop.
	Dir string
	// AppendOnly enables AOF with appendfsync always (or AppendFsync), so
	// keys and their TTLs survive a kill -9.
	AppendOnly bool
	// AppendFsync is the appendfsync policy with AppendOnly: "always"
	// (default), "everysec" or "no". A kill -9 loses nothing under any of
	// them (the kernel's page cache survives the process); a host crash
	// loses what was not synced.
	AppendFsync string
	// AOFTimestamps adds aof-timestamp-enabled yes with AppendOnly: the AOF
	// then carries "#TS:<unix seconds>" annotations, by which
	// redis-check-aof --truncate-to-timestamp cuts it (TruncateAOF).
	AOFTimestamps bool
	// Host is the address the server binds to and Addr names. Default:
	// 127.0.0.1.
	Host string
	// Prefix, when set, is a command that runs redis-server, which follows
	// it with its arguments: for example {"ip", "netns", "exec", "ns1"} to
	// run the server in a network namespace. The command must exec the
	// server (not fork it), so that signals reach the server.
	Prefix []string
	// Env is added to the process environment (for example LD_PRELOAD and
	// FAKETIME_* variables for clock faults).
	Env []string
	// Args are extra redis-server arguments ("--name value" pairs).
	Args []string
	// StartTimeout bounds the wait for the first PONG. Default: 10s.
	StartTimeout time.Duration
	// ConfigFile, when set, is passed to redis-server as its configuration
	// file (the first argument); the options above and Args override it.
	ConfigFile string
	// TLS, when set, makes the server listen only on a TLS port (--port 0
	// --tls-port P, P as Port says); Addr is that port. The caller passes the
	// --tls-* file arguments in Args; TLS is the client configuration the
	// readiness check connects with.
	TLS *tls.Config
}

// Server is one running (or stopped) redis-server process. Its methods are
// safe for concurrent use.
type Server struct {
	cfg     Config
	addr    string
	ownsDir bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// ErrNoBinary is returned when redis-server is not installed.
var ErrNoBinary = errors.New("redisproc: redis-server not found in PATH (install it: apt-get install -y redis-server)")

// LookPath returns the redis-server binary path or ErrNoBinary.
func LookPath() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", ErrNoBinary
	}
	return p, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start launches redis-server and waits until it answers PING.
func Start(cfg Config) (*Server, error) {
	if cfg.Binary == "" {
		p, err := LookPath()
		if err != nil {
			return nil, err
		}
		cfg.Binary = p
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	s := &Server{cfg: cfg}
	if s.cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "quorumlock-redis-")
		if err != nil {
			return nil, err
		}
		s.cfg.Dir, s.ownsDir = dir, true
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := cfg.Port
		if port == 0 {
			p, err := FreePort()
			if err != nil {
				return nil, err
			}
			port = p
		}
		s.addr = net.JoinHostPort(s.host(), strconv.Itoa(port))
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
		if cfg.Port != 0 {
			break
		}
	}
	s.cleanupDir()
	return nil, lastErr
}

// StartT starts a server for a test and stops it in t.Cleanup. When
// redis-server is missing it fails the test if the CI environment variable is
// "true", and skips it otherwise.
func StartT(t testing.TB, cfg Config) *Server {
	t.Helper()
	Require(t)
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// Require fails (CI=true) or skips the test when redis-server is missing.
func Require(t testing.TB) {
	t.Helper()
	_, err := LookPath()
	RequireOrSkip(t, err)
}

// RequireOrSkip is the project's one rule for a missing test dependency:
// when err is not nil the test fails if the CI environment variable is
// "true" (so CI cannot pass by skipping), and is skipped otherwise.
func RequireOrSkip(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%v; CI=true, so this is a failure", err)
	}
	t.Skipf("%v; skipping (set CI=true to make this a failure)", err)
}

// MainMissing is RequireOrSkip for a TestMain that needs err's dependency
// for the whole package: when err is not nil it says so and returns the
// exit code (1 with CI=true; 0 otherwise, the package's tests skipped) and
// true.
func MainMissing(err error) (code int, missing bool) {
	if err == nil {
		return 0, false
	}
	if os.Getenv("CI") == "true" {
		fmt.Fprintf(os.Stderr, "%v; CI=true, so this is a failure\n", err)
		return 1, true
	}
	fmt.Printf("%v; skipping this package's tests (set CI=true to make this a failure)\n", err)
	return 0, true
}

// host is the address the server binds to.
func (s *Server) host() string {
	if s.cfg.Host == "" {
		return "127.0.0.1"
	}
	return s.cfg.Host
}

func (s *Server) args() []string {
	s.mu.Lock()
	appendOnly, fsync := s.cfg.AppendOnly, s.cfg.AppendFsync
	s.mu.Unlock()
	if fsync == "" {
		fsync = "always"
	}
	_, port, _ := net.SplitHostPort(s.addr)
	var a []string
	if s.cfg.ConfigFile != "" {
		a = append(a, s.cfg.ConfigFile)
	}
	if s.cfg.TLS != nil {
		a = append(a, "--port", "0", "--tls-port", port)
	} else {
		a = append(a, "--port", port)
	}
	a = append(a,
		"--bind", s.host(),
		"--dir", s.cfg.Dir,
		"--save", "",
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", filepath.Join(s.cfg.Dir, "redis.log"),
	)
	if appendOnly {
		a = append(a, "--appendonly", "yes", "--appendfsync", fsync)
		if s.cfg.AOFTimestamps {
			a = append(a, "--aof-timestamp-enabled", "yes")
		}
	} else {
		a = append(a, "--appendonly", "no")
	}
	return append(a, s.cfg.Args...)
}

func (s *Server) start() error {
	name, args := s.cfg.Binary, s.args()
	if len(s.cfg.Prefix) > 0 {
		name, args = s.cfg.Prefix[0], append(append(slices.Clone(s.cfg.Prefix[1:]), s.cfg.Binary), args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = s.cfg.Dir
	cmd.Env = append(os.Environ(), s.cfg.Env...)
	// Own process group, so a Ctrl-C on the test does not reach it first and
	// signals target only this server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisproc: starting %s: %w", s.cfg.Binary, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := s.waitReady(exited); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		log, _ := os.ReadFile(filepath.Join(s.cfg.Dir, "redis.log"))
		return fmt.Errorf("redisproc: %s on %s not ready: %w\n%s", s.cfg.Binary, s.addr, err, tail(log, 2000))
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (s *Server) waitReady(exited chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, DisableIdentity: true, Protocol: 2,
		TLSConfig: s.cfg.TLS})
	defer c.Close()
	deadline := time.Now().Add(s.cfg.StartTimeout)
	for {
		select {
		case <-exited:
			return errors.New("process exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Addr returns host:port.
func (s *Server) Addr() string { return s.addr }

// Dir returns the working directory.
func (s *Server) Dir() string { return s.cfg.Dir }

// PID returns the process id, or 0 when not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("redisproc: %s is not running", s.addr)
	}
	return s.cmd.Process.Signal(sig)
}

// Pause stops the process with SIGSTOP: connections are still accepted by the
// kernel, nothing answers. It returns once the process has stopped (where
// /proc tells: Linux), for at most five seconds: the signal is delivered
// asynchronously, and on a loaded machine the server could otherwise still
// answer a command sent after Pause returned.
func (s *Server) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := s.PID()
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // no /proc: nothing to wait on
		}
		// The state follows the command's closing parenthesis: T or t.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisproc: %s (pid %d) did not stop within 5s of SIGSTOP", s.addr, pid)
		}
		time.Sleep(time.Millisecond) // polling the kernel's state, bounded above
	}
}

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

// Kill sends SIGKILL and waits for the process to exit. Data not persisted
// is lost.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-exited
	return nil
}

// Restart starts the process again on the same port and directory (after Kill).
// With AppendOnly the AOF is replayed.
func (s *Server) Restart() error {
	if err := s.Kill(); err != nil {
		return err
	}
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond) // the port may linger briefly after a kill
	}
	return err
}

// Relaunch kills the process if it runs and starts it again on the same port
// and directory, with AOF (appendfsync always) on or off as appendOnly says;
// the setting sticks for later restarts. An existing AOF in the directory is
// replayed when appendOnly is true: remove it first to start empty. While the
// port is still held by the old process, Relaunch retries every 50ms until
// ctx ends; the error then names the address and wraps ctx.Err().
func (s *Server) Relaunch(ctx context.Context, appendOnly bool) error {
	return s.RelaunchAOF(ctx, appendOnly, "always")
}

// RelaunchAOF is Relaunch with the appendfsync policy fsync ("always",
// "everysec" or "no"; it sticks, as appendOnly does).
func (s *Server) RelaunchAOF(ctx context.Context, appendOnly bool, fsync string) error {
	switch fsync {
	case "always", "everysec", "no":
	default:
		return fmt.Errorf("redisproc: appendfsync %q is not always, everysec or no", fsync)
	}
	if err := s.Kill(); err != nil {
		return err
	}
	s.mu.Lock()
	s.cfg.AppendOnly, s.cfg.AppendFsync = appendOnly, fsync
	s.mu.Unlock()
	for {
		err := s.start()
		if err == nil {
			return nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("redisproc: relaunching %s: %w (last error: %v)", s.addr, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Running reports whether the process is alive (it may be paused).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Stop kills the process and removes the directory if Start created it.
// It is idempotent.
func (s *Server) Stop() error {
	err := s.Kill()
	s.cleanupDir()
	return err
}

func (s *Server) cleanupDir() {
	if s.ownsDir {
		_ = os.RemoveAll(s.cfg.Dir)
		s.ownsDir = false
	}
}

// WaitGone polls key on client every 5 ms until it no longer exists and
// returns how long that took, or an error once limit has passed or a command
// fails. Tests use it to measure when a key really expires on a server whose
// clock is skewed.
func WaitGone(ctx context.Context, client *redis.Client, key string, limit time.Duration) (time.Duration, error) {
	begin := time.Now()
	for {
		n, err := client.Exists(ctx, key).Result()
		if err != nil {
			return time.Since(begin), err
		}
		if n == 0 {
			return time.Since(begin), nil
		}
		if time.Since(begin) > limit {
			return time.Since(begin), fmt.Errorf("redisproc: key %q still exists after %v", key, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitExit waits until the process has exited by itself (not killed
// through Kill), for at most limit or until ctx ends, and reports whether
// it has.
func (s *Server) WaitExit(ctx context.Context, limit time.Duration) bool {
	s.mu.Lock()
	exited := s.exited
	running := s.cmd != nil
	s.mu.Unlock()
	if !running {
		return false
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-exited:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
