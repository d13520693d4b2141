package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/quorumlock/quorumlock/redlock"
)

// countingObserver is an Observer that counts two kinds of events.
type countingObserver struct {
	redlock.NopObserver
	n atomic.Int64
}

func (c *countingObserver) NodeCall(context.Context, redlock.NodeEvent) { c.n.Add(1) }
func (c *countingObserver) OpDone(context.Context, redlock.OpEvent)     { c.n.Add(1) }

// BenchmarkObserver measures what an Observer costs a Lock+Unlock cycle on
// three in-memory masters (no network, so the coordinator's own work shows):
// none (the default: no event is built), a NopObserver (every event built
// and passed), and one that counts two kinds of events.
//
//	go test -run '^$' -bench Observer -benchmem -count 6 ./redlock/
func BenchmarkObserver(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []redlock.ClientOption
	}{
		{"none", nil},
		{"nop", []redlock.ClientOption{redlock.WithObserver(redlock.NopObserver{})}},
		{"counting", []redlock.ClientOption{redlock.WithObserver(&countingObserver{})}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			_, nodes := mem(3)
			c, err := redlock.New(nodes, tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			m, err := c.NewMutex(lockName)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				lease, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := c.Close(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}
