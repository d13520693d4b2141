package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// BenchmarkLockUnlock measures one Lock+Unlock cycle over N real
// redis-server processes on loopback, from one goroutine. Besides ns/op it
// reports the p50 and p99 cycle latency. Compare N=1/3/5 within one run:
//
//	go test -run '^$' -bench LockUnlock -count 6 ./redlock/ | tee new.txt && benchstat new.txt
func BenchmarkLockUnlock(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			benchCycles(b, benchNodes(b, n))
		})
	}
	// The safety features' costs, N=1/3/5, interleaved with the plain runs
	// above by -count: fencing adds a write-back round, renewal a goroutine
	// and a timer per lease.
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d/fencing", n), func(b *testing.B) {
			benchCycles(b, benchNodes(b, n), redlock.WithFencing())
		})
		b.Run(fmt.Sprintf("N=%d/renewal", n), func(b *testing.B) {
			benchCycles(b, benchNodes(b, n), redlock.WithAutoRenew(0))
		})
	}
	// One of five masters answers 20 ms late (a delay in front of the real
	// call, like a slow link): the decision at quorum must not wait for it.
	b.Run("N=5/one-slow-20ms", func(b *testing.B) {
		nodes := benchNodes(b, 5)
		nodes[4] = slowNode{Node: nodes[4], delay: 20 * time.Millisecond}
		benchCycles(b, nodes)
	})
}

// slowNode delays every call by delay (or until ctx ends) before passing it on.
type slowNode struct {
	redlock.Node
	delay time.Duration
}

func (s slowNode) wait(ctx context.Context) error {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowNode) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if err := s.wait(ctx); err != nil {
		return false, err
	}
	return s.Node.Acquire(ctx, key, value, ttl)
}

func (s slowNode) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	if err := s.wait(ctx); err != nil {
		return false, err
	}
	return s.Node.Release(ctx, key, value, guard)
}

func benchNodes(b *testing.B, n int) []redlock.Node {
	var nodes []redlock.Node
	for i := 0; i < n; i++ {
		srv := redisproc.StartT(b, redisproc.Config{})
		nd, err := redisnode.Dial(srv.Addr())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = nd.Close() })
		nodes = append(nodes, nd)
	}
	return nodes
}

func benchCycles(b *testing.B, nodes []redlock.Node, opts ...redlock.LockOption) {
	c, err := redlock.New(nodes)
	if err != nil {
		b.Fatal(err)
	}
	m, err := c.NewMutex(fmt.Sprint("bench-", b.N), opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		lease, err := m.Lock(ctx) // retries if its own previous release is still in flight on a node
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
	b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
	if err := c.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLeaseValid measures the pre-write check while another goroutine
// keeps extending the lease against a master 20 ms away: Valid never waits
// for the network.
func BenchmarkLeaseValid(b *testing.B) {
	nodes := benchNodes(b, 3)
	nodes[2] = slowNode{Node: nodes[2], delay: 20 * time.Millisecond}
	c, err := redlock.New(nodes, redlock.WithQuorum(3))
	if err != nil {
		b.Fatal(err)
	}
	m, err := c.NewMutex("bench-valid")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	lease, err := m.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	extending := make(chan struct{})
	go func() {
		defer close(extending)
		for {
			select {
			case <-stop:
				return
			default:
				_ = lease.Extend(ctx)
			}
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !lease.Valid() {
			b.Fatal("lease not valid")
		}
	}
	b.StopTimer()
	close(stop)
	<-extending
	_ = lease.Unlock(ctx)
	if err := c.Close(ctx); err != nil {
		b.Fatal(err)
	}
}
