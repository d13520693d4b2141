package faultinject

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	mserver "github.com/alicebob/miniredis/v2/server"
)

// memoryBackend runs each master in-process with miniredis. It needs nothing
// but Go. Its limits are listed in docs/faultinject.md: it is never the only
// evidence for a safety claim.
type memoryBackend struct{ cfg Config }

func newMemoryBackend(cfg Config) *memoryBackend { return &memoryBackend{cfg: cfg} }

func (b *memoryBackend) Kind() BackendKind { return Memory }

func (b *memoryBackend) Close(context.Context) error { return nil }

// memoryDBs is how many logical databases a backward clock jump adjusts.
const memoryDBs = 16

func (b *memoryBackend) StartServer(ctx context.Context, spec ServerSpec) (server, error) {
	now := time.Now()
	s := &memoryServer{
		m:           miniredis.NewMiniRedis(),
		persistence: spec.Persistence,
		clk:         vclock{anchorReal: now, anchorVirt: now.Round(0), rate: 1},
	}
	// TTLs follow the clock given to SetTime, which the pre-command hook
	// sets to the virtual clock before every command.
	s.m.SetTime(s.clk.now())
	s.m.ClockTTL(true)
	if err := s.m.StartAddr(fmt.Sprintf("127.0.0.1:%d", spec.Port)); err != nil {
		return nil, fmt.Errorf("miniredis on port %d: %w", spec.Port, err)
	}
	s.addr = s.m.Addr()
	s.mu.Lock()
	s.started()
	s.mu.Unlock()
	return s, nil
}

// memoryServer is one miniredis master with a virtual wall clock.
//
// Lock order: timeMu before the miniredis lock; mu is never held while
// waiting for miniredis to close (its connections may be in hook, which takes
// mu briefly).
type memoryServer struct {
	m    *miniredis.Miniredis
	addr string

	timeMu sync.Mutex // guards clk and orders SetTime calls
	clk    vclock

	mu          sync.Mutex
	running     bool
	closed      bool
	paused      chan struct{} // non-nil while paused; closed by Resume
	dead        chan struct{} // closed by Kill, releases paused commands
	persistence Persistence
	// run is the current run's identity, read by the hook without mu (a
	// script's INFO reaches the hook while the script holds the miniredis
	// lock).
	run atomic.Pointer[memoryRun]
}

// memoryRun identifies one run of a memoryServer.
type memoryRun struct {
	id     string
	replID string // master_replid: new with each run, as after a restart
	since  time.Time
}

// started records a new run and installs the hook; call with mu held.
func (s *memoryServer) started() {
	var b, r [20]byte
	_, _ = rand.Read(b[:])
	_, _ = rand.Read(r[:])
	s.run.Store(&memoryRun{id: hex.EncodeToString(b[:]), replID: hex.EncodeToString(r[:]), since: time.Now()})
	s.running = true
	s.dead = make(chan struct{})
	s.m.Server().SetPreHook(s.hook)
}

// hook runs before every command: it holds commands while paused, moves the
// miniredis clock to the virtual clock, and answers INFO server,
// replication and cpu (which miniredis lacks) so that restart detection works
// and the fencing scripts can read the run.
//
// Commands a Lua script issues also pass through the hook, on a fresh peer,
// while the script's command holds the miniredis lock: those must not touch
// the lock (SetTime would deadlock) nor wait for Resume; see scriptPeer.
func (s *memoryServer) hook(c *mserver.Peer, cmd string, args ...string) bool {
	if scriptPeer(c) {
		// The fencing scripts read the run's identity (INFO server).
		if cmd == "INFO" && infoSections(args) {
			c.WriteBulk(s.info())
			return true
		}
		return false
	}
	s.mu.Lock()
	paused, dead := s.paused, s.dead
	s.mu.Unlock()
	if paused != nil {
		select {
		case <-paused:
		case <-dead:
			return true // killed while paused: the command is lost with the connection
		}
	}
	s.syncTime()
	if cmd == "INFO" && infoSections(args) {
		c.WriteBulk(s.info())
		return true
	}
	return false
}

// info is the INFO text the hook answers: the run's identity, and its main
// thread's CPU time as that of a server that never idles (the real time
// since its start: a bound of its age no clock step moves, as on Redis).
func (s *memoryServer) info() string {
	r := s.run.Load()
	up := time.Since(r.since)
	info := fmt.Sprintf("# Server\r\nredis_version:0.0.0-miniredis\r\nredis_mode:standalone\r\nrun_id:%s\r\nuptime_in_seconds:%d\r\n",
		r.id, int64(up.Seconds()))
	info += "\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_replid:" + r.replID + "\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n"
	// Memory and persistence as they are: nothing is evicted, nothing
	// survives a kill.
	info += "\r\n# Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n\r\n# Persistence\r\naof_enabled:0\r\n"
	info += fmt.Sprintf("\r\n# CPU\r\nused_cpu_sys_main_thread:%.6f\r\nused_cpu_user_main_thread:0.000000\r\n", up.Seconds())
	return info
}

// infoSections reports whether an INFO command asks only for the server,
// replication, memory, persistence and cpu sections (some of them, as
// Redis 7 accepts several), which this hook answers (all five).
func infoSections(args []string) bool {
	if len(args) == 0 {
		return false
	}
	for _, a := range args {
		switch strings.ToLower(a) {
		case "server", "replication", "memory", "persistence", "cpu":
		default:
			return false
		}
	}
	return true
}

// scriptPeer reports whether c is the peer of a call made by a Lua script.
// miniredis gives such a peer, from birth, a per-connection context whose
// unexported bool field "nested" is true; a client connection's context is
// nil until its first command runs, and has nested false. If a miniredis
// version changed that layout, every peer with a context would count as a
// script's: clocks and pauses would then apply to the first command of each
// connection only, but nothing would deadlock.
func scriptPeer(c *mserver.Peer) bool {
	if c.Ctx == nil {
		return false
	}
	v := reflect.ValueOf(c.Ctx)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return true
	}
	f := v.Elem().FieldByName("nested")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		return true
	}
	return f.Bool()
}

func (s *memoryServer) syncTime() {
	s.timeMu.Lock()
	defer s.timeMu.Unlock()
	s.m.SetTime(s.clk.now())
}

func (s *memoryServer) Addr() string { return s.addr }

func (s *memoryServer) Kill(context.Context) error {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return nil
	}
	s.running = false
	s.paused = nil
	close(s.dead)
	s.mu.Unlock()
	s.m.Close()
	return nil
}

// Start restarts miniredis on the same port. Its data is kept (with TTLs
// that kept running on the virtual clock) only when the last run and this one
// keep an append-only file (AOFAlways or AOFEverySec: the memory backend
// syncs perfectly); otherwise it is flushed.
func (s *memoryServer) Start(ctx context.Context, p Persistence) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server is closed")
	}
	if s.running {
		return fmt.Errorf("miniredis on %s is running", s.addr)
	}
	if !keeps(s.persistence, p) {
		s.m.FlushAll()
	}
	for {
		err := s.m.Restart()
		if err == nil {
			break
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("restarting miniredis on %s: %w (last error: %v)", s.addr, ctx.Err(), err)
		case <-t.C:
		}
	}
	s.persistence = p
	s.started()
	return nil
}

// Pause holds every command, on open and new connections, in the hook until
// Resume; connections are accepted, and the virtual clock keeps running.
func (s *memoryServer) Pause(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return fmt.Errorf("miniredis on %s is not running", s.addr)
	}
	if s.paused == nil {
		s.paused = make(chan struct{})
	}
	return nil
}

func (s *memoryServer) Resume(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused != nil {
		close(s.paused)
		s.paused = nil
	}
	return nil
}

// SetClock re-anchors the virtual clock. A forward jump expires keys at the
// next command; a backward jump lengthens every key TTL by the jump (as Redis
// does, since it stores absolute expiry times), in databases 0-15.
func (s *memoryServer) SetClock(_ context.Context, offset time.Duration, rate float64) error {
	s.timeMu.Lock()
	defer s.timeMu.Unlock()
	old := s.clk.now()
	now := time.Now()
	s.clk = vclock{anchorReal: now, anchorVirt: now.Round(0).Add(offset), rate: rate}
	nv := s.clk.now()
	if back := old.Sub(nv); back > 0 {
		s.m.SetTime(old) // expire what is due at the old time first
		for i := range memoryDBs {
			db := s.m.DB(i)
			for _, k := range db.Keys() {
				if ttl := db.TTL(k); ttl > 0 {
					db.SetTTL(k, ttl+back)
				}
			}
		}
	}
	s.m.SetTime(nv)
	return nil
}

func (s *memoryServer) Close(ctx context.Context) error {
	err := s.Kill(ctx)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return err
}

// vclock is a virtual wall clock: anchorVirt at real time anchorReal, running
// at rate. now never goes backwards between two re-anchorings.
type vclock struct {
	anchorReal time.Time // with a monotonic reading
	anchorVirt time.Time // wall only
	rate       float64
	last       time.Time
}

func (v *vclock) now() time.Time {
	t := v.anchorVirt.Add(time.Duration(float64(time.Since(v.anchorReal)) * v.rate))
	if t.Before(v.last) {
		return v.last
	}
	v.last = t
	return t
}
