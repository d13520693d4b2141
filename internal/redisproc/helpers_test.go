package redisproc_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClusterServesAllSlots(t *testing.T) {
	c := redisproc.StartClusterT(t, 3)
	require.Len(t, c.Addrs(), 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, a := range c.Addrs() {
		rc := redis.NewClient(&redis.Options{Addr: a, Protocol: 2, DisableIdentity: true})
		info, err := rc.ClusterInfo(ctx).Result()
		_ = rc.Close()
		require.NoError(t, err)
		assert.Contains(t, info, "cluster_state:ok")
		assert.Contains(t, info, "cluster_slots_assigned:16384")
		assert.Contains(t, info, "cluster_known_nodes:3")
	}
	require.NoError(t, c.Stop())
	for _, s := range c.Servers {
		assert.False(t, s.Running())
	}
}

func TestSentinelFailover(t *testing.T) {
	st := redisproc.StartSentinelT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := st.MasterAddr(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.Master.Addr(), a)
	require.NoError(t, st.Failover(ctx))
	a, err = st.MasterAddr(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.Replica.Addr(), a)
}

func TestTLSConfigWithoutTLSFilesFailsToStart(t *testing.T) {
	redisproc.Require(t)
	// A TLS port without certificate files: redis-server refuses to start,
	// and Start reports it instead of hanging.
	_, err := redisproc.Start(redisproc.Config{TLS: &tls.Config{InsecureSkipVerify: true}, StartTimeout: 2 * time.Second})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "not ready"), err.Error())
}

// TestPauseReturnsOnceStopped: a command sent right after Pause returned is
// not answered until Resume (Pause waits for the process to stop: SIGSTOP
// is delivered asynchronously), and is answered after it.
func TestPauseReturnsOnceStopped(t *testing.T) {
	s := redisproc.StartT(t, redisproc.Config{})
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rc.Close()
	ctx := context.Background()
	require.NoError(t, rc.Ping(ctx).Err(), "the connection is open before the pause")
	for range 5 {
		require.NoError(t, s.Pause())
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := rc.Ping(short).Err()
		cancel()
		require.Error(t, err, "a paused server answered")
		require.NoError(t, s.Resume())
		require.NoError(t, rc.Ping(ctx).Err(), "the resumed server answers")
	}
}
