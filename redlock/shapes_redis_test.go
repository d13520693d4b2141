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
			rw, err := rwOf(c.NewRWMutex(lockName, redlock.WithTTL(5*time.Second), redlock.WithWriterPreference(),
				redlock.WithRetryBackoff(time.Millisecond, 20*time.Millisecond)))
			require.NoError(t, err)
			stop, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			var rec spans
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Go(func() {
					for stop.Err() == nil {
						if l, err := rw.r.Lock(stop); err == nil {
							rec.hold(stop, false, l, time.Duration(10+5*i)*time.Millisecond)
						}
					}
				})
			}
			for range 2 {
				wg.Go(func() {
					for stop.Err() == nil {
						if l, err := rw.w.Lock(stop); err == nil {
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
			short, err := rwOf(c.NewRWMutex(lockName+":expiry", redlock.WithTTL(1500*time.Millisecond)))
			require.NoError(t, err)
			r, err := short.r.TryLock(ctx)
			require.NoError(t, err)
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			w, err := short.w.Lock(wctx)
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
						if l, err := sem.Lock(stop); err == nil {
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

// Issue 16 item 6 on real servers: six readers re-lock continuously with
// overlapping leases; a writer with preference gets in (within a generous
// 30 s) and never while a reader holds, whether the readers share its
// read-write lock or use their own clients and read-write locks built without the option.
func TestRWMutexWriterPreferenceOnRealServers(t *testing.T) {
	for _, n := range []int{3, 5} {
		for _, readers := range []string{"same-rwmutex", "other-clients-without-option"} {
			t.Run(fmt.Sprintf("N=%d/%s", n, readers), func(t *testing.T) {
				ms := startMasters(t, n)
				c := realClient(t, ms.nodes)
				rw, err := rwOf(c.NewRWMutex(lockName, redlock.WithWriterPreference()))
				require.NoError(t, err)
				w := rwWorkload{writer: rw, hold: 50 * time.Millisecond, wait: 30 * time.Second, rounds: 1000}
				clients := []*redlock.Client{c}
				for range 6 {
					r := rw
					if readers != "same-rwmutex" {
						rc := realClient(t, ms.nodes)
						clients = append(clients, rc)
						r, err = rwOf(rc.NewRWMutex(lockName))
						require.NoError(t, err)
					}
					w.readers = append(w.readers, r)
				}
				out := w.run(t)
				t.Logf("writer waited %v (err %v); %d read leases, at most %d readers at once", out.waited, out.err, out.reads, out.most)
				require.NoError(t, out.err, "the writer gets in")
				assert.Zero(t, out.overlaps, "a reader held while the writer did")
				assert.GreaterOrEqual(t, out.most, 2, "readers shared the lock")
				for _, c := range clients {
					require.NoError(t, c.Close(context.Background()))
				}
				ms.noLockKeys(t)
			})
		}
	}
}

// Issue 16 item 7 on real servers: with one master of N killed, a
// semaphore of k is acquired exactly where docs/shapes.md's quorum table
// leaves room for a failed master (quorum <= N-1), and a refused attempt
// names that quorum.
func TestSemaphoreQuorumOnRealServers(t *testing.T) {
	byN := map[int][]semaphoreCell{}
	var ns []int
	for _, cell := range semaphoreTable(t) {
		if byN[cell.n] == nil {
			ns = append(ns, cell.n)
		}
		byN[cell.n] = append(byN[cell.n], cell)
	}
	for _, n := range ns {
		t.Run(fmt.Sprint("N=", n), func(t *testing.T) {
			ms := startMasters(t, n)
			require.NoError(t, ms.servers[n-1].Kill())
			c := realClient(t, ms.nodes)
			ctx := context.Background()
			for _, cell := range byN[n] {
				sem, err := c.NewSemaphore(fmt.Sprintf("%s:k%d", lockName, cell.k), cell.k)
				require.NoError(t, err)
				l, err := sem.TryLock(ctx)
				if cell.quorum <= n-1 {
					require.NoError(t, err, "k=%d, quorum %d: one failed master is tolerated", cell.k, cell.quorum)
					require.NoError(t, l.Unlock(ctx))
					continue
				}
				require.ErrorIs(t, err, redlock.ErrNotObtained, "k=%d, quorum %d: no failed master is tolerated", cell.k, cell.quorum)
				var qe *redlock.QuorumError
				require.ErrorAs(t, err, &qe)
				assert.Equal(t, cell.quorum, qe.Quorum)
			}
			require.NoError(t, ms.servers[n-1].Restart()) // the releases queued for it complete
			require.NoError(t, c.Close(ctx))
			ms.noLockKeys(t)
		})
	}
}
