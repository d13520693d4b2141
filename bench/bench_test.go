package bench_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/bench"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// BenchmarkLockUnlock measures one lock+unlock cycle of every contender
// with N = 1, 3 and 5 redis-server processes on loopback, from one
// goroutine, with the same client settings as bench.Run. Besides ns/op and
// allocations it reports the p50 and p99 cycle latency. -count interleaves
// the contenders run by run:
//
//	go test -run '^$' -bench . -count 6 | tee new.txt && benchstat new.txt
func BenchmarkLockUnlock(b *testing.B) {
	addrs := servers(b, 5)
	for _, n := range []int{1, 3, 5} {
		for _, c := range bench.Contenders() {
			if c.OneNode && n != 1 {
				continue
			}
			b.Run(fmt.Sprintf("contender=%s/n=%d", c.Name, n), func(b *testing.B) {
				b.ReportAllocs()
				lat := cycles(b, c, addrs[:n], b.N, b.ResetTimer)
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
			})
		}
	}
}

// TestEveryBenchmarkOnce runs every case of BenchmarkLockUnlock for one
// cycle, so that go test ./... catches a broken benchmark.
func TestEveryBenchmarkOnce(t *testing.T) {
	addrs := servers(t, 5)
	for _, n := range []int{1, 3, 5} {
		for _, c := range bench.Contenders() {
			if c.OneNode && n != 1 {
				continue
			}
			t.Run(fmt.Sprintf("contender=%s/n=%d", c.Name, n), func(t *testing.T) {
				if lat := cycles(t, c, addrs[:n], 1, func() {}); len(lat) != 1 {
					t.Fatalf("%d cycles measured, want 1", len(lat))
				}
			})
		}
	}
}

func servers(tb testing.TB, n int) []string {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = redisproc.StartT(tb, redisproc.Config{}).Addr()
	}
	return addrs
}

var lockSeq atomic.Int64

// cycles opens c over addrs with a lock of its own, runs one warm-up cycle,
// calls start, runs iters measured cycles and closes the locker; it returns
// the cycles' latencies.
func cycles(tb testing.TB, c bench.Contender, addrs []string, iters int, start func()) []time.Duration {
	tb.Helper()
	key := fmt.Sprintf("qlbench:go-test:%s:n%d:%d", c.Name, len(addrs), lockSeq.Add(1))
	l, err := c.Open(bench.Target{Addrs: addrs, Key: key, TTL: 8 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			tb.Error(err)
		}
	}()
	ctx := context.Background()
	if err := l.Cycle(ctx); err != nil {
		tb.Fatal(err)
	}
	lat := make([]time.Duration, 0, iters)
	start()
	for range iters {
		t0 := time.Now()
		if err := l.Cycle(ctx); err != nil {
			tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}
