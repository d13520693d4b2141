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
// with N = 1, 3, 5 and 7 redis-server processes on loopback, from one
// goroutine, with the same client settings as bench.Run. Besides ns/op and
// allocations it reports the p50 and p99 cycle latency, for benchstat:
//
//	go test -run '^$' -bench . -benchmem -count 6 | tee new.txt && benchstat new.txt
//
// -count runs each sub-benchmark count times back to back; it does not
// interleave them, so a burst of load elsewhere on the machine slows one
// contender and not the next. Compare contenders with quorumlock-bench
// (bench.Run), which interleaves them round by round; use this benchmark
// for one contender's before and after, and for CPU and memory profiles:
//
//	go test -run '^$' -bench 'LockUnlock/contender=quorumlock/n=5$' -cpuprofile cpu.out -memprofile mem.out
func BenchmarkLockUnlock(b *testing.B) {
	addrs := servers(b, 7)
	for _, n := range []int{1, 3, 5, 7} {
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
	addrs := servers(t, 7)
	for _, n := range []int{1, 3, 5, 7} {
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

func servers(tb testing.TB, n int) []bench.Master {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = redisproc.StartT(tb, redisproc.Config{}).Addr()
	}
	ms, err := bench.ParseMasters(addrs)
	if err != nil {
		tb.Fatal(err)
	}
	return ms
}

var lockSeq atomic.Int64

// cycles opens c over ms with a lock of its own, runs one warm-up cycle,
// calls start, runs iters measured cycles and closes the locker; it returns
// the cycles' latencies.
func cycles(tb testing.TB, c bench.Contender, ms []bench.Master, iters int, start func()) []time.Duration {
	tb.Helper()
	key := fmt.Sprintf("qlbench:go-test:%s:n%d:%d", c.Name, len(ms), lockSeq.Add(1))
	l, err := c.Open(bench.Target{Masters: ms, Key: key, TTL: 8 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			tb.Error(err)
		}
	}()
	ctx := context.Background()
	if err := bench.Cycle(ctx, l); err != nil {
		tb.Fatal(err)
	}
	lat := make([]time.Duration, 0, iters)
	start()
	for range iters {
		t0 := time.Now()
		if err := bench.Cycle(ctx, l); err != nil {
			tb.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	return lat
}
