package redisnode

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// aclQueue extends the minimal ACL of docs/nodes.md (aclLocker) for the fair
// queue (the sorted-set commands, TIME, and the hash commands of the
// waiters' values, of acquire_queued.lua, leave_queue.lua and release.lua's
// hand-over) and for release notifications (the scripts' PUBLISH;
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
		assert.Equal(t, "a\nva", nextT(t, got), key)
		a.TTL, b.TTL = 100*time.Millisecond, 100*time.Millisecond // short tombstones
		require.NoError(t, n.LeaveQueue(ctx, key, a), key)
		assert.Equal(t, "b\nvb", nextT(t, got), "%s: a released the key handed to it, handed on to b", key)
		ok, _, err = n.AcquireQueued(ctx, key, "vb2", time.Minute, b)
		require.NoError(t, err, key)
		assert.True(t, ok, "%s: b takes the key handed to it over", key)
		waitingT(t, n, key) // a plain waiter joins the empty line
		ok, err = n.Release(ctx, key, "vb2", 0)
		require.NoError(t, err, key)
		require.True(t, ok, key)
		assert.Equal(t, "waiter\nwaiter", nextT(t, got), key)
		ok, err = n.Release(ctx, key, "waiter", 0)
		require.NoError(t, err, key)
		require.True(t, ok, "%s: the release handed the key to the waiter at its value", key)
		// The release of the handed value (the waiter's call held with it)
		// took the waiter out of the line; nobody is left: nothing is
		// published. A new waiter keeps its place when the key handed to it
		// expires.
		w2 := redlock.Waiter{ID: "waiter2", Arrival: time.Now().Add(time.Hour), TTL: time.Minute}
		ok, err = n.Acquire(ctx, key, "holder", time.Minute)
		require.NoError(t, err, key)
		require.True(t, ok, key)
		ok, _, err = n.AcquireQueued(ctx, key, "v2", time.Minute, w2)
		require.NoError(t, err, key)
		require.False(t, ok, key)
		ok, err = n.Release(ctx, key, "holder", 0)
		require.NoError(t, err, key)
		require.True(t, ok, key)
		assert.Equal(t, "waiter2\nv2", nextT(t, got), "%s: the waiter is gone: waiter2 is handed the key", key)
		expireT(t, n, key, "v2")
		late := redlock.Waiter{ID: "late", Arrival: time.Now(), TTL: 100 * time.Millisecond}
		ok, _, err = n.AcquireQueued(ctx, key, "vl", time.Minute, late)
		require.NoError(t, err, key)
		assert.False(t, ok, "%s: a newcomer joins the line while waiter2 waits, though the key is free (ZCARD)", key)
		require.NoError(t, n.LeaveQueue(ctx, key, late), key)
		assert.Equal(t, "waiter2", nextT(t, got), "%s: late, first, left a free key: waiter2 is named, handed nothing (its record went with the hand-over)", key)
		require.NoError(t, n.LeaveQueue(ctx, key, redlock.Waiter{ID: "waiter2", TTL: 100 * time.Millisecond}), key)
		assert.Equal(t, "", nextT(t, got), "%s: the last waiter left a free key", key)
	}
	// No orphan keys: the tombstones expire (polled, bounded); the grant
	// record of the key handed to the waiter, released since, lives as long
	// as that key would have (a minute), then expires.
	grants := map[string]bool{wire.GrantKey("locks:q"): true, wire.GrantKey("locks:{t}:q"): true}
	var keys []string
	for i := 0; i < 3000; i++ {
		keys = slices.DeleteFunc(setup.Keys(ctx, "*").Val(), func(k string) bool {
			if !grants[k] {
				return false
			}
			pttl := setup.PTTL(ctx, k).Val()
			return pttl > 0 && pttl <= time.Minute
		})
		if len(keys) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	assert.Empty(t, keys, "no orphan keys")
}
