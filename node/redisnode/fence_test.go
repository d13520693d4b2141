package redisnode

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/redlock"
)

var _ redlock.FencingNode = (*Node)(nil)

// The fencing scripts on a real server: the counter is read atomically with
// the acquire, raised only while our key holds, never lowered, and kept
// without a TTL; on a Redis Cluster too (the counter shares the slot).
func TestFencingScriptsOnRealServers(t *testing.T) {
	ctx := context.Background()
	srv := redisproc.StartT(t, redisproc.Config{})
	cl := redisproc.StartClusterT(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	clusterNode, err := New(cc)
	require.NoError(t, err)
	for _, n := range []*Node{dialT(t, srv.Addr()), clusterNode} {
		t.Run(n.Addr(), func(t *testing.T) {
			for _, key := range []string{"fence:plain", "{tenant}:fence"} {
				ok, fence, err := n.AcquireFenced(ctx, key, "a", time.Minute)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Zero(t, fence)
				ok, err = n.RaiseFence(ctx, key, "a", 7)
				require.NoError(t, err)
				require.True(t, ok)
				ok, err = n.RaiseFence(ctx, key, "a", 3) // never lowered
				require.NoError(t, err)
				require.True(t, ok)
				ok, err = n.RaiseFence(ctx, key, "other", 100) // not our key: unchanged
				require.NoError(t, err)
				require.False(t, ok)
				ok, fence, err = n.AcquireFenced(ctx, key, "b", time.Minute)
				require.NoError(t, err)
				assert.False(t, ok, "held by a")
				assert.Equal(t, int64(7), fence)
				released, err := n.Release(ctx, key, "a", 0)
				require.NoError(t, err)
				require.True(t, released)
				ok, fence, err = n.AcquireFenced(ctx, key, "b", time.Minute)
				require.NoError(t, err)
				assert.True(t, ok)
				assert.Equal(t, int64(7), fence, "the counter outlives the lock key")
				_, err = n.Release(ctx, key, "b", 0)
				require.NoError(t, err)
			}
		})
	}
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer raw.Close()
	ttl, err := raw.PTTL(ctx, "{fence:plain}:fence").Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "the counter has no TTL")
}
