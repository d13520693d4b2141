package faultinject

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	rc := redisproc.Config{Binary: b.bin, Port: spec.Port, Dir: dir, AppendOnly: spec.Persistence == AOFAlways}
	if b.kit != nil {
		s.tsFile = filepath.Join(dir, "faketime.rc")
		if s.clock, err = clockskew.NewClock(s.tsFile, time.Now()); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("faultinject: clock file for master %d: %w", spec.Index, err)
		}
		rc.Env = b.kit.Env(s.tsFile)
	}
	if s.proc, err = redisproc.Start(rc); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if s.clock != nil {
		if err := s.calibrate(ctx); err != nil {
			_ = s.proc.Stop()
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	return s, nil
}

// processServer is one redis-server process.
type processServer struct {
	b      *processBackend
	dir    string
	tsFile string
	proc   *redisproc.Server

	mu          sync.Mutex
	clock       *clockskew.Clock // nil without clock skew
	persistence Persistence      // of the current (or last) run
	closed      bool
}

func (s *processServer) Addr() string { return s.proc.Addr() }

func (s *processServer) Kill(context.Context) error { return s.proc.Kill() }

func (s *processServer) Pause(context.Context) error { return s.proc.Pause() }

func (s *processServer) Resume(context.Context) error { return s.proc.Resume() }

// Start starts the killed process again. Unless both the last run and this
// one use AOFAlways, the persisted files are removed first, so the master
// comes back empty. A clock skew in force carries over to the new process.
func (s *processServer) Start(ctx context.Context, p Persistence) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server is closed")
	}
	if s.proc.Running() {
		return fmt.Errorf("redis-server on %s is running", s.proc.Addr())
	}
	if !(s.persistence == AOFAlways && p == AOFAlways) {
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
	if err := s.proc.Relaunch(ctx, p == AOFAlways); err != nil {
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

// Close stops the process and removes its directory.
func (s *processServer) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.proc.Stop()
	return errors.Join(err, os.RemoveAll(s.dir))
}
