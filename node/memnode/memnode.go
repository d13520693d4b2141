// Package memnode is an in-memory Redis master for tests: a redlock.Node
// that keeps lock keys with TTLs on its own clock, with knobs to delay,
// pause, fail, skew, restart it and fill its disk (SetDiskFull: writes
// refused with MISCONF), like hashicorp/raft's in-memory transport.
//
// It models what matters for a lock: a command applies when it reaches the
// node, not when the caller stops waiting. A call whose context ends while
// the node is paused or slow returns the context's error, and its command
// still applies later (a straggler), exactly as a real paused Redis runs the
// commands it had queued when it resumes. A call whose context has ended
// before it is made sends nothing: its error wraps redlock.ErrNotSent and
// ctx.Err(). It never starts a goroutine: late commands wait in timers and
// in the node's queue.
//
// It answers as a Redis master running package redisnode's Lua scripts
// does, step by step, on one keyspace with the key names redisnode uses: a
// lock's release guards, fencing counter, waiting writers and fair queue
// live in keys derived from its name ("{name}:release-guard:<hash>",
// "{name}:fence", "{name}:waiting", "{name}:queue", "{name}:queue:ttl";
// name and the suffix when name has a hash tag), which a lock named like
// one of them meets, as on Redis; one name used as a mutex and as a shared
// lock fails with WRONGTYPE; and a name with '}' but no
// valid hash tag is refused as redisnode refuses it. Package nodetest
// checks this on memnode and on real servers (TestNodetest here,
// TestNodetestStandalone and TestNodetestCluster in redisnode).
//
// It implements every optional capability of package redlock: fencing
// (with expiring counters), Peek, the lock shapes, the fair queue
// (AcquireQueued, LeaveQueue; queue.go) and release notifications (Watch;
// watch.go), which it delivers itself, without a goroutine, after the
// release's change and outside its lock.
//
// It reads time through the time package, so inside a testing/synctest
// bubble its TTLs, delays and uptime run on the bubble's virtual clock and
// tests of expiry are instant and deterministic. A Node is safe for
// concurrent use by multiple goroutines.
//
// To model a master that is down (a refused connection), make it fail with
// an error wrapping redlock.ErrNotSent (Node.Fail): the client then knows
// the command never reached it. A plain error means the outcome is unknown,
// and the client keeps retrying the release of a key the master may hold,
// as it must with a real master. The package Example shows it;
// TestInvoiceJobOnVirtualTime in memnode/example_test.go is the pattern for
// testing code that uses the lock inside a testing/synctest bubble.
package memnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"maps"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/redisinfo"
	"github.com/quorumlock/quorumlock/redlock"
)

// Node is one in-memory master. Create it with New.
type Node struct {
	addr string

	mu      sync.Mutex
	data    map[string]*value // the keyspace (keyspace.go)
	sweepAt int               // len(data) at which sweepLocked next runs
	runID   string
	started time.Time // the run's start (real time)
	// startedClock is the run's start on the node clock, from which
	// uptime_in_seconds is counted as Redis counts it (a clock step moves
	// it).
	startedClock time.Time
	epoch        int               // bumped by Restart: commands sent to an older run are lost
	saved        map[string]*value // the keyspace as of the last Checkpoint
	delay        time.Duration
	diskFull     bool // SetDiskFull: writes fail with ErrDiskFull (diskfull.go)
	failErr      error
	paused       bool
	queue        []*command
	// The node clock reads base + (now - anchor) * rate.
	anchor time.Time
	base   time.Time
	rate   float64
	// Watches (watch.go): the live watches by key, the notifications owed
	// to them, and whether a goroutine is delivering them.
	watches    map[string]map[*watch]struct{}
	pending    []note
	owed       atomic.Bool // pending is not empty (set and cleared under mu)
	delivering bool
}

// command is one call on its way to the node.
type command struct {
	epoch int
	apply func()
	done  chan struct{}
	err   error // the reply's error (a full disk's), set before done closes
}

var (
	_ redlock.FenceExpiryNode = (*Node)(nil)
	_ redlock.PeekNode        = (*Node)(nil)
	_ redlock.QueueNode       = (*Node)(nil)
)

// New returns a running node named addr (its Addr), with no delay and a
// clock that follows time.Now.
func New(addr string) *Node {
	now := time.Now()
	n := &Node{addr: addr, anchor: now, base: now, rate: 1}
	n.forgetLocked()
	n.newRun()
	return n
}

func (n *Node) newRun() {
	var b [20]byte
	_, _ = rand.Read(b[:])
	n.runID = hex.EncodeToString(b[:])
	n.started = time.Now()
	n.startedClock = n.clock()
	n.epoch++
}

// clock returns the node's time; n.mu must be held.
func (n *Node) clock() time.Time {
	now := time.Now()
	return n.base.Add(time.Duration(float64(now.Sub(n.anchor)) * n.rate))
}

// Runs counts the node's runs (New and each Restart), for a transport built
// on the node (a simulator's network) that must drop what was sent to a run
// that died, as a connection to it would be.
func (n *Node) Runs() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return uint64(n.epoch)
}

// Addr returns the name given to New.
func (n *Node) Addr() string { return n.addr }

// SetDelay makes every later call reach the node d after it is made (one
// way; replies are instant). A call whose context ends first returns the
// context's error and its command applies at d all the same. Default: 0.
func (n *Node) SetDelay(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delay = d
}

// Pause stops the node like SIGSTOP: calls that reach it wait (their
// callers see their context expire) and apply, in arrival order, when the
// returned resume function is called. Resume is idempotent.
func (n *Node) Pause() (resume func()) {
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			n.paused = false
			for _, c := range n.queue {
				n.runLocked(c)
			}
			n.queue = nil
			n.mu.Unlock()
			n.deliver()
		})
	}
}

// Fail makes every later call return err at once without reaching the node
// (nil heals it). Wrap redlock.ErrNotSent to model a refused connection.
func (n *Node) Fail(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failErr = err
}

// SkewClock moves the node's clock by jump (forward expires keys early, as a
// stepped wall clock does on a real Redis) and makes it run at rate times
// real time from now on (1 is exact; 1.1 is 10% fast). Key expiry follows
// the node's clock. rate must be positive.
func (n *Node) SkewClock(jump time.Duration, rate float64) error {
	if !(rate > 0) {
		return fmt.Errorf("memnode: %s: clock rate %v must be positive", n.addr, rate)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.base = n.clock().Add(jump)
	n.anchor = time.Now()
	n.rate = rate
	return nil
}

// Restart starts a new run of the node, as a crash and restart do: a new
// RunID, uptime from zero, commands queued or in flight to the old run lost,
// and the keys kept only if keepKeys (a Redis with appendfsync always)
// rather than lost (no persistence). It also resumes a paused node.
func (n *Node) Restart(keepKeys bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.newRun()
	n.paused = false
	n.queue = nil
	if !keepKeys {
		n.forgetLocked()
	}
}

// Checkpoint records the keyspace as it is now, as the last write a Redis
// with appendfsync everysec has on its disk: RestartFromCheckpoint brings it
// back.
func (n *Node) Checkpoint() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.saved = copyData(n.data)
}

// RestartFromCheckpoint is Restart with the keyspace as the last Checkpoint
// left it (empty when none was taken): what a host crash does to a Redis
// with appendfsync everysec, which loses the writes of the last second
// (docs/faultinject.md). Keys that had expired since keep expiring on the
// node clock; fencing counters come back stamped with the old run, so
// they read as lost (AcquireFenced).
func (n *Node) RestartFromCheckpoint() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.newRun()
	n.paused = false
	n.queue = nil
	n.forgetLocked()
	if n.saved != nil {
		n.data = copyData(n.saved)
	}
}

// copyData copies a keyspace, each value and sorted set its own.
func copyData(d map[string]*value) map[string]*value {
	out := make(map[string]*value, len(d))
	for k, v := range d {
		c := *v
		c.vals = maps.Clone(v.vals)
		if v.set != nil {
			c.set = make(holdSet, len(v.set))
			for m, e := range v.set {
				c.set[m] = e
			}
		}
		out[k] = &c
	}
	return out
}

// forgetLocked empties the node's data: lock keys, release guards, fencing
// counters, shared locks' holds and waiting marks (a start without
// persistence).
func (n *Node) forgetLocked() {
	n.data = map[string]*value{}
	n.sweepAt = minSweep
}

// Keys returns the lock keys the node holds now and their values; the keys
// the node keeps for the locks (release guards, fencing counters, waiting
// lines, grant records) are left out. Tests use it to look for orphan keys. A shared lock
// (redlock.ShapeNode) shows as its key with its live holds as the value
// ("<group>\n<id>" each, sorted, space separated), and its waiting writers
// under the key that holds them on Redis: "{key}:waiting", or
// key+":waiting" when key has a hash tag.
func (n *Node) Keys() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock()
	out := map[string]string{}
	for k := range n.data {
		v := n.lookupLocked(k, now)
		switch {
		case v == nil || v.role == roleGuard || v.role == roleFence || v.role == roleQueue || v.role == roleGrant || v.role == roleConfig:
		case v.set == nil:
			out[k] = v.str
		default:
			ms := make([]string, 0, len(v.set))
			for m := range v.set {
				ms = append(ms, m)
			}
			sort.Strings(ms)
			out[k] = strings.Join(ms, " ")
		}
	}
	return out
}

// do sends one command to the node and waits for its reply or for ctx. A
// context that has ended already sends nothing: the error wraps
// redlock.ErrNotSent and ctx.Err(), as redisnode's does.
func (n *Node) do(ctx context.Context, apply func()) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memnode %s: %w: %w", n.addr, redlock.ErrNotSent, err)
	}
	n.mu.Lock()
	if n.failErr != nil {
		err := n.failErr
		n.mu.Unlock()
		return fmt.Errorf("memnode %s: %w", n.addr, err)
	}
	c := &command{epoch: n.epoch, apply: apply, done: make(chan struct{})}
	if n.delay > 0 {
		time.AfterFunc(n.delay, func() {
			n.mu.Lock()
			n.arriveLocked(c)
			n.mu.Unlock()
			n.deliver()
		})
	} else {
		n.arriveLocked(c)
	}
	n.mu.Unlock()
	n.deliver()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("memnode %s: %w", n.addr, ctx.Err())
	}
}

func (n *Node) arriveLocked(c *command) {
	switch {
	case c.epoch != n.epoch: // sent to a run that has since died
	case n.paused:
		n.queue = append(n.queue, c)
	default:
		n.runLocked(c)
	}
}

func (n *Node) runLocked(c *command) {
	if c.epoch != n.epoch {
		return
	}
	if n.diskFull {
		c.err = n.applyReadOnlyLocked(c.apply)
	} else {
		c.apply()
	}
	close(c.done)
}

func checkTTL(addr string, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("memnode %s: %w: ttl %v is below one millisecond", addr, redlock.ErrNotSent, ttl)
	}
	return nil
}

// guardTTL is a release guard's TTL: guard in whole milliseconds, at least
// one (0 when guard is not positive: no guard).
func guardTTL(guard time.Duration) time.Duration {
	if guard <= 0 {
		return 0
	}
	return max(guard.Truncate(time.Millisecond), time.Millisecond)
}

// scriptError is an error reply of a script: it names the node and the
// script, wraps errWrongType when that was the reply, and is marked as an
// error reply (replyError), as go-redis marks Redis's.
func (n *Node) scriptError(script string, err error) error {
	return replyError{fmt.Errorf("memnode %s: %s: %w", n.addr, script, err)}
}

// replyError is an error reply of the node: it has the RedisError method by
// which go-redis marks a server's error replies, so that the coordinator
// treats memnode's replies as Redis's (a release refused with one is an
// answer, not retried).
type replyError struct{ error }

// RedisError marks the error as a server's reply.
func (replyError) RedisError() {}

func (e replyError) Unwrap() error { return e.error }

// Info implements redlock.Node. It reports what a real Redis master
// reports (internal/redisinfo): uptime_in_seconds from the node clock (so a
// clock step after a restart inflates it, as it does on Redis), counted
// from its start time truncated to the second; and its main thread's CPU
// time as that of a master that never idles: the real time since the
// restart.
func (n *Node) Info(ctx context.Context) (redlock.ServerInfo, error) {
	var text string
	err := n.do(ctx, func() {
		cpu := time.Since(n.started).Seconds()
		text = fmt.Sprintf("run_id:%s\r\nuptime_in_seconds:%d\r\nrole:master\r\nused_cpu_sys_main_thread:%.6f\r\nused_cpu_user_main_thread:0.000000\r\n",
			n.runID, n.clock().Unix()-n.startedClock.Unix(), cpu)
	})
	if err != nil {
		return redlock.ServerInfo{}, err
	}
	return redisinfo.Parse(n.addr, text)
}

// Acquire implements redlock.Node as redisnode's acquire.lua does: it is
// refused by a release guard of key and value, takes key when it is free,
// and reports true when key holds value already (a retried copy; the TTL
// stays). On a key that holds a shared lock it fails with WRONGTYPE.
func (n *Node) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return false, err
	}
	guard, err := n.guardKey(key, value)
	if err != nil {
		return false, err
	}
	rec, _, err := n.callRecord(ctx, ttl)
	if err != nil {
		return false, err
	}
	var ok bool
	var fail error
	err = n.do(ctx, func() {
		if fail = n.configLocked(rec); fail == nil {
			ok, fail = n.acquireLocked(key, value, guard, ttl, n.clock())
		}
	})
	if err != nil {
		return false, err // do not read ok: a late command may still set it
	}
	if fail != nil {
		return false, n.scriptError("acquire.lua", fail)
	}
	return ok, nil
}

// acquireLocked runs the steps acquire.lua and acquire_fenced.lua share.
func (n *Node) acquireLocked(key, value, guard string, ttl time.Duration, now time.Time) (bool, error) {
	if n.lookupLocked(guard, now) != nil {
		return false, nil
	}
	if n.lookupLocked(key, now) == nil {
		n.setLocked(key, value, ttl.Truncate(time.Millisecond), roleLock, now)
		return true, nil
	}
	held, ok, err := n.getLocked(key, now)
	return ok && held == value, err
}

// AcquireFenced implements redlock.FencingNode as acquire_fenced.lua does:
// Acquire that also reads the lock's fencing counter, the key "{key}:fence"
// (kept as RaiseFenceKeep says; Restart(false) loses it), as
// acquire_fenced.lua does: 0 unless this run of the node wrote it (a
// counter that RestartFromCheckpoint brought back reads as lost). When that
// key holds no counter (a lock named like it), it fails before taking
// anything, as the script does.
func (n *Node) AcquireFenced(ctx context.Context, key, value string, ttl time.Duration) (bool, int64, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return false, 0, err
	}
	guard, err := n.guardKey(key, value)
	if err != nil {
		return false, 0, err
	}
	fenceKey, err := n.fenceKey(key)
	if err != nil {
		return false, 0, err
	}
	rec, epoch, err := n.callRecord(ctx, ttl)
	if err != nil {
		return false, 0, err
	}
	var ok bool
	var fence int64
	var fail error
	err = n.do(ctx, func() {
		if fail = n.configLocked(rec); fail != nil {
			return
		}
		now := n.clock()
		if fence, fail = n.counterLocked(fenceKey, now, epoch); fail != nil {
			return
		}
		ok, fail = n.acquireLocked(key, value, guard, ttl, now)
	})
	switch {
	case err != nil:
		return false, 0, err // do not read ok: a late command may still set it
	case fail != nil:
		return false, 0, n.scriptError("acquire_fenced.lua", fail)
	}
	return ok, fence, nil
}

// counterLocked reads the fencing counter at fenceKey as the scripts do
// for a client at configuration epoch f (wire.ReadFenceAt): 0 when absent,
// written by another run, or stamped with an epoch below f - 1.
func (n *Node) counterLocked(fenceKey string, now time.Time, f int64) (int64, error) {
	s, found, err := n.getLocked(fenceKey, now)
	if err != nil {
		return 0, err
	}
	c, err := wire.ReadFenceAt(s, found, n.runID, knobs.NoRunStamp.Load(), f, knobs.NoConfigStamp.Load()) // test-only switches: a counter of any run, of any epoch, counts
	if err != nil {
		return 0, fmt.Errorf("the fencing counter %s %w", quote(fenceKey), err)
	}
	return c, nil
}

// RaiseFence implements redlock.FencingNode as raise_fence.lua does: it
// raises the lock's fencing counter to token (never lowers it) while key
// holds value, and keeps the counter for ever (RaiseFenceKeep with keep 0).
func (n *Node) RaiseFence(ctx context.Context, key, value string, token int64) (bool, error) {
	return n.RaiseFenceKeep(ctx, key, value, token, 0)
}

// RaiseFenceKeep implements redlock.FenceExpiryNode as raise_fence.lua
// does: RaiseFence that, while key holds value, also sets the counter's
// time to live to keep (truncated to milliseconds), whether or not it
// raised it; keep = 0 removes its time to live. The counter is stamped with
// this run of the node and, for a call that carries a record (WithRecord),
// with the record's epoch, as raise_fence.lua stamps it.
func (n *Node) RaiseFenceKeep(ctx context.Context, key, value string, token int64, keep time.Duration) (bool, error) {
	if keep != 0 {
		if err := checkTTL(n.addr, keep); err != nil {
			return false, err
		}
	}
	fenceKey, err := n.fenceKey(key)
	if err != nil {
		return false, err
	}
	rec, epoch, err := n.callRecord(ctx, 0)
	if err != nil {
		return false, err
	}
	var ok bool
	var fail error
	err = n.do(ctx, func() {
		if fail = n.configLocked(rec); fail != nil {
			return
		}
		now := n.clock()
		held, found, err := n.getLocked(key, now)
		if err != nil || !found || held != value {
			fail = err
			return
		}
		s, found, err := n.getLocked(fenceKey, now)
		if err != nil {
			fail = err
			return
		}
		if found {
			counter, _, err := wire.ParseFence(s)
			if err != nil {
				fail = fmt.Errorf("the fencing counter %s %w", quote(fenceKey), err)
				return
			}
			token = max(token, counter)
		}
		s = wire.FormatFenceAt(token, n.runID, epoch)
		// SET, then PEXPIRE keep (or PERSIST): the counter lives keep
		// after this write-back.
		n.setLocked(fenceKey, s, keep.Truncate(time.Millisecond), roleFence, now)
		ok = true
	})
	if err != nil {
		return false, err
	}
	if fail != nil {
		return false, n.scriptError("raise_fence.lua", fail)
	}
	return ok, nil
}

// Extend implements redlock.Node as extend.lua does.
func (n *Node) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return false, err
	}
	rec, _, err := n.callRecord(ctx, ttl)
	if err != nil {
		return false, err
	}
	var ok bool
	var fail error
	err = n.do(ctx, func() {
		if fail = n.configLocked(rec); fail != nil {
			return
		}
		now := n.clock()
		held, found, err := n.getLocked(key, now)
		if err != nil || !found || held != value {
			fail = err
			return
		}
		n.data[key].exp = now.Add(ttl.Truncate(time.Millisecond))
		ok = true
	})
	if err != nil {
		return false, err // do not read ok: a late command may still set it
	}
	if fail != nil {
		return false, n.scriptError("extend.lua", fail)
	}
	return ok, nil
}

// Release implements redlock.Node as release.lua does.
func (n *Node) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	guardKey, err := n.guardKey(key, value)
	if err != nil {
		return false, err
	}
	var ok bool
	var fail error
	err = n.do(ctx, func() {
		now := n.clock()
		held, found, err := n.getLocked(key, now)
		switch {
		case err != nil:
			fail = err
		case found && held == value:
			delete(n.data, key)
			ok = true
			n.retireHolderLocked(key, value, now)
			if note := n.handOverLocked(key, now); note != "" { // someone waits in line
				n.noteLocked(key, note)
			}
		case guard > 0:
			n.setLocked(guardKey, "1", guardTTL(guard), roleGuard, now)
		}
	})
	if err != nil {
		return false, err // do not read ok: a late command may still set it
	}
	if fail != nil {
		return false, n.scriptError("release.lua", fail)
	}
	return ok, nil
}

// FencedStore is a resource protected by fencing tokens, for tests and
// examples: it accepts a write only with a token at least the highest it has
// seen, so a holder that paused past its lease cannot overwrite the work of
// the next one. It refuses a token below 1: fencing tokens start at 1, and a
// 0 is what a lease without redlock.WithFencing carries. The zero value is
// ready to use and safe for concurrent use.
type FencedStore struct {
	mu      sync.Mutex
	highest int64
	value   string
}

// Write stores value if token is at least 1 and at least the highest token
// seen, and otherwise refuses it with an error naming the tokens.
func (s *FencedStore) Write(token int64, value string) error {
	if token < 1 {
		return fmt.Errorf("memnode: fenced write refused: token %d is not a fencing token (a lease of a mutex without redlock.WithFencing?)", token)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.highest {
		return fmt.Errorf("memnode: fenced write refused: token %d is below the highest seen, %d", token, s.highest)
	}
	s.highest, s.value = token, value
	return nil
}

// Read returns the last accepted value and its token.
func (s *FencedStore) Read() (value string, token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, s.highest
}
