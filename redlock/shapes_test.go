package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

// Unit tests of the lock shapes over in-memory masters in synctest bubbles
// (virtual time: every outcome is exact). The same properties on real
// redis-server processes are in shapes_redis_test.go.

// span is one lease's valid window: from the moment Lock returned to the
// earlier of its Until and the moment Unlock was called.
type span struct {
	write      bool
	start, end time.Time
}

// spans records the valid windows of leases from many goroutines.
type spans struct {
	mu   sync.Mutex
	list []span
}

// hold keeps lease for d (or until ctx ends) and records its window.
func (s *spans) hold(ctx context.Context, write bool, lease *redlock.Lease, d time.Duration) {
	start := time.Now()
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	end := time.Now()
	if u := lease.Until(); u.Before(end) {
		end = u
	}
	_ = lease.Unlock(context.Background())
	s.mu.Lock()
	s.list = append(s.list, span{write: write, start: start, end: end})
	s.mu.Unlock()
}

// check fails the test if a write window overlaps any other window, or more
// than limit windows overlap; it returns the most windows that overlapped
// and the number of write windows.
func (s *spans) check(t *testing.T, limit int) (most, writes int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for i, a := range s.list {
		if a.write {
			writes++
		}
		if !a.end.After(a.start) {
			continue // expired before it was recorded: never valid
		}
		edges = append(edges, edge{a.start, 1}, edge{a.end, -1})
		for _, b := range s.list[i+1:] {
			if (a.write || b.write) && a.start.Before(b.end) && b.start.Before(a.end) {
				t.Errorf("a writer overlapped another holder: %v-%v and %v-%v", a.start, a.end, b.start, b.end)
			}
		}
	}
	// Ends sort before starts at the same instant: a window is open [start, end).
	slices.SortFunc(edges, func(x, y edge) int {
		if c := x.at.Compare(y.at); c != 0 {
			return c
		}
		return x.delta - y.delta
	})
	cur := 0
	for _, e := range edges {
		cur += e.delta
		most = max(most, cur)
	}
	assert.LessOrEqual(t, most, limit, "more holders at once than the limit")
	return most, writes
}

// reentrants returns a reentrant mutex of lockName for each owner.
func reentrants(t *testing.T, c *redlock.Client, ttl time.Duration, owners ...string) []*redlock.Mutex {
	t.Helper()
	var out []*redlock.Mutex
	for _, o := range owners {
		m, err := c.NewReentrant(lockName, o, redlock.WithTTL(ttl))
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

// requireRefused fails unless one attempt on m is refused.
func requireRefused(t *testing.T, m *redlock.Mutex, why string) {
	t.Helper()
	_, err := m.TryLock(context.Background())
	require.ErrorIs(t, err, redlock.ErrNotObtained, why)
}

// A reentrant owner takes the lock again and again (Holds reports the
// depth), any other owner is refused until the last of its holds is
// released, in any order, and the last release leaves no key.
func TestReentrantDepth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		ctx := context.Background()
		ms3 := reentrants(t, c, time.Second, "job-7", "job-7", "job-8") // a2: another process of job-7
		a, a2, b := ms3[0], ms3[1], ms3[2]
		var leases []*redlock.Lease
		for depth := 1; depth <= 3; depth++ {
			m := a
			if depth == 2 {
				m = a2
			}
			l, err := m.TryLock(ctx)
			require.NoError(t, err)
			synctest.Wait() // every node has applied it
			assert.Equal(t, depth, l.Holds())
			leases = append(leases, l)
		}
		for _, i := range []int{1, 0, 2} {
			_, err := b.TryLock(ctx)
			require.ErrorIs(t, err, redlock.ErrNotObtained, "another owner while job-7 holds")
			// The round ends at two "taken": the third may not have replied.
			taken := 0
			for _, e := range nodeErrs(t, err) {
				if errors.Is(e, redlock.ErrNodeTaken) {
					taken++
				} else {
					assert.ErrorIs(t, e, redlock.ErrNoReply)
				}
			}
			assert.GreaterOrEqual(t, taken, 2)
			require.NoError(t, leases[i].Unlock(ctx))
		}
		synctest.Wait()
		assert.Zero(t, ownKeys(ms), "the last release leaves no key")
		l, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, l.Holds())
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, c.Close(ctx))
		assert.Zero(t, ownKeys(ms))
	})
}

// A lease whose holds expired and were taken by another owner cannot
// release or extend the new owner's: Unlock and Extend say the lock was
// lost, and the new owner's lease is untouched.
func TestReentrantForeignReleaseRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		ctx := context.Background()
		ab := reentrants(t, c, time.Second, "job-7", "job-8")
		a, b := ab[0], ab[1]
		la, err := a.TryLock(ctx)
		require.NoError(t, err)
		time.Sleep(time.Second) // job-7 stalls past its TTL
		lb, err := b.TryLock(ctx)
		require.NoError(t, err)
		require.ErrorIs(t, la.Extend(ctx), redlock.ErrLockLost)
		require.ErrorIs(t, la.Unlock(ctx), redlock.ErrLockLost)
		assert.True(t, lb.Valid())
		require.NoError(t, lb.Extend(ctx), "job-8's hold is intact")
		requireRefused(t, a, "job-8 holds")
		require.NoError(t, lb.Unlock(ctx))
		require.NoError(t, c.Close(ctx))
		assert.Zero(t, ownKeys(ms))
	})
}

// Partial failures make the nodes' counts of one owner disagree (a paused
// node applies an acquire and a release late, another fails for a while):
// a second owner is refused throughout, and once every lease is unlocked
// and the client closed, no key is left.
func TestReentrantPartialFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		ctx := context.Background()
		ab := reentrants(t, c, 10*time.Second, "job-7", "job-8")
		a, b := ab[0], ab[1]
		refused := func(why string) { t.Helper(); requireRefused(t, b, why) }
		l1, err := a.TryLock(ctx)
		require.NoError(t, err)
		synctest.Wait()
		resume := ms[2].Pause()
		l2, err := a.TryLock(ctx) // on nodes 0 and 1; node 2 applies it late
		require.NoError(t, err)
		assert.Equal(t, 2, l2.Holds())
		require.NoError(t, l1.Unlock(ctx)) // node 2's release waits too
		refused("nodes 0 and 1 hold l2, node 2 is paused")
		resume()
		synctest.Wait()
		refused("counts 1, 1, and node 2 caught up")
		ms[0].Fail(errors.New("connection reset"))
		refused("node 0 fails, 1 and 2 hold l2")
		l3, err := a.TryLock(ctx) // nodes 1 and 2 only: counts 1, 2, 2
		require.NoError(t, err)
		refused("counts disagree")
		require.NoError(t, l2.Unlock(ctx)) // node 0's release is retried
		refused("l3 holds nodes 1 and 2")
		ms[0].Fail(nil)
		require.NoError(t, l3.Unlock(ctx))
		l, err := b.TryLock(ctx)
		require.NoError(t, err, "free once every hold of job-7 is released")
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, c.Close(ctx))
		assert.Zero(t, ownKeys(ms), "no key after the last release")
	})
}

// Readers share the lock, each with its own hold: one reader's release
// leaves the others'; a writer waits for the last reader, and excludes
// readers and other writers.
func TestRWMutexReadersAndWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		ctx := context.Background()
		rw, err := rwOf(c.NewRWMutex(lockName, redlock.WithTTL(time.Second)))
		require.NoError(t, err)
		r1, err := rw.r.TryLock(ctx)
		require.NoError(t, err)
		r2, err := rw.r.TryLock(ctx)
		require.NoError(t, err)
		assert.Equal(t, []int{1, 2}, []int{r1.Holds(), r2.Holds()})
		_, err = rw.w.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.NoError(t, r1.Unlock(ctx))
		assert.True(t, r2.Valid())
		require.NoError(t, r2.Extend(ctx), "r1's release left r2's hold")
		_, err = rw.w.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained, "r2 still reads")
		require.NoError(t, r2.Unlock(ctx))
		w, err := rw.w.TryLock(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, w.Holds())
		_, err = rw.r.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained, "no reader while writing")
		_, err = rw.w.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained, "one writer")
		require.NoError(t, w.Unlock(ctx))
		require.NoError(t, c.Close(ctx))
		assert.Zero(t, ownKeys(ms))
	})
}

// rwWorkload: six readers re-lock in a loop, reader i
// holding each read lease for hold*(6+i)/6 (their workload; the different
// lengths make the leases overlap), at most rounds times each; once they
// have re-locked three times each on average and two hold at once, one
// writer calls Lock with a context of wait.
// Shared counters check that no reader holds while the writer does (a
// counter window lies inside the lease's: from Lock's return to Unlock).
type rwWorkload struct {
	writer  rwLock
	readers []rwLock // one per reader goroutine (may repeat)
	hold    time.Duration
	wait    time.Duration
	rounds  int
}

type rwOutcome struct {
	err      error         // the writer's Lock
	waited   time.Duration // how long that Lock took
	most     int           // the most readers that held at once
	reads    int           // read leases obtained
	overlaps int           // times a reader and the writer held at once
}

func (w rwWorkload) run(t *testing.T) rwOutcome {
	t.Helper()
	var readers, writers, most, reads, overlaps atomic.Int64
	shared := make(chan struct{})
	var once sync.Once
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i, rw := range w.readers {
		hold := w.hold * time.Duration(6+i) / 6
		wg.Go(func() {
			for range w.rounds {
				l, err := rw.r.Lock(stop)
				if err != nil {
					if stop.Err() != nil {
						return
					}
					continue
				}
				got := reads.Add(1)
				n := readers.Add(1)
				if writers.Load() > 0 {
					overlaps.Add(1)
				}
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if n >= 2 && got >= int64(3*len(w.readers)) {
					once.Do(func() { close(shared) })
				}
				time.Sleep(hold) // the reader's workload
				readers.Add(-1)
				_ = l.Unlock(context.Background())
			}
		})
	}
	var out rwOutcome
	bound := time.NewTimer(w.wait)
	select {
	case <-shared:
		bound.Stop()
	case <-bound.C:
		cancel()
		wg.Wait()
		t.Fatalf("the readers did not get going within %v", w.wait)
	}
	ctx, cancelW := context.WithTimeout(context.Background(), w.wait)
	start := time.Now()
	lease, err := w.writer.w.Lock(ctx)
	out.waited = time.Since(start)
	cancelW()
	out.err = err
	if err == nil {
		writers.Add(1)
		if readers.Load() > 0 {
			overlaps.Add(1)
		}
		time.Sleep(w.hold) // the writer's workload
		writers.Add(-1)
		assert.NoError(t, lease.Unlock(context.Background()))
	}
	cancel()
	wg.Wait()
	out.most, out.reads, out.overlaps = int(most.Load()), int(reads.Load()), int(overlaps.Load())
	return out
}

// A stream of six overlapping readers starves a writer without preference;
// with WithWriterPreference the writer gets in once the readers' leases
// held at the time end, and never while a reader holds. The readers either
// share the writer's read-write lock or each use their own client and a read-write lock
// built without the option (other processes): preference is the writer's
// (issue 16 item 6: such readers never yielded, and the writer starved).
func TestRWMutexWriterPreference(t *testing.T) {
	for _, n := range []int{3, 5} {
		for _, readers := range []string{"same-rwmutex", "other-clients-without-option"} {
			for _, prefer := range []bool{false, true} {
				t.Run(fmt.Sprintf("N=%d/%s/prefer=%v", n, readers, prefer), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						ms, nodes := mem(n)
						c := newClient(t, nodes)
						opts := []redlock.LockOption{redlock.WithTTL(time.Second)}
						if prefer {
							opts = append(opts, redlock.WithWriterPreference())
						}
						rw, err := rwOf(c.NewRWMutex(lockName, opts...))
						require.NoError(t, err)
						w := rwWorkload{writer: rw, hold: 60 * time.Millisecond, wait: 30 * time.Second, rounds: 2000}
						clients := []*redlock.Client{c}
						for range 6 {
							r := rw
							if readers != "same-rwmutex" {
								rc := newClient(t, nodes)
								clients = append(clients, rc)
								r, err = rwOf(rc.NewRWMutex(lockName, redlock.WithTTL(time.Second)))
								require.NoError(t, err)
							}
							w.readers = append(w.readers, r)
						}
						out := w.run(t)
						t.Logf("writer waited %v (err %v); %d read leases, at most %d readers at once", out.waited, out.err, out.reads, out.most)
						assert.Zero(t, out.overlaps, "a reader held while the writer did")
						assert.GreaterOrEqual(t, out.most, 2, "readers shared the lock")
						if prefer {
							require.NoError(t, out.err, "the writer gets in")
						} else {
							require.ErrorIs(t, out.err, redlock.ErrNotObtained, "readers starve the writer")
							require.ErrorIs(t, out.err, context.DeadlineExceeded)
						}
						for _, c := range clients {
							require.NoError(t, c.Close(context.Background()))
						}
						for _, m := range ms {
							for k := range m.Keys() {
								assert.Contains(t, k, ":waiting", "only a waiting mark may outlive the holders (it expires)")
							}
						}
						time.Sleep(2 * time.Second)
						assert.Zero(t, ownKeys(ms))
					})
				})
			}
		}
	}
}

// A reader that waits for a new read lease while it keeps the one it has
// (hand over hand) is refused while a writer with preference waits, like
// recursive read locking in sync.RWMutex: the writer gets in once the kept
// lease's validity is over, not before.
func TestRWMutexHandOverHandReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		ctx := context.Background()
		rw, err := rwOf(c.NewRWMutex(lockName, redlock.WithTTL(time.Second), redlock.WithWriterPreference()))
		require.NoError(t, err)
		r1, err := rw.r.TryLock(ctx)
		require.NoError(t, err)
		var w *redlock.Lease
		var werr error
		var wg sync.WaitGroup
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			w, werr = rw.w.Lock(wctx)
		})
		synctest.Wait() // the writer's first attempt was refused and marked the nodes
		_, err = rw.r.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained, "a new read lease while the writer waits")
		wg.Wait()
		require.NoError(t, werr)
		assert.False(t, time.Now().Before(r1.Until()), "the writer got in only after the kept lease's validity")
		require.ErrorIs(t, r1.Unlock(ctx), redlock.ErrLockLost)
		require.NoError(t, w.Unlock(ctx))
		require.NoError(t, c.Close(ctx))
		time.Sleep(2 * time.Second)
		assert.Zero(t, ownKeys(ms))
	})
}

// A reader that never unlocks (its process died) keeps the writer out
// until its validity ended, not longer than its TTL, and its late Unlock
// says the lease was lost.
func TestRWMutexReaderExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		ctx := context.Background()
		rw, err := rwOf(c.NewRWMutex(lockName, redlock.WithTTL(time.Second), redlock.WithRetryBackoff(time.Millisecond, time.Millisecond)))
		require.NoError(t, err)
		start := time.Now()
		r, err := rw.r.TryLock(ctx)
		require.NoError(t, err)
		w, err := rw.w.Lock(ctx)
		require.NoError(t, err)
		assert.False(t, time.Now().Before(r.Until()), "the writer got in after the reader's validity")
		assert.LessOrEqual(t, time.Since(start), time.Second+2*time.Millisecond, "and once its holds expired")
		<-r.Done()
		require.ErrorIs(t, r.Err(), redlock.ErrLockLost)
		require.ErrorIs(t, r.Unlock(ctx), redlock.ErrLockLost, "the reader's holds expired")
		require.NoError(t, w.Unlock(ctx))
		require.NoError(t, c.Close(ctx))
		assert.Zero(t, ownKeys(ms))
	})
}

// A semaphore never has more than K valid holders, reaches K, and leaves no
// key.
func TestSemaphoreBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		sem, err := c.NewSemaphore(lockName, 2, redlock.WithTTL(time.Second))
		require.NoError(t, err)
		other, err := c.NewSemaphore(lockName, 3, redlock.WithTTL(time.Second))
		require.NoError(t, err)
		stop, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var rec spans
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				for stop.Err() == nil {
					l, err := sem.Lock(stop)
					if err == nil {
						assert.LessOrEqual(t, l.Holds(), 2)
						rec.hold(stop, false, l, time.Duration(10+7*i)*time.Millisecond)
					}
				}
			})
		}
		// A client with a different K: its holds exclude the others' (they
		// are recorded as writes, which must overlap nothing).
		wg.Go(func() {
			for stop.Err() == nil {
				if l, err := other.TryLock(stop); err == nil {
					rec.hold(stop, true, l, 5*time.Millisecond)
				}
				time.Sleep(3 * time.Millisecond)
			}
		})
		wg.Wait()
		most, _ := rec.check(t, 2)
		assert.Equal(t, 2, most)
		require.NoError(t, c.Close(context.Background()))
		assert.Zero(t, ownKeys(ms))
	})
}

// Shape leases renew like a mutex's: a read lease with WithAutoRenew stays
// valid over many TTLs, and Do runs a function under a semaphore place.
func TestShapeLeaseRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		ctx := context.Background()
		rw, err := rwOf(c.NewRWMutex(lockName, redlock.WithTTL(time.Second), redlock.WithAutoRenew(0)))
		require.NoError(t, err)
		r, err := rw.r.Lock(ctx)
		require.NoError(t, err)
		time.Sleep(5 * time.Second)
		assert.True(t, r.Valid())
		_, err = rw.w.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.NoError(t, r.Unlock(ctx))
		sem, err := c.NewSemaphore(lockName+":sem", 1, redlock.WithTTL(time.Second))
		require.NoError(t, err)
		ran := false
		require.NoError(t, sem.Do(ctx, func(ctx context.Context, _ *redlock.Lease) error {
			time.Sleep(3 * time.Second)
			ran = ctx.Err() == nil
			return nil
		}))
		assert.True(t, ran, "renewed while the function ran")
		require.NoError(t, c.Close(ctx))
		assert.Zero(t, ownKeys(ms))
	})
}

// Construction errors name the bad value.
func TestShapeConstructionErrors(t *testing.T) {
	_, nodes := mem(3)
	c := newClient(t, nodes)
	_, err := c.NewReentrant(lockName, "")
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.ErrorContains(t, err, "empty owner")
	_, err = c.NewSemaphore(lockName, 0)
	assert.ErrorContains(t, err, "k 0")
	_, _, err = c.NewRWMutex(lockName, redlock.WithFencing())
	assert.ErrorContains(t, err, "WithFencing")
	_, err = c.NewMutex(lockName, redlock.WithWriterPreference())
	assert.ErrorContains(t, err, "WithWriterPreference applies to NewRWMutex only")
	_, err = c.NewSemaphore(lockName, 2, redlock.WithWriterPreference())
	assert.ErrorContains(t, err, "WithWriterPreference")

	nodes[1] = plain{nodes[1]}
	c2 := newClient(t, nodes)
	_, _, err = c2.NewRWMutex(lockName)
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.ErrorContains(t, err, "node 1 (mem-1")
	assert.ErrorContains(t, err, "does not implement ShapeNode")
	_, err = c2.NewMutex(lockName)
	assert.NoError(t, err, "a mutex needs no capability")
}

// semaphoreCell is one cell of docs/shapes.md's semaphore quorum table.
type semaphoreCell struct {
	n, k   int
	quorum int
}

// semaphoreTable reads the semaphore quorum table from docs/shapes.md: the
// table whose header starts "| N | k = 1". A column "k >= N-1" gives
// cells for k = N-1 and for a large k (100).
func semaphoreTable(t *testing.T) []semaphoreCell {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "shapes.md"))
	require.NoError(t, err)
	cells := func(line string) []string {
		parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts
	}
	lines := strings.Split(string(raw), "\n")
	var out []semaphoreCell
	seen := map[[2]int]bool{}
	add := func(c semaphoreCell) {
		if !seen[[2]int{c.n, c.k}] {
			seen[[2]int{c.n, c.k}] = true
			out = append(out, c)
		}
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, "| N | k = 1") {
			continue
		}
		head := cells(line)
		for _, row := range lines[i+2:] {
			if !strings.HasPrefix(row, "|") {
				break
			}
			vals := cells(row)
			require.Len(t, vals, len(head), "row %q", row)
			n, err := strconv.Atoi(vals[0])
			require.NoError(t, err, "row %q", row)
			for j, h := range head[1:] {
				q, err := strconv.Atoi(vals[j+1])
				require.NoError(t, err, "cell %q of row %q", vals[j+1], row)
				if h == "k >= N-1" {
					add(semaphoreCell{n, n - 1, q})
					add(semaphoreCell{n, 100, q})
					continue
				}
				k, err := strconv.Atoi(strings.TrimPrefix(h, "k = "))
				require.NoError(t, err, "column %q", h)
				add(semaphoreCell{n, k, q})
			}
		}
		break
	}
	require.NotEmpty(t, out, "no semaphore quorum table in docs/shapes.md")
	return out
}

// Issue 16 item 7: every cell of docs/shapes.md's semaphore quorum table is
// the formula max(N/2+1, floor(N*k/(k+1))+1) and the quorum the code uses
// (read from the QuorumError of an attempt on failed nodes).
func TestSemaphoreQuorumTable(t *testing.T) {
	for _, cell := range semaphoreTable(t) {
		t.Run(fmt.Sprintf("N=%d/k=%d", cell.n, cell.k), func(t *testing.T) {
			assert.Equal(t, max(cell.n/2+1, cell.n*cell.k/(cell.k+1)+1), cell.quorum, "the formula")
			ms, nodes := mem(cell.n)
			c := newClient(t, nodes)
			sem, err := c.NewSemaphore(lockName, cell.k)
			require.NoError(t, err)
			for _, m := range ms {
				m.Fail(errors.New("down"))
			}
			_, err = sem.TryLock(context.Background())
			for _, m := range ms {
				m.Fail(nil)
			}
			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			assert.Equal(t, cell.quorum, qe.Quorum, "the code's quorum")
		})
	}
}
