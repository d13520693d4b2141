//go:build unix

package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// BenchmarkContention measures the contended path: 8 clients, each with
// its own connections (as 8 processes would have), cycle on one lock with
// no hold (Lock, Unlock, Lock again) over N=5 real redis-server processes,
// as bench/cmd/contention does. One op is one acquisition (and its
// release), whichever client made it, so allocs/op is the clients'
// allocations per acquisition and a CPU profile shows the clients' share
// (the servers are other processes), as does cpu-µs/op (the process's
// user and system CPU time per acquisition):
//
//	go test -run '^$' -bench Contention -benchtime 2000x -count 6 ./redlock/ | tee new.txt && benchstat new.txt
//	go test -run '^$' -bench 'Contention/plain' -benchtime 3000x -cpuprofile cpu.out ./redlock/
func BenchmarkContention(b *testing.B) {
	const clients = 8
	b.Run("plain", func(b *testing.B) { contend(b, 5, clients) })
	b.Run("fair", func(b *testing.B) { contend(b, 5, clients, redlock.WithFairQueue()) })
	// One client: the uncontended fair lock against the plain one.
	b.Run("alone/plain", func(b *testing.B) { contend(b, 5, 1) })
	b.Run("alone/fair", func(b *testing.B) { contend(b, 5, 1, redlock.WithFairQueue()) })
}

func contend(b *testing.B, n, clients int, opts ...redlock.LockOption) {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = redisproc.StartT(b, redisproc.Config{}).Addr()
	}
	ctx := context.Background()
	name := fmt.Sprint("contend-", b.N)
	ms := make([]*redlock.Mutex, clients)
	for k := range ms {
		nodes := make([]redlock.Node, n)
		for i, a := range addrs {
			nd, err := redisnode.Dial(a)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = nd.Close() })
			nodes[i] = nd
		}
		c, err := redlock.New(nodes)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(ctx) })
		if ms[k], err = c.NewMutex(name, append([]redlock.LockOption{redlock.WithTTL(8 * time.Second)}, opts...)...); err != nil {
			b.Fatal(err)
		}
		// Dial, load the scripts.
		lease, err := ms[k].Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for _, m := range ms {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				lease, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if err := lease.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/1e3/float64(b.N), "cpu-µs/op")
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
