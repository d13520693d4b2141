package redisnode

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// A waiter that left the queue stays out for its TTL: a late copy of its
// AcquireQueued (still on the network when LeaveQueue ran) neither takes
// the key nor enters the queue again, so the waiter behind it, to which
// the LeaveQueue handed the key a release had handed the one that left, is
// granted; and the release of that key finds nobody in line.
func TestLateAcquireQueuedAfterLeave(t *testing.T) {
	q := newQueueT(t)
	ctx := context.Background()
	t0 := time.Now()
	a := redlock.Waiter{ID: "a", Arrival: t0, TTL: time.Minute, Fair: true}
	b := redlock.Waiter{ID: "b", Arrival: t0.Add(time.Millisecond), TTL: time.Minute, Fair: true}
	ok, err := q.n.Acquire(ctx, "locks:late", "holder", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	for _, w := range []redlock.Waiter{a, b} {
		ok, _ = q.acquire("locks:late", "v"+w.ID, w)
		require.False(t, ok, w.ID)
	}
	q.release("locks:late", "holder")
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:late", a))
	assert.True(t, q.tombstone("locks:late", "a"))

	assert.Equal(t, "vb", q.admin.Get(ctx, "locks:late").Val(), "a's LeaveQueue released the key handed to it and handed it to b")

	ok, _ = q.acquire("locks:late", "va", a) // the late copy
	assert.False(t, ok, "a left: its late copy must not take the key")
	assert.Equal(t, "vb", q.admin.Get(ctx, "locks:late").Val(), "the key still holds b's value")
	assert.True(t, q.tombstone("locks:late", "a"), "a did not enter the queue again")
	ok, _ = q.acquire("locks:late", "vb2", b)
	assert.True(t, ok, "b takes over the key handed to it")
	q.release("locks:late", "vb2")
	assert.Zero(t, q.admin.Exists(ctx, "locks:late").Val(), "the release found nobody in line (a did not re-enter ahead of b): nothing handed")
	ok, _ = q.acquire("locks:late", "va", a) // the late copy, again
	assert.False(t, ok, "a left: its late copy must not take the free key")
	assert.Zero(t, q.admin.Exists(ctx, "locks:late").Val(), "the key stayed free")
}

// A LeaveQueue that overtakes the waiter's first AcquireQueued keeps it
// out too.
func TestLeaveQueueBeforeAcquireQueued(t *testing.T) {
	q := newQueueT(t)
	ctx := context.Background()
	a := redlock.Waiter{ID: "a", Arrival: time.Now(), TTL: time.Minute, Fair: true}
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:early", a))
	assert.True(t, q.tombstone("locks:early", "a"))
	assert.ElementsMatch(t, []string{"{locks:early}:queue:ttl"}, q.keys())
	pttl := q.admin.PTTL(ctx, "{locks:early}:queue:ttl").Val()
	assert.Greater(t, pttl, time.Duration(0), "the tombstone expires")
	assert.LessOrEqual(t, pttl, time.Minute)

	ok, fence := q.acquire("locks:early", "va", a)
	assert.False(t, ok, "a left before it came: not granted")
	assert.Zero(t, fence)
	assert.False(t, q.queued("locks:early", "a"), "a was not queued")
	assert.Zero(t, q.admin.Exists(ctx, "locks:early").Val(), "the key stayed free")

	// A waiter that never left is unaffected.
	ok, _ = q.acquire("locks:early", "vc", redlock.Waiter{ID: "c", Arrival: time.Now(), TTL: time.Minute, Fair: true})
	assert.True(t, ok)
}

// A fair waiter that acquired leaves no trace: no tombstone, no queue key
// when nobody else waits; a retried copy while the key holds the value is
// true, and a later call of it after the release takes the free key as a
// newcomer (the client never sends one whose copy may be late: it goes on
// under a new ID, redlock's requeue).
func TestAcquireQueuedGrantLeavesNoTrace(t *testing.T) {
	q := newQueueT(t)
	ctx := context.Background()
	a := redlock.Waiter{ID: "a", Arrival: time.Now(), TTL: time.Minute, Fair: true}
	ok, _ := q.acquire("locks:won", "va", a)
	require.True(t, ok)
	assert.False(t, q.tombstone("locks:won", "a"))
	assert.ElementsMatch(t, []string{"locks:won"}, q.keys(), "the lock key alone")
	ok, _ = q.acquire("locks:won", "va", a)
	assert.True(t, ok, "a retried copy while the key holds the value")

	q.release("locks:won", "va")
	ok, _ = q.acquire("locks:won", "va2", a)
	assert.True(t, ok, "a later call after the release takes the free key")
	assert.Equal(t, "va2", q.admin.Get(ctx, "locks:won").Val())
	assert.ElementsMatch(t, []string{"locks:won"}, q.keys(), "still no line key")
}

// A release guard still comes first for a waiter that left.
func TestLeftWaiterReleaseGuard(t *testing.T) {
	q := newQueueT(t)
	ctx := context.Background()
	a := redlock.Waiter{ID: "a", Arrival: time.Now(), TTL: time.Minute, Fair: true}
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:g", a))
	ok, err := q.n.Release(ctx, "locks:g", "va", time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	guard, err := guardKey("locks:g", "va")
	require.NoError(t, err)
	fence, err := fenceKey("locks:g")
	require.NoError(t, err)
	queue, queueTTL := wire.QueueKey("locks:g"), wire.QueueTTLKey("locks:g")
	raw, err := acquireQueuedScript.Run(ctx, q.admin, []string{"locks:g", guard, fence, queue, queueTTL, wire.QueueValKey("locks:g"), wire.GrantKey("locks:g")},
		"va", 60000, "a", a.Arrival.UnixMilli(), 60000).Slice()
	require.NoError(t, err)
	code, _, okInts := twoInts(raw)
	require.True(t, okInts, "%v", raw)
	assert.Equal(t, int64(-1), code, "the release guard is checked before the tombstone")
	assert.True(t, q.tombstone("locks:g", "a"))
}

// A tombstone expires with the waiter's TTL: the same waiter ID can then
// queue again.
func TestTombstoneExpires(t *testing.T) {
	q := newQueueT(t)
	ctx := context.Background()
	ok, err := q.n.Acquire(ctx, "locks:e", "holder", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	a := redlock.Waiter{ID: "a", Arrival: time.Now(), TTL: 100 * time.Millisecond, Fair: true}
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:e", a))
	require.True(t, q.tombstone("locks:e", "a"))

	long := a
	long.TTL = time.Minute
	ttlKey := wire.QueueTTLKey("locks:e")
	for i := 0; i < 3000 && !q.queued("locks:e", "a"); i++ { // until the tombstone expired
		// The tombstone's expiry (server ms), read before the acquire: it
		// may expire between the acquire and the check after it.
		exp, expErr := q.admin.ZScore(ctx, ttlKey, "a").Result()
		ok, _ = q.acquire("locks:e", "va", long)
		require.False(t, ok, "held")
		if !q.queued("locks:e", "a") {
			require.NoError(t, expErr, "kept out without a tombstone")
			if !q.tombstone("locks:e", "a") {
				now, err := q.admin.Time(ctx).Result()
				require.NoError(t, err)
				require.GreaterOrEqual(t, float64(now.UnixMilli()), exp, "kept out only while the tombstone lives")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.True(t, q.queued("locks:e", "a"), "a queued again once its tombstone expired")
	q.release("locks:e", "holder")
	ok, _ = q.acquire("locks:e", "va", long)
	assert.True(t, ok)
}

// With knobs.NoLeaveTombstone leave_queue.lua takes the waiter out of
// both keys (no tombstone), so the late copy of its AcquireQueued enters
// the line again, ahead of the waiter behind it, which is refused the key
// once it is free; a LeaveQueue of the only waiter leaves no queue key.
func TestLeaveQueueNoTombstoneKnob(t *testing.T) {
	knobs.NoLeaveTombstone.Store(true)
	defer knobs.NoLeaveTombstone.Store(false)
	q := newQueueT(t)
	ctx := context.Background()
	t0 := time.Now()
	a := redlock.Waiter{ID: "a", Arrival: t0, TTL: time.Minute, Fair: true}
	b := redlock.Waiter{ID: "b", Arrival: t0.Add(time.Millisecond), TTL: time.Minute, Fair: true}
	ok, err := q.n.Acquire(ctx, "locks:notomb", "holder", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	for _, w := range []redlock.Waiter{a, b} {
		ok, _ = q.acquire("locks:notomb", "v"+w.ID, w)
		require.False(t, ok, w.ID)
	}
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:notomb", a))
	assert.False(t, q.tombstone("locks:notomb", "a"), "no tombstone")
	assert.False(t, q.queued("locks:notomb", "a"))

	ok, _ = q.acquire("locks:notomb", "va", a) // the late copy
	assert.False(t, ok, "the key is held")
	assert.True(t, q.queued("locks:notomb", "a"), "the late copy entered a again")
	q.release("locks:notomb", "holder")
	ok, _ = q.acquire("locks:notomb", "vb", b)
	assert.False(t, ok, "b is refused the free key: a is back ahead of it")

	c := redlock.Waiter{ID: "c", Arrival: time.Now(), TTL: time.Minute, Fair: true}
	ok, err = q.n.Acquire(ctx, "locks:alone", "holder", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	ok, _ = q.acquire("locks:alone", "vc", c)
	require.False(t, ok)
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:alone", c))
	assert.Zero(t, q.admin.Exists(ctx, "{locks:alone}:queue", "{locks:alone}:queue:ttl").Val(), "no queue key left")
}
