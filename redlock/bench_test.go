package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node"
	"github.com/quorumlock/quorumlock/redlock"
)

// BenchmarkLockUnlock measures one TryLock+Unlock cycle over N real
// redis-server processes on loopback, from one goroutine. Besides ns/op it
// reports the p50 and p99 cycle latency. Compare N=1/3/5 within one run:
//
//	go test -run '^$' -bench LockUnlock -count 6 ./redlock/ | tee new.txt && benchstat new.txt
func BenchmarkLockUnlock(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var nodes []node.Node
			for i := 0; i < n; i++ {
				srv := redisproc.StartT(b, redisproc.Config{})
				nd, err := node.Dial(srv.Addr())
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = nd.Close() })
				nodes = append(nodes, nd)
			}
			c, err := redlock.New(nodes)
			if err != nil {
				b.Fatal(err)
			}
			m, err := c.NewMutex("bench")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				lease, err := m.TryLock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
			if err := c.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
