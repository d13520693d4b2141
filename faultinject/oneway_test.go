package faultinject

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/lockkey"
)

// TestOneWayPartitionDropsOneDirection: with replies dropped, a command on
// an open connection times out but is applied (its key is there once
// healed), and a new connection cannot even be opened; with requests
// dropped the same command times out too; after Undo both directions pass.
// The master runs in its own network namespace, reached at a 10.213.x.x
// address.
func TestOneWayPartitionDropsOneDirection(t *testing.T) {
	f := OneWayPartition{Nodes: []int{0}}
	RequireFault(t, f)
	c := StartT(t, Config{N: 2, Netns: true})
	assert.Contains(t, c.ServerAddr(0), "10.213.", "the master listens in its namespace")
	ctx := ctxT(t, time.Minute)
	// One connection, opened before the fault.
	opt := lockkey.ClientOptions(c.ServerAddr(0))
	opt.PoolSize = 1
	r := redis.NewClient(opt)
	t.Cleanup(func() { _ = r.Close() })
	waitUp(t, r)
	short := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		return f(ctx)
	}
	require.NoError(t, f.Inject(ctx, c))
	err := short(func(ctx context.Context) error { return r.Set(ctx, "down", "1", 0).Err() })
	require.Error(t, err, "the reply is dropped")
	conn, err := net.DialTimeout("tcp", c.ServerAddr(0), 300*time.Millisecond)
	if err == nil {
		conn.Close()
	}
	require.Error(t, err, "a new connection's SYN-ACK is dropped")
	require.NoError(t, short(func(ctx context.Context) error { return client(t, c.ServerAddr(1)).Ping(ctx).Err() }), "the other master answers")
	require.NoError(t, f.Undo(ctx, c))
	healed := client(t, c.ServerAddr(0))
	waitUp(t, healed)
	v, err := healed.Get(ctx, "down").Result()
	require.NoError(t, err)
	assert.Equal(t, "1", v, "the command whose reply was dropped was applied")

	up := OneWayPartition{Nodes: []int{0}, Direction: Upstream}
	require.NoError(t, up.Inject(ctx, c))
	require.Error(t, short(func(ctx context.Context) error { return healed.Ping(ctx).Err() }), "the request is dropped")
	require.NoError(t, c.HealAll(ctx))
	waitUp(t, client(t, c.Addr(0)))
	require.NoError(t, up.Undo(ctx, c), "undoing a healed fault does nothing")
}

// TestCloseRemovesTmpfsAndNetns: a cluster whose masters have their own
// tmpfs and network namespace leaves none of either after Close, even with
// a full disk and drops in force.
func TestCloseRemovesTmpfsAndNetns(t *testing.T) {
	for _, f := range []Fault{DiskFull{Nodes: []int{0}}, OneWayPartition{Nodes: []int{0}}} {
		RequireFault(t, f)
	}
	ctx := ctxT(t, time.Minute)
	c, err := Start(ctx, Config{N: 2, Backend: Process, Tmpfs: true, Netns: true, Persistence: []Persistence{AOFEverySec}})
	require.NoError(t, err)
	label := c.Label()
	require.NoError(t, DiskFull{Nodes: []int{0}}.Inject(ctx, c))
	require.NoError(t, OneWayPartition{Nodes: []int{1}, Direction: Both}.Inject(ctx, c))
	n, err := Leftovers(ctx, label)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, 2+2, "2 directories (tmpfs) and 2 namespaces while running")
	mounts, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	tmpfs := 0
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.HasPrefix(line, "tmpfs ") && strings.Contains(line, label) {
			tmpfs++
		}
	}
	assert.Equal(t, 2, tmpfs, "2 tmpfs while running")
	require.NoError(t, c.Close(ctx))
	n, err = Leftovers(ctx, label)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing of the cluster is left")
	mounts, err = os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	assert.NotContains(t, string(mounts), label, "no tmpfs or namespace of the cluster is mounted")
}
