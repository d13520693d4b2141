package redisnode

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/internal/wire"
)

// A master that is demoted, resynced from its former replica and promoted
// again keeps its run_id, but its data is the replica's: older than the
// counter it had written back since. The stamp carries the replication ID
// too (a promotion makes a new one), so that counter reads as lost, not as
// the older value it came back as (10, after 11 had been written back).
func TestFencingCounterAfterAFailback(t *testing.T) {
	ctx := context.Background()
	fast := redisproc.Config{Args: []string{"--repl-diskless-sync-delay", "0"}} // a full sync at once, not 5s later
	a := redisproc.StartT(t, fast)
	b := redisproc.StartT(t, fast)
	ra := redis.NewClient(&redis.Options{Addr: a.Addr()})
	rb := redis.NewClient(&redis.Options{Addr: b.Addr()})
	t.Cleanup(func() { _ = ra.Close(); _ = rb.Close() })
	n := dialT(t, a.Addr())
	const key = "locks:failback"
	fk, err := fenceKey(key)
	require.NoError(t, err)

	ok, _, err := n.AcquireFenced(ctx, key, "v", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = n.RaiseFence(ctx, key, "v", 10)
	require.NoError(t, err)
	require.True(t, ok)
	replicate(t, rb, a.Addr(), ra, fk) // B copies A: counter 10
	require.NoError(t, rb.ReplicaOf(ctx, "NO", "ONE").Err())
	ok, err = n.RaiseFence(ctx, key, "v", 11) // on A only
	require.NoError(t, err)
	require.True(t, ok)
	replicate(t, ra, b.Addr(), rb, fk) // A resyncs from B: counter 10 again
	require.NoError(t, ra.ReplicaOf(ctx, "NO", "ONE").Err())
	s, err := ra.Get(ctx, fk).Result()
	require.NoError(t, err)
	v, _, err := wire.ParseFence(s)
	require.NoError(t, err)
	require.EqualValues(t, 10, v, "A holds the counter it resynced, older than the 11 it wrote back")

	_, fence, err := n.AcquireFenced(ctx, key, "v", time.Hour)
	require.NoError(t, err)
	require.Zero(t, fence, "a counter A wrote before its demotion reads as lost (the epoch rule covers it), not as 10")
}

// replicate makes replica copy the master at addr and waits until its copy
// of key matches the master's.
func replicate(t *testing.T, replica *redis.Client, addr string, master *redis.Client, key string) {
	t.Helper()
	ctx := context.Background()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	require.NoError(t, replica.ReplicaOf(ctx, host, port).Err())
	want, err := master.Get(ctx, key).Result()
	require.NoError(t, err)
	for i := 0; ; i++ {
		info, _ := replica.Info(ctx, "replication").Result()
		got, _ := replica.Get(ctx, key).Result()
		if strings.Contains(info, "master_link_status:up") && got == want {
			return
		}
		if i == 1000 {
			t.Fatalf("replica of %s: %q after 10s, want %q (%s)", addr, got, want, fmt.Sprint(info))
		}
		time.Sleep(10 * time.Millisecond) // polling the replication's progress
	}
}
