package redisnode

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// The minimal ACL of docs/nodes.md is enough for fencing with a retention
// (raise_fence.lua uses GET and SET only) and for Peek (two GETs): the
// calls of elections and of the fence counter cleanup.
func TestMinimalACLCoversFencingAndPeek(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	ctx := context.Background()
	setup := adminT(t, &redis.Options{Addr: srv.Addr()})
	require.NoError(t, setup.Do(ctx, append([]any{"ACL", "SETUSER", "locker"}, fields(aclLocker)...)...).Err())
	n := dialT(t, "redis://locker:pw@"+srv.Addr())

	ok, fence, err := n.AcquireFenced(ctx, "locks:e", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Zero(t, fence)
	for _, keep := range []time.Duration{time.Hour, 0} {
		ok, err = n.RaiseFenceKeep(ctx, "locks:e", "v", 7, keep)
		require.NoError(t, err, "keep %v", keep)
		assert.True(t, ok)
	}
	ok, err = n.RaiseFence(ctx, "locks:e", "v", 8)
	require.NoError(t, err)
	assert.True(t, ok)
	value, fence, err := n.Peek(ctx, "locks:e")
	require.NoError(t, err)
	assert.Equal(t, "v", value)
	assert.Equal(t, int64(8), fence)
	ttl, err := setup.PTTL(ctx, "{locks:e}:fence").Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), ttl, "keep 0 (and RaiseFence) keep the counter for ever")
}
