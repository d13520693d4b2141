package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quorumlock/quorumlock/redlock"
)

// BenchmarkShapes measures the lock shapes over 3 real redis-server
// processes, next to the mutex in the same run (compare ratios):
//
//	go test -run '^$' -bench Shapes -count 6 ./redlock/ | tee shapes.txt && benchstat shapes.txt
//
// mutex, read, write and reentrant are one goroutine's Lock+Unlock cycles
// (uncontended; reentrant takes the lock twice, nested, per op);
// 8readers+1writer runs 8 reading goroutines and one writer (with and
// without writer preference) until b.N cycles are done in all, and reports each kind's
// cycles per second; semaphore-K=4/8clients runs 8 clients cycling on a
// K=4 semaphore (quorum 3 of 3).
func BenchmarkShapes(b *testing.B) {
	ctx := context.Background()
	b.Run("N=3/mutex", func(b *testing.B) {
		c, name := benchClient(b, 1)
		m, err := c[0].NewMutex(name)
		check(b, err)
		cycles(b, m.Lock)
	})
	b.Run("N=3/read", func(b *testing.B) {
		c, name := benchClient(b, 1)
		rw, err := rwOf(c[0].NewRWMutex(name))
		check(b, err)
		cycles(b, rw.r.Lock)
	})
	b.Run("N=3/write", func(b *testing.B) {
		c, name := benchClient(b, 1)
		rw, err := rwOf(c[0].NewRWMutex(name))
		check(b, err)
		cycles(b, rw.w.Lock)
	})
	b.Run("N=3/reentrant-depth-2", func(b *testing.B) {
		c, name := benchClient(b, 1)
		m, err := c[0].NewReentrant(name, "job")
		check(b, err)
		cycles(b, func(ctx context.Context) (*redlock.Lease, error) {
			outer, err := m.Lock(ctx)
			if err != nil {
				return nil, err
			}
			inner, err := m.Lock(ctx)
			if err != nil {
				return nil, err
			}
			check(b, inner.Unlock(ctx))
			return outer, nil
		})
	})
	for _, prefer := range []bool{true, false} {
		b.Run(fmt.Sprintf("N=3/8readers+1writer/prefer=%v", prefer), func(b *testing.B) {
			c, name := benchClient(b, 1)
			opts := []redlock.LockOption{}
			if prefer {
				opts = append(opts, redlock.WithWriterPreference())
			}
			rw, err := rwOf(c[0].NewRWMutex(name, opts...))
			check(b, err)
			var reads, writes atomic.Int64
			lock := func(i int) (func(context.Context) (*redlock.Lease, error), *atomic.Int64) {
				if i == 8 {
					return rw.w.Lock, &writes
				}
				return rw.r.Lock, &reads
			}
			parallel(b, 9, func(i int) error {
				f, n := lock(i)
				n.Add(1)
				return cycle(ctx, f)
			})
			b.ReportMetric(float64(reads.Load())/b.Elapsed().Seconds(), "reads/s")
			b.ReportMetric(float64(writes.Load())/b.Elapsed().Seconds(), "writes/s")
		})
	}
	b.Run("N=3/semaphore-K=4/8clients", func(b *testing.B) {
		cs, name := benchClient(b, 8)
		sems := make([]*redlock.Mutex, len(cs))
		for i, c := range cs {
			var err error
			sems[i], err = c.NewSemaphore(name, 4)
			check(b, err)
		}
		parallel(b, 8, func(i int) error { return cycle(ctx, sems[i].Lock) })
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acquisitions/s")
	})
}

func check(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// benchClient returns n clients over the same 3 fresh masters (closed at
// cleanup) and a lock name unique to the run.
func benchClient(b *testing.B, n int) ([]*redlock.Client, string) {
	nodes := benchNodes(b, 3)
	var cs []*redlock.Client
	for range n {
		c, err := redlock.New(nodes)
		check(b, err)
		b.Cleanup(func() { _ = c.Close(context.Background()) })
		cs = append(cs, c)
	}
	return cs, fmt.Sprint("bench-", b.N)
}

// cycles runs b.N lock (retrying) + Unlock cycles from one goroutine.
func cycles(b *testing.B, lock func(context.Context) (*redlock.Lease, error)) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := lock(ctx)
		check(b, err)
		check(b, l.Unlock(ctx))
	}
}

// cycle takes a lease with lock and unlocks it.
func cycle(ctx context.Context, lock func(context.Context) (*redlock.Lease, error)) error {
	l, err := lock(ctx)
	if err != nil {
		return err
	}
	return l.Unlock(ctx)
}

// parallel runs op on workers goroutines (op gets the worker's index) until
// b.N ops are done in all. An Unlock that could not confirm its release in
// the release timeout (ErrNotReleased: retried in the background; a loaded
// 2-core machine with 8 clients sees a few) is counted, not fatal.
func parallel(b *testing.B, workers int, op func(i int) error) {
	var next, unconfirmed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				switch err := op(i); {
				case errors.Is(err, redlock.ErrNotReleased):
					unconfirmed.Add(1)
				case err != nil:
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(unconfirmed.Load()), "unconfirmed-releases")
}
