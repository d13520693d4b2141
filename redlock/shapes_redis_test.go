package redlock_test

// The lock shapes on real redis-server processes (N=3 and N=5) through
// redisnode. Safety is checked on recorded lease windows (spans), never on
// time bounds.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

// lossyNode applies AcquireHold on its server and, while lose is set, drops
// the reply (the client sees an error, the hold is there).
type lossyNode struct {
	redlock.ShapeNode
	lose atomic.Bool
}

func (n *lossyNode) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	c, err := n.ShapeNode.AcquireHold(ctx, key, h, ttl)
	if err == nil && n.lose.Load() {
		return 0, errors.New("connection reset (reply lost)")
	}
	return c, err
}

// holdCounts returns the number of holds in the lock's sorted set on each
// master.
func (ms *masters) holdCounts(t *testing.T) []int64 {
	t.Helper()
	out := make([]int64, len(ms.raw))
	for i, r := range ms.raw {
		n, err := r.ZCard(context.Background(), lockName).Result()
		require.NoError(t, err)
		out[i] = n
	}
	return out
}

// noLockKeys fails if a master still has a key of the lock other than
// release guards, or a waiting writers' mark without an expiry (a writer
// that gave up leaves its mark to expire on its own).
func (ms *masters) noLockKeys(t *testing.T) {
	t.Helper()
	for i, r := range ms.raw {
		for k := range ms.keys(t, i) {
			if !strings.Contains(k, lockName) || strings.Contains(k, "release-guard") {
				continue
			}
			if strings.HasSuffix(k, ":waiting") {
				ttl, err := r.PTTL(context.Background(), k).Result()
				require.NoError(t, err)
				if ttl > 0 {
					continue
				}
			}
			t.Errorf("key %q left on master %d", k, i)
		}
	}
}

func TestReentrantOnRealServers(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint("N=", n), func(t *testing.T) {
			ms := startMasters(t, n)
			lossy := &lossyNode{ShapeNode: ms.nodes[0].(redlock.ShapeNode)}
			nodes := append([]redlock.Node{lossy}, ms.nodes[1:]...)
			c := realClient(t, nodes)
			ctx := context.Background()
			ab := reentrants(t, c, 10*time.Second, "job-7", "job-8")
			a, b := ab[0], ab[1]
			refused := func(why string) { t.Helper(); requireRefused(t, b, why) }
			settled := func(want []int64) {
				t.Helper()
				require.Eventually(t, func() bool { return fmt.Sprint(ms.holdCounts(t)) == fmt.Sprint(want) },
					10*time.Second, 10*time.Millisecond, "hold counts %v, want %v", ms.holdCounts(t), want)
			}
			all := func(k int64) []int64 {
				out := make([]int64, n)
				for i := range out {
					out[i] = k
				}
				return out
			}
			l1, err := a.TryLock(ctx)
			require.NoError(t, err)
			settled(all(1))
			lossy.lose.Store(true)
			l2, err := a.TryLock(ctx) // master 0 applies it but the reply is lost
			require.NoError(t, err)
			lossy.lose.Store(false)
			settled(all(2))
			refused("job-7 holds twice")
			l3, err := a.TryLock(ctx)
			require.NoError(t, err)
			settled(all(3))
			assert.Equal(t, 3, l3.Holds())
			require.NoError(t, l2.Unlock(ctx)) // guarded on master 0, whose acquire was unknown
			settled(all(2))
			refused("job-7 holds l1 and l3")
			require.NoError(t, l3.Unlock(ctx))
			refused("job-7 holds l1")
			require.NoError(t, l1.Unlock(ctx))
			settled(all(0))
			ms.noLockKeys(t)
			l, err := b.TryLock(ctx)
			require.NoError(t, err, "free once every hold of job-7 is gone")
			require.NoError(t, l.Unlock(ctx))
			require.NoError(t, c.Close(ctx))
			ms.noLockKeys(t)
		})
	}
}

// Many readers and two writers (with writer preference) cycle for a while:
// no writer's valid window overlaps any other window, readers share, and
// writers get in. Then a reader that never unlocks keeps a writer out until
// its validity ends.
func TestRWMutexOnRealServers(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint("N=", n), func(t *testing.T) {
			ms := startMasters(t, n)
			c := realClient(t, ms.nodes)
			rw, err := c.NewRWMutex(lockName, redlock.WithTTL(5*time.Second), redlock.WithWriterPreference(),
				redlock.WithRetryBackoff(time.Millisecond, 20*time.Millisecond))
			require.NoError(t, err)
			stop, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			var rec spans
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Go(func() {
					for stop.Err() == nil {
						if l, err := rw.RLock(stop); err == nil {
							rec.hold(stop, false, l, time.Duration(10+5*i)*time.Millisecond)
						}
					}
				})
			}
			for range 2 {
				wg.Go(func() {
					for stop.Err() == nil {
						if l, err := rw.Lock(stop); err == nil {
							rec.hold(stop, true, l, 5*time.Millisecond)
						}
						time.Sleep(20 * time.Millisecond)
					}
				})
			}
			wg.Wait()
			most, writes := rec.check(t, 1<<30)
			assert.GreaterOrEqual(t, most, 2, "readers shared the lock")
			assert.Positive(t, writes, "writers got in")

			// Reader expiry.
			ctx := context.Background()
			short, err := c.NewRWMutex(lockName+":expiry", redlock.WithTTL(1500*time.Millisecond))
			require.NoError(t, err)
			r, err := short.TryRLock(ctx)
			require.NoError(t, err)
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			w, err := short.Lock(wctx)
			require.NoError(t, err)
			assert.False(t, time.Now().Before(r.Until()), "the writer got in only after the reader's validity")
			require.ErrorIs(t, r.Unlock(ctx), redlock.ErrLockLost)
			require.NoError(t, w.Unlock(ctx))
			require.NoError(t, c.Close(ctx))
			ms.noLockKeys(t)
		})
	}
}

// Holders cycle on a semaphore: never more than K valid windows at once.
func TestSemaphoreOnRealServers(t *testing.T) {
	for _, tc := range []struct{ n, k int }{{3, 2}, {5, 3}} {
		t.Run(fmt.Sprintf("N=%d/K=%d", tc.n, tc.k), func(t *testing.T) {
			ms := startMasters(t, tc.n)
			c := realClient(t, ms.nodes)
			sem, err := c.NewSemaphore(lockName, tc.k, redlock.WithTTL(5*time.Second), redlock.WithRetryBackoff(time.Millisecond, 10*time.Millisecond))
			require.NoError(t, err)
			stop, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			var rec spans
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Go(func() {
					for stop.Err() == nil {
						if l, err := sem.Acquire(stop); err == nil {
							rec.hold(stop, false, l, time.Duration(10+3*i)*time.Millisecond)
						}
					}
				})
			}
			wg.Wait()
			most, _ := rec.check(t, tc.k)
			assert.GreaterOrEqual(t, most, 2, "holders shared the semaphore")
			require.NoError(t, c.Close(context.Background()))
			ms.noLockKeys(t)
		})
	}
}
