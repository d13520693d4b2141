// Package pgserver starts and stops a PostgreSQL server for tests: a new
// cluster (initdb) in a temporary directory, listening on a free 127.0.0.1
// port and on a Unix socket in that directory, with trust authentication
// for the user "postgres". It uses the binaries of Debian's postgresql
// package (/usr/lib/postgresql/VERSION/bin, the highest version there) or,
// failing that, initdb and postgres from PATH. PostgreSQL refuses to run as
// root: as root, the server runs as the system user "postgres" (which the
// package creates) and owns the directory, made under $TMPDIR when that
// user can reach it and under /tmp otherwise. It depends on the standard
// library only; open the DSN with any driver (pgx's stdlib adapter in this
// module's tests).
//
// Another module of this repository uses it with a require of
// github.com/quorumlock/quorumlock/fence/fencetest v0.0.0 and a replace
// directive to this module's directory, as this module does for the root.
package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// ErrNoBinary means that PostgreSQL's server binaries are not installed.
var ErrNoBinary = errors.New("pgserver: PostgreSQL not found in /usr/lib/postgresql/*/bin or PATH (install it: apt-get install -y postgresql)")

// Server is one running (or stopped) PostgreSQL server. Its methods are
// safe for concurrent use.
type Server struct {
	dir  string
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
}

// BinDir returns the directory of PostgreSQL's initdb and postgres, or
// ErrNoBinary.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if executable(filepath.Join(dirs[i], "initdb")) && executable(filepath.Join(dirs[i], "postgres")) {
			return dirs[i], nil
		}
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", ErrNoBinary
	}
	dir := filepath.Dir(initdb)
	if !executable(filepath.Join(dir, "postgres")) {
		return "", ErrNoBinary
	}
	return dir, nil
}

// version is the major version in /usr/lib/postgresql/VERSION/bin.
func version(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return v
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Start creates a cluster in a new temporary directory and starts a server
// on it, then waits until it accepts connections or ctx ends. On error it
// removes what it made; the error holds the end of the server's log.
func Start(ctx context.Context) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	base := os.TempDir()
	if cred != nil && !reachable(base) {
		base = "/tmp" // the postgres user must reach its directory
	}
	dir, err := os.MkdirTemp(base, "quorumlock-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			s.removeDir()
			return nil, fmt.Errorf("pgserver: giving %s to the postgres user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
	initdb.Dir, initdb.SysProcAttr = dir, &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		s.removeDir()
		return nil, fmt.Errorf("pgserver: initdb: %w\n%s", err, tail(out))
	}
	var lastErr error
	for range 5 { // another process may take the free port first
		if s.port, err = freePort(); err != nil {
			s.removeDir()
			return nil, err
		}
		if lastErr = s.start(ctx, bin, data, cred); lastErr == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	s.removeDir()
	return nil, lastErr
}

// StartT starts a server for a test and stops it in t.Cleanup. Missing
// binaries fail the test when the CI environment variable is "true" and
// skip it otherwise.
func StartT(t testing.TB) *Server {
	t.Helper()
	_, err := BinDir()
	redisproc.RequireOrSkip(t, err) // the project's one rule for a missing test dependency
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping PostgreSQL: %v", err)
		}
	})
	return s
}

// credential is the postgres user's when we are root (PostgreSQL refuses
// root), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgserver: running as root, and PostgreSQL refuses root: %w (the postgresql package creates the user postgres)", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgserver: user postgres has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// reachable reports whether every directory from / to dir lets others in
// (the x bit for others), as the postgres user needs when we are root.
func reachable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	logPath := filepath.Join(s.dir, "postgres-"+strconv.Itoa(s.port)+".log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	// fsync off: a test server, whose data dies with it.
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.port),
		"-k", s.dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, log, log
	// Its own process group (a Ctrl-C on the test does not reach it first),
	// and SIGKILL if the test process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("pgserver: starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.log = cmd, exited, log
	s.mu.Unlock()
	if err := s.waitReady(ctx, bin, exited); err != nil {
		_ = s.kill()
		out, _ := os.ReadFile(logPath)
		return fmt.Errorf("pgserver: postgres on 127.0.0.1:%d not ready: %w\n%s", s.port, err, tail(out))
	}
	return nil
}

// waitReady polls pg_isready (0: accepting connections) every 20 ms until
// it answers yes, the server exits or ctx ends.
func (s *Server) waitReady(ctx context.Context, bin string, exited chan struct{}) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		check := exec.CommandContext(ctx, filepath.Join(bin, "pg_isready"), "-q", "-h", "127.0.0.1",
			"-p", strconv.Itoa(s.port), "-U", "postgres", "-d", "postgres", "-t", "1")
		if check.Run() == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("the server exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Addr returns the server's TCP address, 127.0.0.1:PORT.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DSN returns a connection URL for the user postgres and the database
// "postgres" (no password, no TLS), as pgx and lib/pq read it.
func (s *Server) DSN() string {
	return "postgres://postgres@" + s.Addr() + "/postgres?sslmode=disable"
}

// PID returns the server's (postmaster's) process id, or 0 when stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop shuts the server down (SIGINT, PostgreSQL's fast shutdown; SIGKILL
// after 10 s), waits for it to exit and removes its directory. It is
// idempotent.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	var err error
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGINT)
		t := time.NewTimer(10 * time.Second)
		select {
		case <-exited:
		case <-t.C:
			err = fmt.Errorf("pgserver: postgres (pid %d) did not stop within 10s of SIGINT; killed", cmd.Process.Pid)
		}
		t.Stop()
		if kerr := s.kill(); err == nil {
			err = kerr
		}
	}
	s.removeDir()
	return err
}

// kill sends the server SIGKILL and waits for it to exit.
func (s *Server) kill() error {
	s.mu.Lock()
	cmd, exited, log := s.cmd, s.exited, s.log
	s.cmd, s.log = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	<-exited
	if log != nil {
		return log.Close()
	}
	return nil
}

func (s *Server) removeDir() {
	s.mu.Lock()
	dir := s.dir
	s.dir = ""
	s.mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// tail is the end of a log for an error message.
func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
