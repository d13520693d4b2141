package redlock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// BenchmarkDoCancelLateness measures how late Do's function sees its context
// cancelled, compared with the moment the cancel was due (the validity
// deadline minus the cancel margin), when renewals stop succeeding (a
// majority of in-memory masters paused): on an idle process and on one
// starved of CPU (GOMAXPROCS=1 and 8 goroutines spinning), where timers fire
// late. The margin must exceed the lateness (docs/algorithm.md). Metrics:
// p50, p99 and max lateness in microseconds. Run with -benchtime=50x.
func BenchmarkDoCancelLateness(b *testing.B) {
	for _, starved := range []bool{false, true} {
		b.Run(map[bool]string{false: "idle", true: "starved"}[starved], func(b *testing.B) {
			ms, nodes := mem(3)
			c, err := redlock.New(nodes, redlock.WithNodeTimeout(10*time.Millisecond), redlock.WithReleaseTimeout(10*time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			m, err := c.NewMutex("bench-do-cancel", redlock.WithTTL(100*time.Millisecond))
			if err != nil {
				b.Fatal(err)
			}
			if starved {
				defer starveCPU(b)()
			}
			late := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				_ = m.Do(context.Background(), func(ctx context.Context, lease *redlock.Lease) error {
					r0, r1 := ms[0].Pause(), ms[1].Pause()
					defer r0()
					defer r1()
					<-ctx.Done()
					late = append(late, time.Since(lease.Until().Add(-10*time.Millisecond)))
					return nil
				})
			}
			b.StopTimer()
			slices.Sort(late)
			q := func(p float64) float64 { return float64(late[int(p*float64(len(late)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "p50-late-µs")
			b.ReportMetric(q(0.99), "p99-late-µs")
			b.ReportMetric(q(1), "max-late-µs")
		})
	}
}
