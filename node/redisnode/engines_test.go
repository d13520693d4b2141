package redisnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisinfo"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/redlock"
)

func TestCluster(t *testing.T) {
	c := redisproc.StartClusterT(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true, Protocol: 2, DisableIdentity: true})
	defer cc.Close()
	n, err := New(cc)
	require.NoError(t, err)
	assert.Equal(t, "cluster("+strings.Join(c.Addrs(), ",")+")", n.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var names []string
	for i := 0; i < 200; i++ {
		name := fmt.Sprintf("locks:%d", i)
		if i%4 == 0 {
			name = fmt.Sprintf("locks:{tag%d}:x", i) // a hash-tagged name
		}
		names = append(names, name)
	}
	for _, name := range names {
		ok, err := n.Release(ctx, name, "late", time.Minute) // leaves a guard
		require.NoError(t, err, name)
		require.False(t, ok)
		ok, err = n.Acquire(ctx, name, "late", time.Minute)
		require.NoError(t, err, name)
		require.False(t, ok, "%s: the late acquire is refused by the guard", name)
		ok, err = n.Acquire(ctx, name, "v", time.Minute)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		ok, err = n.Extend(ctx, name, "v", time.Minute)
		require.NoError(t, err, name)
		require.True(t, ok, name)
	}

	// Every lock key and its guard share one slot, and the names spread over
	// all three masters.
	admin := adminT(t, &redis.Options{Addr: c.Addrs()[0]})
	for _, name := range names {
		g, err := guardKey(name, "late")
		require.NoError(t, err)
		ks, err := admin.ClusterKeySlot(ctx, name).Result()
		require.NoError(t, err)
		gs, err := admin.ClusterKeySlot(ctx, g).Result()
		require.NoError(t, err)
		require.Equal(t, ks, gs, "%s and %s", name, g)
	}
	total := 0
	for _, a := range c.Addrs() {
		m := adminT(t, &redis.Options{Addr: a})
		keys, err := m.Keys(ctx, "locks:*").Result() // lock keys (guards start with '{' unless tagged)
		require.NoError(t, err)
		locks := slices.DeleteFunc(keys, func(k string) bool { return strings.Contains(k, ":release-guard:") })
		t.Logf("%s holds %d lock keys", a, len(locks))
		assert.Greater(t, len(locks), 20, "%s holds too few of the 200 names", a)
		total += len(locks)
	}
	assert.Equal(t, len(names), total)

	for _, name := range names {
		ok, err := n.Release(ctx, name, "v", time.Minute)
		require.NoError(t, err, name)
		require.True(t, ok, name)
	}

	si, err := n.Info(ctx)
	require.NoError(t, err)
	ids := strings.Split(si.RunID, ",")
	require.Len(t, ids, 3)
	assert.True(t, slices.IsSorted(ids))
	for _, id := range ids {
		assert.Len(t, id, 40)
	}
}

func TestSentinel(t *testing.T) {
	st := redisproc.StartSentinelT(t)
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: st.MasterName, SentinelAddrs: st.SentinelAddrs(),
		ContextTimeoutEnabled: true, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	defer fc.Close()
	n, err := New(fc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	masterID := func(addr string) string {
		info, err := adminT(t, &redis.Options{Addr: addr}).Info(ctx, "server").Result()
		require.NoError(t, err)
		si, err := redisinfo.Parse(addr, info)
		require.NoError(t, err)
		return si.RunID
	}
	si, err := n.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, masterID(st.Master.Addr()), si.RunID)

	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("locks:%d", i)
		ok, err := n.Acquire(ctx, name, "v", time.Minute)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		ok, err = n.Extend(ctx, name, "v", time.Minute)
		require.NoError(t, err, name)
		require.True(t, ok, name)
		ok, err = n.Release(ctx, name, "v", time.Minute)
		require.NoError(t, err, name)
		require.True(t, ok, name)
	}

	// A failover is a restart for the lock: Info names another process.
	require.NoError(t, st.Failover(ctx))
	want := masterID(st.Replica.Addr())
	var got redlock.ServerInfo
	for i := 0; i < 300 && got.RunID != want; i++ { // the client follows +switch-master
		got, err = n.Info(ctx)
		if got.RunID != want {
			time.Sleep(20 * time.Millisecond)
		}
	}
	assert.Equal(t, want, got.RunID, "last error: %v", err)
	ok, err := n.Acquire(ctx, "locks:after", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "the promoted master takes locks")
}
