package redisnode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/redlock"
)

// watchT watches key on n; the notifications arrive on the channel (its
// buffer keeps fn from blocking).
func watchT(t *testing.T, n *Node, key string) (<-chan string, func()) {
	t.Helper()
	got := make(chan string, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop, err := n.Watch(ctx, key, "", func(next string) { got <- next })
	require.NoError(t, err, key)
	t.Cleanup(stop)
	return got, stop
}

// nextT returns the next notification; it fails the test when none comes
// (a bound so that a broken Watch fails instead of hanging).
func nextT(t *testing.T, got <-chan string) string {
	t.Helper()
	select {
	case s := <-got:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no notification")
		return ""
	}
}

// expireT makes key, held by value, expire (a TTL of 1 ms), and waits until
// it has (bounded).
func expireT(t *testing.T, n *Node, key, value string) {
	t.Helper()
	ok, err := n.Extend(context.Background(), key, value, time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok, "%s holds %s", key, value)
	require.Eventually(t, func() bool {
		ok, err := n.Extend(context.Background(), key, value, time.Millisecond)
		return err == nil && !ok
	}, 10*time.Second, time.Millisecond, "%s held by %s with a TTL of 1ms expires", key, value)
}

func requireNone(t *testing.T, got <-chan string, why string) {
	t.Helper()
	select {
	case s := <-got:
		t.Fatalf("%s: got notification %q", why, s)
	default:
	}
}

// A Release or ReleaseHold that removes something publishes the first live
// waiter of the lock's queue ("" without one); one that removes nothing
// publishes nothing; LeaveQueue of the first waiter of a free lock tells the
// next one.
// handOverT takes key with value, puts waiter "waiter" in its line
// (waitingT) and releases it: the release hands the waiter the key and
// publishes it.
func handOverT(t *testing.T, n *Node, key, value string) {
	t.Helper()
	ctx := context.Background()
	ok, err := n.Acquire(ctx, key, value, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	waitingT(t, n, key)
	ok, err = n.Release(ctx, key, value, 0)
	require.NoError(t, err)
	require.True(t, ok)
}

// waitingT puts waiter "waiter" in key's line (a plain waiter refused while
// key is held), so that the release of key is reported, naming it. It
// arrives an hour late: waiters a test queues itself come first.
func waitingT(t *testing.T, n *Node, key string) {
	t.Helper()
	w := redlock.Waiter{ID: "waiter", Arrival: time.Now().Add(time.Hour), TTL: time.Minute}
	ok, _, err := n.AcquireQueued(context.Background(), key, "waiter", time.Minute, w)
	require.NoError(t, err, key)
	require.False(t, ok, "%s is held: the waiter is refused", key)
}

// takeOverT: the waiter of waitingT, handed key by a release (which named
// it), takes the key over (leaving the line) and releases it; nobody waits
// then, so that release publishes nothing, and key is free.
func takeOverT(t *testing.T, n *Node, key string) {
	t.Helper()
	w := redlock.Waiter{ID: "waiter", Arrival: time.Now().Add(time.Hour), TTL: time.Minute}
	ok, _, err := n.AcquireQueued(context.Background(), key, "taken over", time.Minute, w)
	require.NoError(t, err, key)
	require.True(t, ok, "%s: the release handed the key to the waiter: it takes it over", key)
	ok, err = n.Release(context.Background(), key, "taken over", 0)
	require.NoError(t, err, key)
	require.True(t, ok, key)
}

func TestWatchReportsReleases(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	admin := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	got, _ := watchT(t, n, "locks:w")

	handOverT(t, n, "locks:w", "v1")
	assert.Equal(t, "waiter\nwaiter", nextT(t, got), "the line's first waiter, and the value the release handed it the key at")
	// The release handed the key to the waiter, which keeps its place when
	// the handed key expires (an expiry publishes nothing).
	expireT(t, n, "locks:w", "waiter")

	// A waiter queues ahead of the first (an earlier arrival), behind the
	// holder: the release names it.
	ok, err := n.Acquire(ctx, "locks:w", "v2", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	a := redlock.Waiter{ID: "waiter-a", Arrival: time.Now(), TTL: time.Minute}
	ok, _, err = n.AcquireQueued(ctx, "locks:w", "va", time.Minute, a)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = n.Release(ctx, "locks:w", "v2", 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "waiter-a\nva", nextT(t, got))

	// A release that deletes nothing publishes nothing: had it published,
	// its "waiter-a" would come before the "waiter" of LeaveQueue (one
	// connection, in order).
	ok, err = n.Release(ctx, "locks:w", "nobody", time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, n.LeaveQueue(ctx, "locks:w", a))
	assert.Equal(t, "waiter", nextT(t, got), "LeaveQueue of the first waiter, handed the key, releases it and names the next; nothing before it")
	assert.Zero(t, admin.Exists(ctx, "locks:w").Val(), "the key waiter-a was handed is released; the waiter has no record: nothing handed")

	// ReleaseHold on a shared lock; the queue's expired first entry is
	// skipped (and dropped): the next live waiter is named.
	gotShared, _ := watchT(t, n, "locks:s")
	h := redlock.Hold{Group: "g", ID: "h1"}
	held, err := n.AcquireHold(ctx, "locks:s", h, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, held)
	now := serverMillisT(t, admin)
	require.NoError(t, admin.ZAdd(ctx, "{locks:s}:queue", redis.Z{Score: float64(now - 2000), Member: "dead"}, redis.Z{Score: float64(now - 1000), Member: "live"}).Err())
	require.NoError(t, admin.ZAdd(ctx, "{locks:s}:queue:ttl", redis.Z{Score: float64(now - 1000), Member: "dead"}, redis.Z{Score: float64(now + 60000), Member: "live"}).Err())
	ok, err = n.ReleaseHold(ctx, "locks:s", h, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "live", nextT(t, gotShared))
	assert.Equal(t, []string{"live"}, admin.ZRange(ctx, "{locks:s}:queue", 0, -1).Val(), "the expired entry was dropped")
	assert.Equal(t, []string{"live"}, admin.ZRange(ctx, "{locks:s}:queue:ttl", 0, -1).Val())
	ok, err = n.ReleaseHold(ctx, "locks:s", h, 0) // removes nothing
	require.NoError(t, err)
	require.False(t, ok)
	held, err = n.AcquireHold(ctx, "locks:s", h, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, held)
	require.NoError(t, admin.Del(ctx, "{locks:s}:queue", "{locks:s}:queue:ttl").Err())
	ok, err = n.ReleaseHold(ctx, "locks:s", h, 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "", nextT(t, gotShared), "the release of nothing came before and published nothing")

	// A hash-tagged name publishes on "name:released"; each key's watchers
	// hear only their key.
	gotTagged, _ := watchT(t, n, "locks:{t}:x")
	ok, err = n.Acquire(ctx, "locks:{t}:x", "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	waitingT(t, n, "locks:{t}:x")
	ok, err = n.Release(ctx, "locks:{t}:x", "v", 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "waiter\nwaiter", nextT(t, gotTagged))
	assert.Equal(t, int64(1), admin.PubSubNumSub(ctx, "locks:{t}:x:released").Val()["locks:{t}:x:released"])
	requireNone(t, got, "locks:w")
	requireNone(t, gotShared, "locks:s")
}

func serverMillisT(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMilli()
}

// stop ends one watch and leaves the others of the key; a second stop is
// harmless; after the last stop the channel is unsubscribed, and a new
// Watch subscribes it again.
func TestWatchStop(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	admin := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	release := func() {
		t.Helper()
		ok, err := n.Acquire(ctx, "locks:stop", "v", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		waitingT(t, n, "locks:stop")
		ok, err = n.Release(ctx, "locks:stop", "v", 0)
		require.NoError(t, err)
		require.True(t, ok)
		takeOverT(t, n, "locks:stop") // publishes nothing: nobody waits
	}
	got1, stop1 := watchT(t, n, "locks:stop")
	got2, stop2 := watchT(t, n, "locks:stop")
	assert.Equal(t, int64(1), admin.PubSubNumSub(ctx, "{locks:stop}:released").Val()["{locks:stop}:released"], "one subscription for both watches")
	release()
	assert.Equal(t, "waiter\nwaiter", nextT(t, got1))
	assert.Equal(t, "waiter\nwaiter", nextT(t, got2))

	stop1()
	stop1()
	release()
	release()
	assert.Equal(t, "waiter\nwaiter", nextT(t, got2))
	assert.Equal(t, "waiter\nwaiter", nextT(t, got2)) // the fns of the first release's message all ran before
	requireNone(t, got1, "stopped")

	stop2()
	stop2()
	numsub := int64(-1)
	for i := 0; i < 600 && numsub != 0; i++ { // the reader unsubscribes on its next turn
		numsub = admin.PubSubNumSub(ctx, "{locks:stop}:released").Val()["{locks:stop}:released"]
		if numsub != 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	assert.Zero(t, numsub, "unsubscribed after the last stop")

	got3, _ := watchT(t, n, "locks:stop")
	release()
	assert.Equal(t, "waiter\nwaiter", nextT(t, got3))
	requireNone(t, got2, "stopped")
}

// Close ends the watch goroutine (goleak) and fails later Watches; a stop
// after Close is harmless.
func TestWatchClose(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	n, err := Dial(srv.Addr())
	require.NoError(t, err)
	_, stop := watchT(t, n, "locks:c")
	_, _ = watchT(t, n, "locks:d")
	require.NoError(t, n.Close())
	stop()
	_, err = n.Watch(context.Background(), "locks:c", "", func(string) {})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "closed")
	_ = n.Close() // a second Close does not block

	// Close waits for the goroutine also when the client stays open (a
	// client passed to New).
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	before := goleak.IgnoreCurrent()
	o, err := New(c)
	require.NoError(t, err)
	_, _ = watchT(t, o, "locks:c")
	require.NoError(t, o.Close())
	goleak.VerifyNone(t, before)
	require.NoError(t, c.Ping(context.Background()).Err(), "the client is left open")

	// A Node that never watched closes as before.
	m, err := Dial(srv.Addr())
	require.NoError(t, err)
	require.NoError(t, m.Close())
}

// A context that ends before the server answers fails Watch with an error
// wrapping ctx.Err(); a nil fn and a bad key are refused.
func TestWatchErrors(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := n.Watch(ctx, "locks:e", "", func(string) {})
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, srv.Pause())
	t.Cleanup(func() { _ = srv.Resume() })
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = n.Watch(ctx, "locks:e", "", func(string) {})
	require.ErrorIs(t, err, context.DeadlineExceeded, "a paused server")
	require.NoError(t, srv.Resume())
	got, _ := watchT(t, n, "locks:e") // the watch connection recovers
	ok, err := n.Acquire(context.Background(), "locks:e", "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	waitingT(t, n, "locks:e")
	ok, err = n.Release(context.Background(), "locks:e", "v", 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "waiter\nwaiter", nextT(t, got))

	_, err = n.Watch(context.Background(), "locks:e", "", nil)
	require.Error(t, err)
	_, err = n.Watch(context.Background(), "a}b", "", func(string) {})
	require.ErrorIs(t, err, redlock.ErrNotSent)
}

// An ACL user without channel permissions (Redis 7's resetchannels) cannot
// watch: the error wraps redlock.ErrNodeDenied and the NOPERM reply and
// names the node, never the password. Its releases still succeed.
func TestWatchDeniedWithoutChannelPermissions(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	ctx := context.Background()
	setup := adminT(t, &redis.Options{Addr: srv.Addr()})
	pass := secretA + secretB
	minimal := strings.Replace(aclLocker, ">pw", ">"+pass, 1)
	for _, cmd := range [][]any{
		append([]any{"ACL", "SETUSER", "locker"}, fields(minimal)...),
		append([]any{"ACL", "SETUSER", "subscriber"}, fields(minimal+" +subscribe +unsubscribe +ping")...),
	} {
		require.NoError(t, setup.Do(ctx, cmd...).Err(), cmd)
	}
	for _, user := range []string{"locker", "subscriber"} {
		n := dialT(t, "redis://"+user+":"+pass+"@"+srv.Addr())
		for i := 0; i < 2; i++ { // a refusal leaves no state that wedges the next Watch
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := n.Watch(wctx, "locks:acl", "", func(string) {})
			cancel()
			require.Error(t, err, user)
			assert.ErrorIs(t, err, redlock.ErrNodeDenied, user)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, user)
			var rerr redis.Error
			require.ErrorAs(t, err, &rerr, user)
			assert.True(t, strings.HasPrefix(rerr.Error(), "NOPERM "), rerr.Error())
			assert.True(t, strings.HasPrefix(err.Error(), "redlock: node denied access: "+srv.Addr()+": refused "), err.Error())
			assert.True(t, strings.HasSuffix(err.Error(), ": "+rerr.Error()), err.Error())
			assert.NotContains(t, err.Error(), secretA)
			assert.NotContains(t, err.Error(), secretB)
			t.Logf("%s: %v", user, err)
		}
		ok, err := n.Acquire(ctx, "locks:acl", "v", time.Minute)
		require.NoError(t, err, user)
		require.True(t, ok, user)
		ok, err = n.Release(ctx, "locks:acl", "v", time.Minute)
		require.NoError(t, err, user)
		assert.True(t, ok, "%s: the release succeeds though it cannot publish", user)
		assert.Zero(t, setup.Exists(ctx, "locks:acl").Val(), user)
	}
}

// The owner of a client passed to New may close it without closing the
// Node: the watch goroutine ends with it, and Watch fails from then on.
func TestWatchEndsWithTheClient(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	n, err := New(c)
	require.NoError(t, err)
	_, _ = watchT(t, n, "locks:owner")
	require.NoError(t, c.Close())
	var werr error
	for i := 0; i < 500 && werr == nil; i++ { // until the reader has seen the client closed
		var stop func()
		if stop, werr = n.Watch(context.Background(), "locks:other", "", func(string) {}); werr == nil {
			stop()
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.Error(t, werr)
	assert.Contains(t, werr.Error(), "closed")
	require.NoError(t, n.Close())
}
