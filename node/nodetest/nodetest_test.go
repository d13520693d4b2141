package nodetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorded runs the checks only picks on the nodes newNode makes, as
// subtests of t, and returns the failures each check reported, by
// "Group/Check". The failures are recorded, not reported: t passes.
func recorded(t *testing.T, newNode func() redlock.Node, down func(t *testing.T, n redlock.Node) func(), only func(group, check string) bool) map[string][]error {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]error{}
	run(t, func(*testing.T) redlock.Node { return newNode() }, down, func(t *testing.T, err error) {
		parts := strings.Split(t.Name(), "/")
		name := strings.Join(parts[len(parts)-2:], "/")
		mu.Lock()
		defer mu.Unlock()
		got[name] = append(got[name], err)
	}, only)
	return got
}

func memDown(t *testing.T, n redlock.Node) func() {
	var m *memnode.Node
	switch n := n.(type) {
	case *memnode.Node:
		m = n
	case interface{ inner() *memnode.Node }:
		m = n.inner()
	default:
		t.Fatalf("memDown: %T is no memnode", n)
	}
	m.Fail(fmt.Errorf("connection refused: %w", redlock.ErrNotSent))
	return func() { m.Fail(nil) }
}

// TestSoundNodePasses: memnode, the reference's double, passes every check
// (so that the failures the broken nodes below cause are theirs).
func TestSoundNodePasses(t *testing.T) {
	got := recorded(t, func() redlock.Node { return memnode.New("sound") }, memDown, nil)
	for name, errs := range got {
		t.Errorf("%s: %d failures on memnode, first: %v", name, len(errs), errs[0])
	}
}

// broken is memnode with one behaviour changed by the fields that are set.
type broken struct {
	*memnode.Node
	mu        sync.Mutex
	acquired  map[string]bool // retriedCopyRefused: keys+values acquired once
	refuse    bool            // Acquire of a key its value holds says false
	creates   bool            // Extend of a free key takes it
	noGuard   bool            // Release leaves no guard
	ttlTimes  time.Duration   // Acquire multiplies its TTL by this (0: no change)
	fence0    bool            // AcquireFenced reads 0 always
	keepOnce  bool            // RaiseFenceKeep sets the time to live only when it raises the counter
	peekNone  bool            // Peek reads nothing
	noLimit   bool            // AcquireHold ignores Limit
	noYield   bool            // AcquireHold ignores Yield
	liar      bool            // a call with an ended context runs and wraps ErrNotSent
	newRunID  bool            // Info makes up a RunID per call
	noOrder   bool            // AcquireQueued ignores the queue (AcquireFenced)
	keepIn    bool            // AcquireQueued leaves the waiter in the queue when it acquires
	noTomb    bool            // a waiter that left is forgotten at once: its late AcquireQueued enters it again
	grantTomb bool            // a fair waiter that acquires leaves a tombstone (LeaveQueue)
	longOut   bool            // LeaveQueue keeps the waiter out 1000 times its TTL
	silent    bool            // Watch never calls fn
	noStop    bool            // Watch's stop does nothing
	noopNote  bool            // Release notifies watches also when it deleted nothing
	firstCall bool            // a waiter in line keeps the value and TTL of its first AcquireQueued
	longEntry string          // entries of the lines of keys containing this live 1000 times their TTL
	keepTTL   bool            // a take-over leaves the key the TTL of its hand-over (1h in the checks)
	leaveAll  bool            // LeaveQueue releases the key a waiter acquired, taken over or not
	handOut   bool            // a waiter handed the key is out of the line (the earlier rule): a release finding it first hands the key to the next
	dropGrant bool            // an AcquireQueued of the value handed to its waiter deletes the grant record
	watches   map[string][]func(string)
	left      map[string]int    // noTomb: departures by key and waiter ID
	firstOf   map[string]call   // firstCall: the first AcquireQueued by key and waiter ID
	gotBy     map[string]string // leaveAll: the value each waiter acquired, by key and waiter ID
}

// call is an AcquireQueued's value and TTL.
type call struct {
	value string
	ttl   time.Duration
}

func (b *broken) inner() *memnode.Node { return b.Node }

func (b *broken) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if b.liar && ctx.Err() != nil {
		_, _ = b.Node.Acquire(context.Background(), key, value, ttl)
		return false, fmt.Errorf("lying: %w: %w", redlock.ErrNotSent, ctx.Err())
	}
	if b.ttlTimes != 0 {
		ttl *= b.ttlTimes
	}
	ok, err := b.Node.Acquire(ctx, key, value, ttl)
	if b.refuse && ok {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.acquired == nil {
			b.acquired = map[string]bool{}
		}
		kv := key + "\x00" + value
		if b.acquired[kv] {
			return false, nil
		}
		b.acquired[kv] = true
	}
	return ok, err
}

func (b *broken) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	ok, err := b.Node.Extend(ctx, key, value, ttl)
	if b.creates && err == nil && !ok {
		return b.Node.Acquire(ctx, key, value, ttl)
	}
	return ok, err
}

func (b *broken) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	if b.noGuard {
		guard = 0
	}
	ok, err := b.Node.Release(ctx, key, value, guard)
	if b.noopNote && err == nil && !ok {
		b.mu.Lock()
		fns := b.watches[key]
		b.mu.Unlock()
		for _, fn := range fns {
			fn("") // as if it had deleted the key of a lock nobody waits for
		}
	}
	return ok, err
}

func (b *broken) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, w redlock.Waiter) (bool, int64, error) {
	if b.noOrder {
		return b.Node.AcquireFenced(ctx, key, value, ttl)
	}
	if b.handOut {
		// A free key with a first waiter that is not w: a waiter handed the
		// key before, whose handed key expired. Take it out, as if the
		// hand-over had; its LeaveQueue, first with the key free, hands the
		// key to the next one.
		if line := b.Node.Line(key); len(line) > 0 && line[0] != w.ID {
			if held, _, perr := b.Node.Peek(ctx, key); perr == nil && held == "" {
				_ = b.Node.LeaveQueue(ctx, key, redlock.Waiter{ID: line[0], TTL: time.Millisecond})
			}
		}
	}
	kw := key + "\x00" + w.ID
	if b.firstCall {
		inLine := slices.Contains(b.Node.Line(key), w.ID)
		b.mu.Lock()
		if first, ok := b.firstOf[kw]; ok && inLine {
			value, ttl = first.value, first.ttl
		} else {
			if b.firstOf == nil {
				b.firstOf = map[string]call{}
			}
			b.firstOf[kw] = call{value, ttl}
		}
		b.mu.Unlock()
	}
	if b.longEntry != "" && strings.Contains(key, b.longEntry) {
		w.TTL *= 1000
	}
	var before string
	if b.keepTTL {
		before, _, _ = b.Node.Peek(ctx, key)
	}
	if b.noTomb {
		// A node without tombstones: it removes a waiter that left from
		// both sets. Another run of the same node plays it: a fresh ID
		// per departure, so that no tombstone of the real ID is ever met.
		w.ID = b.alias(key, w.ID)
	}
	var handed bool
	if b.dropGrant {
		held, _, _ := b.Node.Peek(ctx, key)
		handed = held == value
	}
	ok, fence, err := b.Node.AcquireQueued(ctx, key, value, ttl, w)
	if handed && ok && err == nil {
		_, _ = b.Node.Release(ctx, wire.GrantKey(key), wire.Grant(w.ID, value), 0) // as if it were a take-over
	}
	if b.keepTTL && ok && err == nil && before != "" && before != value {
		_, _ = b.Node.Extend(ctx, key, value, time.Hour) // as if the take-over had kept the hand-over's TTL
	}
	if b.leaveAll && ok && err == nil {
		b.mu.Lock()
		if b.gotBy == nil {
			b.gotBy = map[string]string{}
		}
		b.gotBy[kw] = value
		b.mu.Unlock()
	}
	if b.noTomb && ok && err == nil {
		b.forget(key, w.ID)
	}
	if b.grantTomb && w.Fair && ok && err == nil {
		_ = b.Node.LeaveQueue(ctx, key, w)
	}
	if b.keepIn && ok && err == nil {
		// Another value's refused AcquireQueued enters a stand-in for w
		// (w itself left and stays out), at w's arrival: as if the
		// acquire had left w in the queue.
		w.ID += " kept"
		_, _, _ = b.Node.AcquireQueued(ctx, key, value+"\x00stale", ttl, w)
	}
	return ok, fence, err
}

func (b *broken) LeaveQueue(ctx context.Context, key string, w redlock.Waiter) error {
	if b.leaveAll {
		b.mu.Lock()
		v, ok := b.gotBy[key+"\x00"+w.ID]
		b.mu.Unlock()
		if ok {
			_, _ = b.Node.Release(ctx, key, v, 0)
		}
	}
	if b.longOut {
		w.TTL *= 1000
	}
	if b.noTomb {
		id := b.alias(key, w.ID)
		w.ID = id
		err := b.Node.LeaveQueue(ctx, key, w)
		if err == nil {
			b.forget(key, id)
		}
		return err
	}
	return b.Node.LeaveQueue(ctx, key, w)
}

// alias returns the ID that stands for waiter id of key's queue (noTomb):
// id itself, or id with the number of its departures.
func (b *broken) alias(key, id string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.left[key+"\x00"+id]; n > 0 {
		return fmt.Sprintf("%s#%d", id, n)
	}
	return id
}

// forget makes the next call of waiter id (by its alias, ID) a new one:
// as if its departure had removed it from both sets.
func (b *broken) forget(key, alias string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left == nil {
		b.left = map[string]int{}
	}
	id, _, _ := strings.Cut(alias, "#")
	b.left[key+"\x00"+id]++
}

func (b *broken) Watch(ctx context.Context, key, group string, fn func(next string)) (func(), error) {
	if b.silent {
		fn = func(string) {}
	}
	stop, err := b.Node.Watch(ctx, key, group, fn)
	if err == nil && b.noopNote {
		b.mu.Lock()
		if b.watches == nil {
			b.watches = map[string][]func(string){}
		}
		b.watches[key] = append(b.watches[key], fn)
		b.mu.Unlock()
	}
	if err == nil && b.noStop {
		return func() {}, nil
	}
	return stop, err
}

func (b *broken) AcquireFenced(ctx context.Context, key, value string, ttl time.Duration) (bool, int64, error) {
	ok, fence, err := b.Node.AcquireFenced(ctx, key, value, ttl)
	if b.fence0 {
		fence = 0
	}
	return ok, fence, err
}

func (b *broken) RaiseFenceKeep(ctx context.Context, key, value string, token int64, keep time.Duration) (bool, error) {
	if b.keepOnce {
		if held, fence, err := b.Node.Peek(ctx, key); err == nil && fence >= token {
			return held == value, nil // not raised: its time to live unchanged
		}
	}
	return b.Node.RaiseFenceKeep(ctx, key, value, token, keep)
}

func (b *broken) Peek(ctx context.Context, key string) (string, int64, error) {
	v, f, err := b.Node.Peek(ctx, key)
	if b.peekNone {
		return "", 0, err
	}
	return v, f, err
}

func (b *broken) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	if b.noLimit {
		h.Limit = 0
	}
	if b.noYield {
		h.Yield = false
	}
	return b.Node.AcquireHold(ctx, key, h, ttl)
}

func (b *broken) Info(ctx context.Context) (redlock.ServerInfo, error) {
	si, err := b.Node.Info(ctx)
	if b.newRunID && err == nil {
		si.RunID = rand.Text()
	}
	return si, err
}

// TestBrokenNodesFail: a node with one behaviour changed fails the check of
// that behaviour, with a message naming the call and the value it returned.
func TestBrokenNodesFail(t *testing.T) {
	defer func(old time.Duration) { waitLimit = old }(waitLimit)
	waitLimit = 3 * time.Second // the TTL checks wait this long for an expiry that does not come
	noDown := func(*testing.T, redlock.Node) func() { return func() {} }
	for _, tc := range []struct {
		name  string
		node  func() *broken
		down  func(*testing.T, redlock.Node) func()
		check string // Group/Check
		says  string // in one of its messages
	}{
		{"retried copy refused", func() *broken { return &broken{refuse: true} }, nil,
			"Mutex/AcquireRetriedCopy", `Acquire("lock", "v", 1h0m0s) = false, want true: a retried copy`},
		{"Extend creates", func() *broken { return &broken{creates: true} }, nil,
			"Mutex/ExtendNeverCreates", `Extend("absent", "v", 1h0m0s) = true, want false`},
		{"no release guard", func() *broken { return &broken{noGuard: true} }, nil,
			"Mutex/ReleaseGuard", `Acquire("lock", "late", 1h0m0s) = true, want false`},
		{"TTL read as seconds", func() *broken { return &broken{ttlTimes: 1000} }, nil,
			"Mutex/TTL", "is free after it: not within 3s"},
		{"fence read as 0", func() *broken { return &broken{fence0: true} }, nil,
			"Fencing/RaiseWhileHeld", `AcquireFenced("lock", "w", 1h0m0s) = (true, 0), want (true, 5)`},
		{"counter not renewed", func() *broken { return &broken{keepOnce: true} }, nil,
			"Fencing/RetentionRenewed", `= 0, want 5: the write-back with token 3 and keep 1h did not raise the counter but renewed it for 1h`},
		{"Peek reads nothing", func() *broken { return &broken{peekNone: true} }, nil,
			"Peek/Reads", `Peek("lock") = ("", 0), want ("v", 0): the key's value, no counter`},
		{"limit ignored", func() *broken { return &broken{noLimit: true} }, nil,
			"Shapes/Limit", "= 3, want 0: the limit of 2 live holds is reached"},
		{"yield ignored", func() *broken { return &broken{noYield: true} }, nil,
			"Shapes/Waiter", "= 2, want 0: a yielding reader is refused while a writer waits"},
		{"ErrNotSent with an effect", func() *broken { return &broken{liar: true} }, nil,
			"Context/Cancelled", `Acquire("new", "w", 1h0m0s) = false, want true: the failed Acquire wrapped redlock.ErrNotSent`},
		{"RunID per call", func() *broken { return &broken{newRunID: true} }, nil,
			"Info/Consistent", "the same server's RunID changed"},
		{"queue order ignored", func() *broken { return &broken{noOrder: true} }, nil,
			"Queue/Order", `Extend("lock", "ve", 1h0m0s) = false, want true: early arrived 1ms before late: the queue is ordered by Arrival, not by entry`},
		{"waiter left in the queue", func() *broken { return &broken{keepIn: true} }, nil,
			"Queue/LeavesOnSuccess", `Extend("lock", "v2", 1h0m0s) = false, want true: w1 left the queue when it acquired`},
		{"no tombstones: late copy after LeaveQueue", func() *broken { return &broken{noTomb: true} }, nil,
			"Queue/LateCopyAfterLeave", `Acquire("lock", "other", 1h0m0s) = false, want true: the late copy of w1 entered nothing`},
		{"no tombstones: LeaveQueue first", func() *broken { return &broken{noTomb: true} }, nil,
			"Queue/LeaveBeforeEntry", `AcquireQueued("lock", "v1", 1h0m0s, Waiter{ID: "w1", Arrival: +1ms, TTL: 1h0m0s, Fair: true}) = (true, 0), want (false, 0): w1's LeaveQueue came before`},
		{"a grant leaves a tombstone", func() *broken { return &broken{grantTomb: true} }, nil,
			"Queue/RejoinsAfterGrant", `Extend("lock", "v1b", 1h0m0s) = false, want true: w1 (arrived 1ms before w2) is first again: a grant leaves no tombstone`},
		{"no tombstones: rejoins at once", func() *broken { return &broken{noTomb: true} }, nil,
			"Queue/RejoinsAfterTTL", `= (true, 0), want (false, 0): w1 left the queue of "rejoining#0" (TTL 250ms): it stays out`},
		{"no tombstones: watched", func() *broken { return &broken{noTomb: true} }, nil,
			"Watch/LeaveQueue", `notification #2 = "w2#1\nv2", want "w3\nv3"`},
		{"tombstone outlives its TTL", func() *broken { return &broken{longOut: true} }, nil,
			"Queue/RejoinsAfterTTL", `enters it again and takes the free key: not within 3s`},
		{"Watch never calls fn", func() *broken { return &broken{silent: true} }, nil,
			"Watch/Release", `notification #1 of Watch("watched release") after Release("watched release", "v", 0s) (got 0): not within 3s`},
		{"stop ignored", func() *broken { return &broken{noStop: true} }, nil,
			"Watch/Stop", `Watch("watched stop"): 3 notifications, want 1: two releases after stop were reported`},
		{"release of nothing notified", func() *broken { return &broken{noopNote: true} }, nil,
			"Watch/NothingDeleted", `notification #1 = "", want "w1\nx"`},
		{"first value kept", func() *broken { return &broken{firstCall: true} }, nil,
			"Queue/HandOverRecordsLatestValue", `Extend("recorded fair", "v1", 1h0m0s) = true, want false: the entry records the value of its waiter's latest AcquireQueued`},
		{"first TTL kept", func() *broken { return &broken{firstCall: true} }, nil,
			"Queue/HandOverTTL", `expires after the TTL of w1's latest AcquireQueued (250ms, the first recorded 1h0m0s): another value takes it: not within 3s`},
		{"expired entry handed the key", func() *broken { return &broken{longEntry: "past expired"} }, nil,
			"Queue/HandOverSkipsExpired", `Extend("{handoff}past expired", "v1", 1h0m0s) = true, want false: w1's entry had expired`},
		{"take-over keeps the hand-over's TTL", func() *broken { return &broken{keepTTL: true} }, nil,
			"Queue/TakeOverTTL", `that w1 took over for 250ms (handed to it for 1h0m0s) expires: another value takes it: not within 3s`},
		{"no guard before the take-over", func() *broken { return &broken{noGuard: true} }, nil,
			"Queue/TakeOverGuardFirst", `AcquireQueued("lock", "late", 1h0m0s, Waiter{ID: "w1", Arrival: +1ms, TTL: 1h0m0s, Fair: true}) = (true, 0), want (false, 0): the guard of the key and the new value refuses before the take-over`},
		{"handed waiter out of the line", func() *broken { return &broken{handOut: true} }, nil,
			"Queue/HandOverKeepsPlace", `AcquireQueued("watched keeps place", "v2", 1h0m0s, Waiter{ID: "w2", Arrival: +2ms, TTL: 1h0m0s, Fair: true}) = (true, 0), want (false, 0): the key handed to w1 expired, but w1's entry lives`},
		{"handed waiter out of the line: its release hands on", func() *broken { return &broken{handOut: true} }, nil,
			"Queue/HandOverKeepsPlace", `AcquireQueued("watched keeps place", "v1b", 1h0m0s, Waiter{ID: "w1", Arrival: +1ms, TTL: 1h0m0s, Fair: true}) = (false, 0), want (true, 0): w1 is still first in line`},
		{"a retried copy of the handed value deletes the grant", func() *broken { return &broken{dropGrant: true} }, nil,
			"Queue/HandedValueAcquired", `Extend("{k}:grant", "w1\nv1", 1h0m0s) = false, want true: an AcquireQueued of the handed value is no take-over`},
		{"a retried copy of the handed value leaves the waiter in line", func() *broken { return &broken{keepIn: true} }, nil,
			"Queue/HandedValueAcquired", `Extend("k", "v2", 1h0m0s) = false, want true: w1 left the line when its AcquireQueued found the key at its value`},
		{"take-over leaves the waiter in line", func() *broken { return &broken{keepIn: true} }, nil,
			"Queue/TakeOverLeavesLine", `Extend("taken over, out fair", "v2", 1h0m0s) = false, want true: w1 left the line when it took the key over`},
		{"LeaveQueue releases a taken-over key", func() *broken { return &broken{leaveAll: true} }, nil,
			"Queue/LeaveKeepsTakenOver", `Extend("taken over, left fair", "v1b", 1h0m0s) = false, want true: the key w1 took over holds its new value`},
		{"down does nothing", func() *broken { return &broken{} }, noDown,
			"Down/Down", `Acquire("new", "v", 1h0m0s) returned no error, want one: every call fails while the server is down`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := recorded(t, func() redlock.Node {
				b := tc.node()
				b.Node = memnode.New("broken")
				return b
			}, tc.down, func(group, check string) bool { return group+"/"+check == tc.check })
			errs := got[tc.check]
			if len(errs) == 0 {
				t.Fatalf("%s reported no failure for a node with %s (failures: %v)", tc.check, tc.name, got)
			}
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.says) {
				t.Errorf("%s reported:\n%s\nwant a message containing %q", tc.check, strings.Join(msgs, "\n"), tc.says)
			}
		})
	}
}

// plain is a Node and no more: the capability checks are skipped.
type plain struct{ m *memnode.Node }

func (p plain) Addr() string { return p.m.Addr() }
func (p plain) Info(ctx context.Context) (redlock.ServerInfo, error) {
	return p.m.Info(ctx)
}
func (p plain) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return p.m.Acquire(ctx, key, value, ttl)
}
func (p plain) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return p.m.Extend(ctx, key, value, ttl)
}
func (p plain) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	return p.m.Release(ctx, key, value, guard)
}

// TestPlainNodeSkipsCapabilities: a node without FencingNode, ShapeNode,
// and QueueNode passes; the checks of those capabilities say why they skip.
func TestPlainNodeSkipsCapabilities(t *testing.T) {
	for _, f := range []func(*checker){fenceMax, sharedGroup, mutexThenHold, downServer, queueOrder, watchRelease, queueName} {
		errs, skip := newChecker(t, plain{memnode.New("plain")}, nil).run(f)
		if len(errs) != 0 || skip == "" {
			t.Errorf("a check on a plain node: failures %v, skip %q; want none, and a reason to skip", errs, skip)
		}
	}
	got := recorded(t, func() redlock.Node { return plain{memnode.New("plain")} }, nil, nil)
	for name, errs := range got {
		t.Errorf("%s: %d failures on a plain memnode, first: %v", name, len(errs), errs[0])
	}
}

// TestLongArgumentsAreCut: a message shows at most 40 bytes of a name or
// value, and its length.
func TestLongArgumentsAreCut(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	if got := q(long); len(got) > 80 || !strings.Contains(got, "(1048576 bytes)") {
		t.Errorf("q of a 1 MiB name = %q, want at most 80 bytes naming the length", got)
	}
	if got := q("a\x00b"); got != `"a\x00b"` {
		t.Errorf(`q("a\x00b") = %s, want "a\x00b" quoted`, got)
	}
}

// TestHandoffKnobsFail: memnode with one rule of the handoff switched off
// (internal/knobs, read by memnode on each call) fails the checks of that
// rule.
func TestHandoffKnobsFail(t *testing.T) {
	defer func(old time.Duration) { waitLimit = old }(waitLimit)
	waitLimit = 3 * time.Second
	for _, tc := range []struct {
		knob  *atomic.Bool
		name  string
		check string // Group/Check
		says  string // in one of its messages
	}{
		{&knobs.NoGrant, "NoGrant", "Queue/HandOver", `Extend("handed fair", "v1", 1h0m0s) = false, want true: the release handed the key to the line's first waiter`},
		{&knobs.NoGrant, "NoGrant", "Queue/HandOverRecordsLatestValue", `Extend("recorded fair", "v1b", 1h0m0s) = false, want true`},
		{&knobs.NoGrant, "NoGrant", "Queue/LeaveHandsToNext", `Extend("left free fair", "v3", 1h0m0s) = false, want true: w1, first, left the key free: its LeaveQueue handed it to the next waiter`},
		{&knobs.NoGrant, "NoGrant", "Queue/Order", `Extend("lock", "ve", 1h0m0s) = false, want true`},
		{&knobs.NoGrant, "NoGrant", "Queue/LineNewcomer", `Extend("lock", "v1", 1h0m0s) = false, want true: w1 is in line, first: the release handed it the key`},
		{&knobs.NoGrant, "NoGrant", "Watch/HandOverNamesWaiter", `Extend("watched hand-over", "v1", 1h0m0s) = false, want true: the key was handed to the waiter the notification named`},
		{&knobs.NoGrant, "NoGrant", "DerivedKeys/GrantKeyName", `Extend("{k}:grant", "w1\nv1", 1h0m0s) = false, want true`},
		{&knobs.NoGrantTakeover, "NoGrantTakeover", "Queue/TakeOver", `AcquireQueued("taken over fair", "v1b", 1h0m0s, Waiter{ID: "w1", Arrival: +1ms, TTL: 1h0m0s, Fair: true}) = (false, 0), want (true, 0): the key holds v1, which a release handed w1: w1 takes it over`},
		{&knobs.NoGrantTakeover, "NoGrantTakeover", "Queue/TakeOver", `AcquireQueued("taken over plain", "v1b", 1h0m0s, Waiter{ID: "w1", Arrival: +1ms, TTL: 1h0m0s, Fair: false}) = (false, 0), want (true, 0)`},
		{&knobs.NoGrantTakeover, "NoGrantTakeover", "Queue/TakeOverLeavesLine", `AcquireQueued("taken over, out plain", "v1b", 1h0m0s, Waiter{ID: "w1", Arrival: +1ms, TTL: 1h0m0s, Fair: false}) = (false, 0), want (true, 0)`},
		{&knobs.NoGrant, "NoGrant", "Queue/HandOverKeepsPlace", `Extend("watched keeps place", "v1", 1h0m0s) = false, want true: the release handed the key to w1`},
		{&knobs.NoGrantTakeover, "NoGrantTakeover", "Queue/TakeOverTTL", `= (false, 0), want (true, 0): the release handed the key to w1: w1 takes it over`},
		{&knobs.NoGrantTakeover, "NoGrantTakeover", "Queue/TakeOverGuardFirst", `AcquireQueued("lock", "v1c", 1h0m0s, Waiter{ID: "w1", Arrival: +1ms, TTL: 1h0m0s, Fair: true}) = (false, 0), want (true, 0)`},
		{&knobs.NoGrantLeaveRelease, "NoGrantLeaveRelease", "Queue/LeaveReleasesHandOver", `Extend("left handed fair", "v1", 1h0m0s) = true, want false: w1 left while the key handed to it was still there: LeaveQueue deletes it`},
		{&knobs.NoGrantLeaveRelease, "NoGrantLeaveRelease", "Queue/LeaveReleasesHandOver", `Extend("left handed plain", "v2", 1h0m0s) = false, want true`},
		{&knobs.NoGrantLeaveRelease, "NoGrantLeaveRelease", "Watch/HandOverNamesWaiter", `notification #2 of Watch("watched hand-over") after LeaveQueue`},
		{&knobs.NoGrantHoldRelease, "NoGrantHoldRelease", "Queue/HandedReleaseRetires", `notification #2 = "w1", want "w2\nv2"`},
		{&knobs.NoGrant, "NoGrant", "Watch/Release", `notification #1 = "w1", want "w1\nx"`},
	} {
		t.Run(tc.name+" "+tc.check, func(t *testing.T) {
			tc.knob.Store(true)
			defer tc.knob.Store(false)
			got := recorded(t, func() redlock.Node { return memnode.New("knob") }, nil,
				func(group, check string) bool { return group+"/"+check == tc.check })
			errs := got[tc.check]
			if len(errs) == 0 {
				t.Fatalf("%s reported no failure with knobs.%s set", tc.check, tc.name)
			}
			var msgs []string
			for _, err := range errs {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.says) {
				t.Errorf("%s reported:\n%s\nwant a message containing %q", tc.check, strings.Join(msgs, "\n"), tc.says)
			}
		})
	}
}
