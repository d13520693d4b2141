package redisnode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// queueT is a fair-queue test fixture: a Node and an admin client of one
// server.
type queueT struct {
	t     *testing.T
	n     *Node
	admin *redis.Client
}

func newQueueT(t *testing.T) *queueT {
	srv := redisproc.StartT(t, redisproc.Config{})
	return &queueT{t: t, n: dialT(t, srv.Addr()), admin: adminT(t, &redis.Options{Addr: srv.Addr()})}
}

func (q *queueT) acquire(key, value string, w redlock.Waiter) (bool, int64) {
	q.t.Helper()
	ok, fence, err := q.n.AcquireQueued(context.Background(), key, value, time.Minute, w)
	require.NoError(q.t, err, w.ID)
	return ok, fence
}

func (q *queueT) release(key, value string) {
	q.t.Helper()
	ok, err := q.n.Release(context.Background(), key, value, 0)
	require.NoError(q.t, err)
	require.True(q.t, ok)
}

// keys lists every key of the server.
func (q *queueT) keys() []string {
	q.t.Helper()
	keys, err := q.admin.Keys(context.Background(), "*").Result()
	require.NoError(q.t, err)
	return keys
}

// queued reports whether id is in key's queue (a live entry, not a
// tombstone).
func (q *queueT) queued(key, id string) bool {
	q.t.Helper()
	queue := wire.QueueKey(key)
	return q.admin.ZScore(context.Background(), queue, id).Err() == nil
}

// tombstone reports whether id left key's queue and is kept out: it has an
// entry in the expiries but none in the queue.
func (q *queueT) tombstone(key, id string) bool {
	q.t.Helper()
	queueTTL := wire.QueueTTLKey(key)
	return !q.queued(key, id) && q.admin.ZScore(context.Background(), queueTTL, id).Err() == nil
}

// drained polls (bounded) until neither of key's queue sets exists: the
// tombstones of the waiters that left expired. It fails the test if they
// outlive the bound.
func (q *queueT) drained(key string) {
	q.t.Helper()
	queue, queueTTL := wire.QueueKey(key), wire.QueueTTLKey(key)
	for i := 0; i < 3000; i++ {
		if q.admin.Exists(context.Background(), queue, queueTTL).Val() == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	q.t.Fatalf("%s's queue keys are still there: %v", key, q.keys())
}

// Waiters acquire in arrival order: a release hands the key to the earlier
// one (which keeps its place), the later one is refused, and is handed the
// key once the earlier one acquired and released. A granted waiter leaves
// the queue, the last one leaves no queue key behind, and a take-over
// deletes the grant record.
func TestAcquireQueuedOrder(t *testing.T) {
	q := newQueueT(t)
	t0 := time.Now()
	a := redlock.Waiter{ID: "a", Arrival: t0, TTL: time.Minute, Fair: true}
	b := redlock.Waiter{ID: "b", Arrival: t0.Add(time.Millisecond), TTL: time.Minute, Fair: true}

	ok, err := q.n.Acquire(context.Background(), "locks:q", "holder", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	ok, _ = q.acquire("locks:q", "vb", b) // b comes first but arrived later
	assert.False(t, ok, "held")
	ok, _ = q.acquire("locks:q", "va", a)
	assert.False(t, ok, "held")
	assert.ElementsMatch(t, []string{"locks:q", "{locks:q}:queue", "{locks:q}:queue:ttl", "{locks:q}:queue:val"}, q.keys())
	pttl := q.admin.PTTL(context.Background(), "{locks:q}:queue").Val()
	assert.Greater(t, pttl, time.Duration(0), "the queue expires with its last entry")
	assert.LessOrEqual(t, pttl, time.Minute)
	assert.Equal(t, pttl > 0, q.admin.PTTL(context.Background(), "{locks:q}:queue:ttl").Val() > 0)
	assert.Equal(t, pttl > 0, q.admin.PTTL(context.Background(), "{locks:q}:queue:val").Val() > 0)

	q.release("locks:q", "holder")
	assert.Equal(t, "va", q.admin.Get(context.Background(), "locks:q").Val(), "a arrived first: the release handed it the key at its value")
	assert.Equal(t, wire.Grant("a", "va"), q.admin.Get(context.Background(), wire.GrantKey("locks:q")).Val(), "the grant record")
	assert.True(t, q.queued("locks:q", "a"), "a keeps its place")
	assert.False(t, q.admin.HExists(context.Background(), wire.QueueValKey("locks:q"), "a").Val(), "a's record went with the hand-over")
	ok, _ = q.acquire("locks:q", "vb", b)
	assert.False(t, ok, "the key was handed to a")
	ok, _ = q.acquire("locks:q", "va", a)
	require.True(t, ok, "the key holds the value handed to a")
	assert.False(t, q.queued("locks:q", "a"), "a left the queue")
	assert.False(t, q.tombstone("locks:q", "a"), "a grant leaves no tombstone")
	assert.True(t, q.queued("locks:q", "b"))
	ok, _ = q.acquire("locks:q", "va", a)
	assert.True(t, ok, "a retried copy: the key already holds the value")
	assert.False(t, q.queued("locks:q", "a"), "the retried copy left no entry")
	ok, _ = q.acquire("locks:q", "vb", b)
	assert.False(t, ok, "held by a")

	q.release("locks:q", "va")
	assert.Equal(t, "vb", q.admin.Get(context.Background(), "locks:q").Val(), "the release handed the key to b at its value")
	ok, _ = q.acquire("locks:q", "vb2", b)
	require.True(t, ok, "b takes the key handed to it over")
	assert.Equal(t, "vb2", q.admin.Get(context.Background(), "locks:q").Val(), "the take-over set the key to b's new value")
	assert.ElementsMatch(t, []string{"locks:q"}, q.keys(), "the line went with its last entry; the take-over deleted the grant record")
	q.release("locks:q", "vb2")
	assert.Empty(t, q.keys(), "nothing is left")
}

// Equal arrivals are ordered by ID; an entry keeps its first arrival.
func TestAcquireQueuedTies(t *testing.T) {
	q := newQueueT(t)
	t0 := time.Now()
	ok, _ := q.acquire("locks:t", "vy", redlock.Waiter{ID: "y", Arrival: t0, TTL: time.Minute, Fair: true})
	require.True(t, ok, "alone and free")
	ok, _ = q.acquire("locks:t", "vz", redlock.Waiter{ID: "z", Arrival: t0, TTL: time.Minute, Fair: true})
	require.False(t, ok)
	ok, _ = q.acquire("locks:t", "vx", redlock.Waiter{ID: "x", Arrival: t0, TTL: time.Minute, Fair: true})
	require.False(t, ok)
	q.release("locks:t", "vy")
	// z comes again with a later arrival: it keeps its first one, and x is
	// still ahead of it (same arrival, smaller ID).
	ok, _ = q.acquire("locks:t", "vz", redlock.Waiter{ID: "z", Arrival: t0.Add(-time.Hour), TTL: time.Minute, Fair: true})
	assert.False(t, ok, "x is first: equal arrivals in ID order, and z kept its first arrival")
	ok, _ = q.acquire("locks:t", "vx", redlock.Waiter{ID: "x", Arrival: t0, TTL: time.Minute, Fair: true})
	assert.True(t, ok)
}

// A waiter whose entry expires stops blocking the queue.
func TestAcquireQueuedExpiredWaiter(t *testing.T) {
	q := newQueueT(t)
	t0 := time.Now()
	ok, _ := q.acquire("locks:x", "vh", redlock.Waiter{ID: "h", Arrival: t0.Add(-time.Second), TTL: 100 * time.Millisecond, Fair: true})
	require.True(t, ok)
	short := redlock.Waiter{ID: "short", Arrival: t0, TTL: 50 * time.Millisecond, Fair: true}
	ok, _ = q.acquire("locks:x", "vs", short)
	require.False(t, ok)
	late := redlock.Waiter{ID: "late", Arrival: t0.Add(time.Millisecond), TTL: 2 * time.Second, Fair: true}
	// The key expires (a release would hand it to short).
	extended, err := q.n.Extend(context.Background(), "locks:x", "vh", time.Millisecond)
	require.NoError(t, err)
	require.True(t, extended)
	for i := 0; i < 500 && !ok; i++ { // until short's entry expired
		if ok, _ = q.acquire("locks:x", "vl", late); !ok {
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.True(t, ok, "granted once the first waiter's entry expired")
	assert.False(t, q.queued("locks:x", "short"), "the expired entry was dropped")
	assert.False(t, q.tombstone("locks:x", "short"), "no tombstone for an expired entry")
	q.drained("locks:x")
	assert.ElementsMatch(t, []string{"locks:x"}, q.keys(), "the key alone")
}

// LeaveQueue lets the next waiter go at once; leaving twice is no error.
func TestLeaveQueue(t *testing.T) {
	q := newQueueT(t)
	ctx := context.Background()
	t0 := time.Now()
	a := redlock.Waiter{ID: "a", Arrival: t0, TTL: time.Minute, Fair: true}
	b := redlock.Waiter{ID: "b", Arrival: t0.Add(time.Millisecond), TTL: time.Minute, Fair: true}
	ok, err := q.n.Acquire(ctx, "locks:{l}", "holder", time.Minute) // a hash-tagged name
	require.NoError(t, err)
	require.True(t, ok)
	for _, w := range []redlock.Waiter{a, b} {
		ok, _ = q.acquire("locks:{l}", "v"+w.ID, w)
		require.False(t, ok)
	}
	assert.ElementsMatch(t, []string{"locks:{l}", "locks:{l}:queue", "locks:{l}:queue:ttl", "locks:{l}:queue:val"}, q.keys())
	q.release("locks:{l}", "holder")
	ok, _ = q.acquire("locks:{l}", "vb", b)
	require.False(t, ok, "the release handed the key to a")
	a.TTL = 100 * time.Millisecond // a short tombstone
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:{l}", a))
	assert.Equal(t, "vb", q.admin.Get(ctx, "locks:{l}").Val(), "a's LeaveQueue released the key handed to it and handed it to b")
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:{l}", a))
	assert.Equal(t, "vb", q.admin.Get(ctx, "locks:{l}").Val(), "a second LeaveQueue of a changes nothing")
	assert.False(t, q.queued("locks:{l}", "a"))
	ok, _ = q.acquire("locks:{l}", "vb2", b)
	assert.True(t, ok, "b takes the key handed to it over")
	b.TTL = 100 * time.Millisecond
	require.NoError(t, q.n.LeaveQueue(ctx, "locks:{l}", b))
	q.drained("locks:{l}")
	assert.ElementsMatch(t, []string{"locks:{l}"}, q.keys(), "the key alone: b's LeaveQueue keeps the key it took over; the take-over deleted the grant record")
	assert.Equal(t, "vb2", q.admin.Get(ctx, "locks:{l}").Val())
}

// AcquireQueued reads the fencing counter and honours release guards.
func TestAcquireQueuedFenceAndGuard(t *testing.T) {
	q := newQueueT(t)
	ctx := context.Background()
	w := redlock.Waiter{ID: "w", Arrival: time.Now(), TTL: time.Minute, Fair: true}
	ok, fence := q.acquire("locks:f", "v", w)
	require.True(t, ok)
	assert.Zero(t, fence, "no counter yet")
	ok, err := q.n.RaiseFence(ctx, "locks:f", "v", 7)
	require.NoError(t, err)
	require.True(t, ok)
	ok, fence = q.acquire("locks:f", "v", w)
	assert.True(t, ok)
	assert.Equal(t, int64(7), fence)
	q.release("locks:f", "v")
	// w acquired and left; the next Lock call is another waiter.
	w2 := redlock.Waiter{ID: "w2", Arrival: time.Now(), TTL: time.Minute, Fair: true}
	ok, fence = q.acquire("locks:f", "v2", w2)
	assert.True(t, ok)
	assert.Equal(t, int64(7), fence)
	q.release("locks:f", "v2")

	// A release of "late" ran first: the straggling acquire is refused,
	// although its waiter is first and the key is free.
	ok, err = q.n.Release(ctx, "locks:f", "late", time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	ok, fence = q.acquire("locks:f", "late", redlock.Waiter{ID: "w3", Arrival: time.Now(), TTL: time.Minute, Fair: true})
	assert.False(t, ok, "refused by the release guard")
	assert.Equal(t, int64(7), fence)
	assert.Zero(t, q.admin.Exists(ctx, "locks:f").Val())
}

// Bad arguments are refused before anything is sent.
func TestQueueValidation(t *testing.T) {
	n, err := Dial("127.0.0.1:1")
	require.NoError(t, err)
	defer n.Close()
	ctx := context.Background()
	ok := redlock.Waiter{ID: "w", Arrival: time.Now(), TTL: time.Second, Fair: true}
	long := strings.Repeat("x", 1000) + "\n"
	for _, c := range []struct {
		name  string
		key   string
		ttl   time.Duration
		w     redlock.Waiter
		shows string
	}{
		{"ttl", "k", time.Microsecond, ok, "1µs"},
		{"waiter TTL", "k", time.Second, redlock.Waiter{ID: "w", TTL: 0, Fair: true}, "waiter TTL 0s"},
		{"empty ID", "k", time.Second, redlock.Waiter{TTL: time.Second}, "empty waiter ID"},
		{"newline", "k", time.Second, redlock.Waiter{ID: "a\nb", TTL: time.Second, Fair: true}, `"a\nb"`},
		{"long newline", "k", time.Second, redlock.Waiter{ID: long, TTL: time.Second, Fair: true}, "bytes)"},
		{"key", "a}b", time.Second, ok, `"a}b"`},
	} {
		_, _, err := n.AcquireQueued(ctx, c.key, "v", c.ttl, c.w)
		require.ErrorIs(t, err, redlock.ErrNotSent, c.name)
		assert.Contains(t, err.Error(), c.shows, c.name)
		assert.Less(t, len(err.Error()), 400, c.name)
		if c.name != "ttl" {
			err = n.LeaveQueue(ctx, c.key, c.w)
			require.ErrorIs(t, err, redlock.ErrNotSent, c.name)
		}
	}
}
