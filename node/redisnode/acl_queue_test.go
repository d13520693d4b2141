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

// aclQueue extends the minimal ACL of docs/nodes.md (aclLocker) for the fair
// queue (the sorted-set commands and TIME of acquire_queued.lua and
// leave_queue.lua) and for release notifications (the scripts' PUBLISH;
// Watch's SUBSCRIBE, UNSUBSCRIBE and health-check PING; the lock names'
// release channels). Without +publish the releases still succeed, silently.
const aclQueue = aclLocker + " +time +zadd +zcard +zrange +zrangebyscore +zrem +zremrangebyscore +hset +hget +hdel +publish +subscribe +unsubscribe +ping &locks:* &{locks:*"

func TestACLForQueueAndWatch(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	ctx := context.Background()
	setup := adminT(t, &redis.Options{Addr: srv.Addr()})
	require.NoError(t, setup.Do(ctx, append([]any{"ACL", "SETUSER", "queuer"}, fields(aclQueue)...)...).Err())
	n := dialT(t, "redis://queuer:pw@"+srv.Addr())

	for _, key := range []string{"locks:q", "locks:{t}:q"} {
		got, _ := watchT(t, n, key)
		a := redlock.Waiter{ID: "a", Arrival: time.Now(), TTL: time.Minute, Fair: true}
		b := redlock.Waiter{ID: "b", Arrival: a.Arrival.Add(time.Millisecond), TTL: time.Minute, Fair: true}
		ok, err := n.Acquire(ctx, key, "holder", time.Minute)
		require.NoError(t, err, key)
		require.True(t, ok, key)
		for _, w := range []redlock.Waiter{a, b} {
			ok, _, err = n.AcquireQueued(ctx, key, "v"+w.ID, time.Minute, w)
			require.NoError(t, err, key)
			require.False(t, ok, key)
		}
		ok, err = n.Release(ctx, key, "holder", 0)
		require.NoError(t, err, key)
		require.True(t, ok, key)
		assert.Equal(t, "a", nextT(t, got), key)
		a.TTL, b.TTL = 100*time.Millisecond, 100*time.Millisecond // short tombstones
		require.NoError(t, n.LeaveQueue(ctx, key, a), key)
		assert.Equal(t, "b", nextT(t, got), key)
		ok, _, err = n.AcquireQueued(ctx, key, "vb", time.Minute, b)
		require.NoError(t, err, key)
		assert.True(t, ok, key)
		waitingT(t, n, key) // a plain waiter joins the empty line
		ok, err = n.Release(ctx, key, "vb", 0)
		require.NoError(t, err, key)
		require.True(t, ok, key)
		assert.Equal(t, "waiter", nextT(t, got), key)
		late := redlock.Waiter{ID: "late", Arrival: time.Now(), TTL: 100 * time.Millisecond}
		ok, _, err = n.AcquireQueued(ctx, key, "vl", time.Minute, late)
		require.NoError(t, err, key)
		assert.False(t, ok, "%s: a newcomer joins the line while waiter waits, though the key is free (ZCARD)", key)
		require.NoError(t, n.LeaveQueue(ctx, key, late), key)
		assert.Equal(t, "waiter", nextT(t, got), "%s: late, first, left a free key", key)
		require.NoError(t, n.LeaveQueue(ctx, key, redlock.Waiter{ID: "waiter", TTL: 100 * time.Millisecond}), key)
		assert.Equal(t, "", nextT(t, got), "%s: the last waiter left a free key", key)
	}
	// No orphan keys: the tombstones expire (polled, bounded).
	var keys []string
	for i := 0; i < 3000; i++ {
		keys = setup.Keys(ctx, "*").Val()
		if len(keys) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	assert.Empty(t, keys, "no orphan keys")
}
