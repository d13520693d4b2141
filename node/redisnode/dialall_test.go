package redisnode_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestDialAllLocksOnRealServers: DialAll's nodes make a working client over
// three real masters, and Close closes every one of them.
func TestDialAllLocksOnRealServers(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, redisproc.StartT(t, redisproc.Config{}).Addr())
	}
	ns, err := redisnode.DialAll(addrs...)
	require.NoError(t, err)
	require.Len(t, ns, 3)
	for i, n := range ns {
		assert.Equal(t, addrs[i], n.Addr(), "nodes come in the order of their addresses")
	}
	c, err := redlock.New(ns.Redlock())
	require.NoError(t, err)
	m, err := c.NewMutex("dialall")
	require.NoError(t, err)
	ctx := context.Background()
	lease, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, lease.Unlock(ctx))
	require.NoError(t, c.Close(ctx))

	require.NoError(t, ns.Close())
	_, err = ns[0].Acquire(ctx, "dialall", "v", 0)
	assert.Error(t, err, "a closed node's client refuses calls")
}

// TestDialAllNamesTheBadAddress: one bad address fails DialAll with an
// error naming its position and Dial's reason, without the password of any
// address; no address at all is an error too.
func TestDialAllNamesTheBadAddress(t *testing.T) {
	_, err := redisnode.DialAll("redis://u:hunter2@127.0.0.1:6379", "redis://u:hunter2@127.0.0.1:99999", "127.0.0.1:6381")
	require.Error(t, err)
	assert.ErrorContains(t, err, "address 2 of 3")
	assert.ErrorContains(t, err, "99999")
	assert.NotContains(t, err.Error(), "hunter2")

	_, err = redisnode.DialAll()
	assert.ErrorContains(t, err, "no addresses")
}
