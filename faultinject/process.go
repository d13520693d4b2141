package faultinject

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/faultinject/clockskew"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// processBackend runs each master as a redis-server process from PATH, in its
// own temporary directory, under libfaketime when clockskew is available.
type processBackend struct {
	cfg    Config
	bin    string
	kit    *clockskew.Kit // nil when clock skew is unavailable
	kitErr error          // why kit is nil
}

func newProcessBackend(ctx context.Context, cfg Config) (*processBackend, error) {
	bin, err := redisproc.LookPath()
	if err != nil {
		return nil, err
	}
	b := &processBackend{cfg: cfg, bin: bin}
	if b.kitErr = clockskew.Available(); b.kitErr == nil {
		// The shim is cached by content hash in clockskew.DefaultDir, shared
		// by every run, so it is built once per machine and not ours to remove.
		b.kit, b.kitErr = clockskew.Prepare(ctx, "")
	}
	if b.kitErr != nil {
		cfg.Logf("faultinject: process backend without clock faults: %v", b.kitErr)
	}
	return b, nil
}

func (b *processBackend) Kind() BackendKind { return Process }

func (b *processBackend) Close(context.Context) error { return nil }

func (b *processBackend) StartServer(ctx context.Context, spec ServerSpec) (server, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s-node%d-", spec.Label, spec.Index))
	if err != nil {
		return nil, fmt.Errorf("faultinject: temp dir for master %d: %w", spec.Index, err)
	}
	s := &processServer{b: b, dir: dir, persistence: spec.Persistence}
	fail := func(err error) (server, error) {
		return nil, errors.Join(err, s.release(context.WithoutCancel(ctx)))
	}
	if b.cfg.Tmpfs {
		if err := mountTmpfs(dir); err != nil {
			return fail(err)
		}
		s.tmpfs = true
	}
	rc := redisproc.Config{Binary: b.bin, Port: spec.Port, Dir: dir, AppendOnly: spec.Persistence.aof(),
		AppendFsync: spec.Persistence.fsync(), AOFTimestamps: true}
	if b.cfg.Netns {
		if s.ns, err = newNetns(ctx, spec.Label, spec.Index); err != nil {
			return fail(err)
		}
		rc.Host, rc.Prefix = s.ns.serverIP, s.ns.exec()
	}
	if b.kit != nil {
		s.tsFile = filepath.Join(dir, "faketime.rc")
		if s.clock, err = clockskew.NewClock(s.tsFile, time.Now()); err != nil {
			return fail(fmt.Errorf("faultinject: clock file for master %d: %w", spec.Index, err))
		}
		rc.Env = b.kit.Env(s.tsFile)
	}
	if s.proc, err = redisproc.Start(rc); err != nil {
		return fail(err)
	}
	if s.clock != nil {
		if err := s.calibrate(ctx); err != nil {
			return fail(err)
		}
	}
	return s, nil
}

// processServer is one redis-server process.
type processServer struct {
	b      *processBackend
	dir    string
	tsFile string
	proc   *redisproc.Server // nil until started
	tmpfs  bool              // dir is a tmpfs of its own (Config.Tmpfs)
	ns     *netns            // the master's own network (Config.Netns), or nil

	mu          sync.Mutex
	clock       *clockskew.Clock // nil without clock skew
	persistence Persistence      // of the current (or last) run
	full        bool             // FillDisk filled its tmpfs
	closed      bool
}

func (s *processServer) Addr() string { return s.proc.Addr() }

func (s *processServer) Kill(context.Context) error { return s.proc.Kill() }

// Running reports whether the redis-server process is alive.
func (s *processServer) Running() bool { return s.proc.Running() }

func (s *processServer) Pause(context.Context) error { return s.proc.Pause() }

func (s *processServer) Resume(context.Context) error { return s.proc.Resume() }

// Start starts the killed process again. Unless both the last run and this
// one keep an append-only file (keeps), the persisted files are removed
// first, so the master comes back empty. A clock skew in force carries over to the new process.
func (s *processServer) Start(ctx context.Context, p Persistence) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server is closed")
	}
	if s.proc.Running() {
		return fmt.Errorf("redis-server on %s is running", s.proc.Addr())
	}
	if !keeps(s.persistence, p) {
		for _, f := range []string{"appendonlydir", "appendonly.aof", "dump.rdb"} {
			if err := os.RemoveAll(filepath.Join(s.dir, f)); err != nil {
				return err
			}
		}
	}
	unskewed := true
	if s.clock != nil {
		// libfaketime's rate is relative to the process start: keep the
		// skew the old process had now, from the new process's start.
		now := time.Now()
		unskewed = s.clock.Offset(now) == 0 && s.clock.Rate() == 1
		if err := s.clock.Restarted(now); err != nil {
			return fmt.Errorf("rewriting clock file %s: %w", s.tsFile, err)
		}
	}
	if err := s.proc.RelaunchAOF(ctx, p.aof(), cmp.Or(p.fsync(), "always")); err != nil {
		return err
	}
	s.persistence = p
	if s.clock != nil && unskewed {
		// Calibrate shows the process "+0 x2" for one call: only safe
		// without a skew in force.
		return s.calibrate(ctx)
	}
	return nil
}

// calibrate measures the process's libfaketime start time with the TIME
// command, so that later rate changes are exact.
func (s *processServer) calibrate(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.proc.Addr(), MaxRetries: -1, DialerRetries: 1,
		ContextTimeoutEnabled: true, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := s.clock.Calibrate(ctx, func(ctx context.Context) (time.Time, error) { return c.Time(ctx).Result() })
	if err != nil {
		return fmt.Errorf("calibrating the clock of redis-server on %s: %w", s.proc.Addr(), err)
	}
	return nil
}

// SetClock rewrites the process's libfaketime timestamp file; the process
// sees the new clock at its next clock read.
func (s *processServer) SetClock(_ context.Context, offset time.Duration, rate float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clock == nil {
		return fmt.Errorf("clock faults need libfaketime on the process backend: %w", s.b.kitErr)
	}
	return s.clock.Set(offset, rate)
}

// Close stops the process and removes its directory (and its tmpfs and
// network namespace).
func (s *processServer) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.release(ctx)
}

// release stops the process, if one was started, and removes what the
// server made: its tmpfs, its network namespace and its directory.
func (s *processServer) release(ctx context.Context) error {
	var errs []error
	if s.proc != nil {
		errs = append(errs, s.proc.Stop())
	}
	if s.tmpfs {
		errs = append(errs, unmountTmpfs(s.dir))
	}
	if s.ns != nil {
		errs = append(errs, s.ns.remove(ctx))
	}
	return errors.Join(append(errs, os.RemoveAll(s.dir))...)
}

// serverTime is the server's wall clock now, as its libfaketime clock
// file says (the real time without clock skew).
func (s *processServer) serverTime() time.Time {
	now := time.Now()
	if s.clock != nil {
		return now.Add(s.clock.Offset(now))
	}
	return now
}

// LoseAOFTail kills the server, as a host crash does, and cuts from its
// append-only file the writes it logged in the second of the crash (by its
// own clock), which appendfsync everysec had not synced: redis-check-aof
// --truncate-to-timestamp at the second before. The server stays down
// (Start brings it back from what is left). It needs AOFEverySec.
func (s *processServer) LoseAOFTail(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.persistence != AOFEverySec {
		return fmt.Errorf("losing the AOF's last second needs a master with %s, this one has %s", AOFEverySec, s.persistence)
	}
	if !s.proc.Running() {
		return fmt.Errorf("redis-server on %s is not running", s.proc.Addr())
	}
	crash := s.serverTime()
	if err := s.proc.Kill(); err != nil {
		return err
	}
	return redisproc.TruncateAOF(ctx, s.dir, crash.Unix()-1)
}

// diskProbeKey is the key FillDisk writes until Redis notices its disk is
// full; it expires by itself.
const diskProbeKey = "quorumlock:faultinject:disk-probe"

// FillDisk fills the server's tmpfs (Config.Tmpfs), then writes a probe
// key until Redis meets the full disk (a small write may still fit in the
// AOF file's last page). With AOFEverySec the AOF write then fails (INFO
// persistence aof_last_write_status:err) and Redis answers every later
// write with MISCONF; with AOFAlways Redis exits (it cannot go on when a
// write it must fsync fails), and FillDisk returns once it has. A master
// without an append-only file writes nothing to its disk: an error.
func (s *processServer) FillDisk(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.tmpfs:
		return errors.New("a full disk needs a master on a tmpfs of its own (Config.Tmpfs)")
	case !s.persistence.aof():
		return fmt.Errorf("a full disk changes nothing on a master without an append-only file (persistence %s)", s.persistence)
	}
	if err := fillTmpfs(s.dir); err != nil {
		return err
	}
	s.full = true
	c := redis.NewClient(&redis.Options{Addr: s.proc.Addr(), MaxRetries: -1, DialerRetries: 1,
		ContextTimeoutEnabled: true, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	probe := strings.Repeat("x", 8192)
	for range 200 { // bounded: the AOF write fails within a few probes
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Set(pctx, diskProbeKey, probe, 10*time.Second).Err()
		cancel()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "MISCONF"):
			return nil
		case err != nil && s.persistence == AOFAlways:
			if s.proc.WaitExit(ctx, 5*time.Second) {
				return nil
			}
			return fmt.Errorf("redis-server on %s (appendfsync always) failed a write on a full disk but did not exit: %w", s.proc.Addr(), err)
		case err != nil:
			return fmt.Errorf("writing a probe to redis-server on %s: %w", s.proc.Addr(), err)
		}
		if st, err := s.persistenceStatus(ctx, c); err == nil && st["aof_last_write_status"] == "err" {
			return nil
		}
	}
	return fmt.Errorf("redis-server on %s still writes its AOF after 200 probes on a full disk", s.proc.Addr())
}

// persistenceStatus reads INFO persistence.
func (s *processServer) persistenceStatus(ctx context.Context, c *redis.Client) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	text, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// FreeDisk removes what FillDisk wrote and gives the tmpfs its room back.
// A server that is running then writes its AOF again (Redis retries the
// failed write once a second): FreeDisk waits until it says so. It
// reports whether the server had exited meanwhile (AOFAlways on a full
// disk), for the caller to start it again.
func (s *processServer) FreeDisk(ctx context.Context) (exited bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full {
		return false, nil
	}
	if err := freeTmpfs(s.dir); err != nil {
		return false, err
	}
	s.full = false
	if !s.proc.Running() {
		return true, nil
	}
	if !s.persistence.aof() {
		return false, nil
	}
	c := redis.NewClient(&redis.Options{Addr: s.proc.Addr(), MaxRetries: -1, DialerRetries: 1,
		ContextTimeoutEnabled: true, DisableIdentity: true, Protocol: 2})
	defer c.Close()
	var last error
	for range 100 { // bounded: Redis retries the AOF write once a second
		st, err := s.persistenceStatus(ctx, c)
		if err == nil && st["aof_last_write_status"] != "err" {
			return false, nil
		}
		last = err
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("waiting for redis-server on %s to write its AOF again: %w", s.proc.Addr(), ctx.Err())
		case <-t.C:
		}
	}
	return false, fmt.Errorf("redis-server on %s still fails to write its AOF 10s after its disk was freed (last INFO error: %v)", s.proc.Addr(), last)
}

// Drop makes the server's network namespace (Config.Netns) drop its TCP
// traffic in direction dir; Pass removes the drops.
func (s *processServer) Drop(ctx context.Context, dir Direction) error {
	if s.ns == nil {
		return errors.New("a one-way partition needs a master in a network namespace of its own (Config.Netns)")
	}
	_, port, _ := net.SplitHostPort(s.proc.Addr())
	return s.ns.drop(ctx, port, dir)
}

// Pass removes the drops of Drop.
func (s *processServer) Pass(ctx context.Context) error {
	if s.ns == nil {
		return nil
	}
	return s.ns.pass(ctx)
}
