package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// Release notifications and the fair queue on real redis-server masters
// through redisnode: a waiter whose backoff is an hour is woken by the
// holder's Unlock; three fair waiters get the lock in the order they came;
// no key is left behind (the queue's ZSETs included).
func TestWakeupsAndFairQueueOnRealMasters(t *testing.T) {
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

	t.Run("fair order", func(t *testing.T) {
		var ws []*redlock.Mutex
		for range 4 {
			ws = append(ws, newMutex(t, realClient(t, ms.nodes), redlock.WithFairQueue()))
		}
		// The holder must hold every master: on a free master the first
		// waiter would be granted (and roll back) at each attempt instead
		// of waiting in its queue.
		var lease *redlock.Lease
		for range 10 {
			l, err := ws[0].TryLock(ctx)
			require.NoError(t, err)
			everywhere := true
			for i := range ms.raw {
				_, held := ms.keys(t, i)[lockName]
				everywhere = everywhere && held
			}
			if everywhere {
				lease = l
				break
			}
			require.NoError(t, l.Unlock(ctx))
			noKeyLeft()
		}
		require.NotNil(t, lease, "the holder never took every master")
		order := make(chan int, 3)
		errs := make(chan error, 3)
		for i := 1; i < 4; i++ {
			go func() {
				l, err := ws[i].Lock(ctx)
				if err == nil {
					order <- i
					err = l.Unlock(ctx)
				}
				errs <- err
			}()
			// The next one starts only once this one is queued everywhere.
			pollUntil(t, "waiter queued on every master", func() bool {
				select {
				case err := <-errs:
					t.Fatalf("a waiter's Lock returned while the lock was held: %v", err)
				default:
				}
				for _, r := range ms.raw {
					n, err := r.ZCard(ctx, "{"+lockName+"}:queue").Result()
					require.NoError(t, err)
					if n < int64(i) {
						return false
					}
				}
				return true
			})
		}
		require.NoError(t, lease.Unlock(ctx))
		for range 3 {
			require.NoError(t, <-errs)
		}
		close(order)
		var got []int
		for i := range order {
			got = append(got, i)
		}
		assert.Equal(t, []int{1, 2, 3}, got, "taken in arrival order")
	})

	noKeyLeft()
}
