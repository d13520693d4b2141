package redisnode

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/redlock"
)

// Watch and the fair queue on a Redis Cluster: one PubSub connection (to
// one node) hears the releases of keys on every master, since PUBLISH is
// broadcast over the cluster; the queue's keys share the lock's slot.
func TestClusterWatchAndQueue(t *testing.T) {
	cl := redisproc.StartClusterT(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer cc.Close()
	n, err := New(cc)
	require.NoError(t, err)
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Names on the three masters.
	masters := map[string]string{}
	for i := 0; len(masters) < 3 && i < 1000; i++ {
		name := fmt.Sprintf("locks:%d", i)
		m, err := cc.MasterForKey(ctx, name)
		require.NoError(t, err)
		if _, seen := masters[m.Options().Addr]; !seen {
			masters[m.Options().Addr] = name
		}
	}
	require.Len(t, masters, 3)

	t0 := time.Now()
	for _, name := range masters {
		got, _ := watchT(t, n, name)
		a := redlock.Waiter{ID: "a", Arrival: t0, TTL: time.Minute, Fair: true}
		b := redlock.Waiter{ID: "b", Arrival: t0.Add(time.Millisecond), TTL: time.Minute, Fair: true}
		ok, err := n.Acquire(ctx, name, "holder", time.Minute)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		for _, w := range []redlock.Waiter{a, b} {
			ok, _, err = n.AcquireQueued(ctx, name, "v"+w.ID, time.Minute, w)
			require.NoError(t, err, name)
			require.False(t, ok, name)
		}
		ok, err = n.Release(ctx, name, "holder", 0)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		assert.Equal(t, "a\nva", nextT(t, got), name)
		ok, _, err = n.AcquireQueued(ctx, name, "vb", time.Minute, b)
		require.NoError(t, err, name)
		assert.False(t, ok, "%s: a is first", name)
		require.NoError(t, n.LeaveQueue(ctx, name, a))
		assert.Equal(t, "b\nvb", nextT(t, got), name)
		ok, fence, err := n.AcquireQueued(ctx, name, "vb", time.Minute, b)
		require.NoError(t, err, name)
		assert.True(t, ok, name)
		assert.Zero(t, fence, name)
		waitingT(t, n, name)
		ok, err = n.Release(ctx, name, "vb", 0)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		assert.Equal(t, "waiter\nwaiter", nextT(t, got), name)
	}
}

// Watch on a Sentinel-managed master.
func TestSentinelWatch(t *testing.T) {
	st := redisproc.StartSentinelT(t)
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: st.MasterName, SentinelAddrs: st.SentinelAddrs(),
		ContextTimeoutEnabled: true, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer fc.Close()
	n, err := New(fc)
	require.NoError(t, err)
	defer n.Close()
	ctx := context.Background()
	got, _ := watchT(t, n, "locks:sw")
	w := redlock.Waiter{ID: "w", Arrival: time.Now(), TTL: time.Minute, Fair: true}
	ok, err := n.Acquire(ctx, "locks:sw", "holder", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	ok, _, err = n.AcquireQueued(ctx, "locks:sw", "vw", time.Minute, w)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = n.Release(ctx, "locks:sw", "holder", 0)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "w\nvw", nextT(t, got))
}
