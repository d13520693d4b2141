package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// pollUntil polls cond for up to a minute (an outcome, not a time bound).
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 6000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// Release notifications on real redis-server masters through redisnode: a
// waiter whose backoff is an hour is woken by the holder's Unlock; no key
// is left behind (the line's ZSETs included).
func TestWakeupsOnRealMasters(t *testing.T) {
	ms := startMasters(t, 3)
	ctx := context.Background()
	subscribed := func(n int64) func() bool {
		return func() bool {
			for _, r := range ms.raw {
				got, err := r.PubSubNumSub(ctx, "{"+lockName+"}:released").Result()
				require.NoError(t, err)
				if got["{"+lockName+"}:released"] < n {
					return false
				}
			}
			return true
		}
	}

	t.Run("woken", func(t *testing.T) {
		holder := newMutex(t, realClient(t, ms.nodes))
		waiter := newMutex(t, realClient(t, ms.nodes), redlock.WithRetryBackoff(time.Hour, time.Hour))
		lease, err := holder.TryLock(ctx)
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		got := lockAsync(wctx, waiter)
		pollUntil(t, "the waiter subscribed on every master", subscribed(1))
		require.NoError(t, lease.Unlock(ctx))
		r := <-got
		require.NoError(t, r.err, "not woken by the release: it would sleep its hour")
		require.NoError(t, r.lease.Unlock(ctx))
	})

	// Unlock returns once a quorum and the healthy masters confirmed; on a
	// loaded machine a release may still be on its way (it is retried in
	// the background). Each part starts on masters with no key.
	noKeyLeft := func() {
		for i := range ms.raw {
			pollUntil(t, "no key left", func() bool { return len(ms.keys(t, i)) == 0 })
		}
	}
	noKeyLeft()
}

// A plain lock's waiters need no more than the minimal ACL of docs/nodes.md:
// a master that denies the line's commands (TIME, ZADD, ...) is asked with
// a plain acquire from then on, and Lock waits by its backoff there. Before
// the fallback the waiter's first refused attempt failed its Lock with
// ErrNodeDenied.
func TestWaitingWithTheMinimalACL(t *testing.T) {
	ms := startMasters(t, 3)
	ctx := context.Background()
	const acl = "on >pw resetchannels ~locks:* ~{locks:* -@all +evalsha +eval +info +get +set +del +exists +pexpire"
	var nodes []redlock.Node
	for i, s := range ms.servers {
		args := []any{"ACL", "SETUSER", "locker"}
		for _, f := range strings.Fields(acl) {
			args = append(args, f)
		}
		require.NoError(t, ms.raw[i].Do(ctx, args...).Err())
		n, err := redisnode.Dial("redis://locker:pw@" + s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	mutex := func(opts ...redlock.LockOption) *redlock.Mutex {
		m, err := realClient(t, nodes).NewMutex("locks:acl", opts...)
		require.NoError(t, err)
		return m
	}
	lease, err := mutex().TryLock(ctx)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got := lockAsync(wctx, mutex(redlock.WithRetryBackoff(10*time.Millisecond, 20*time.Millisecond)))
	pollUntil(t, "every master denied the waiter's line", func() bool {
		select {
		case r := <-got:
			t.Fatalf("the waiter's Lock returned while the lock was held: %v", r.err)
		default:
		}
		for _, r := range ms.raw {
			if !strings.Contains(r.Info(ctx, "errorstats").Val(), "errorstat_NOPERM") {
				return false
			}
		}
		return true
	})
	require.NoError(t, lease.Unlock(ctx))
	r := <-got
	require.NoError(t, r.err, "a plain waiter with the minimal ACL")
	require.NoError(t, r.lease.Unlock(ctx))
}
