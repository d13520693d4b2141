package redlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node"
)

func TestMain(m *testing.M) {
	node.DiscardClientLog()
	goleak.VerifyTestMain(m)
}

// cluster is N real redis-server processes with a lock node and a raw
// client (for setting up and scanning state) on each.
type cluster struct {
	servers []*redisproc.Server
	nodes   []node.Node
	raw     []*redis.Client
}

func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{}
	for i := 0; i < n; i++ {
		srv := redisproc.StartT(t, redisproc.Config{})
		nd, err := node.Dial(srv.Addr())
		require.NoError(t, err)
		raw := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1, Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { _ = nd.Close(); _ = raw.Close() })
		c.servers = append(c.servers, srv)
		c.nodes = append(c.nodes, nd)
		c.raw = append(c.raw, raw)
	}
	return c
}

// keys scans node i and returns every key with its value ("" for non-string
// keys such as guards, which are reported with a "guard:" prefix).
func (c *cluster) keys(t *testing.T, i int) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := c.raw[i].Scan(ctx, 0, "*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		v, err := c.raw[i].Get(ctx, k).Result()
		if err == redis.Nil {
			continue // expired between SCAN and GET
		}
		require.NoError(t, err)
		out[k] = v
	}
	require.NoError(t, iter.Err())
	return out
}

// ours returns, per node, keys that belong to token: a lock value starting
// with it, or any release guard (which only rollback creates).
func (c *cluster) ours(t *testing.T, token string) map[int][]string {
	t.Helper()
	out := map[int][]string{}
	for i := range c.raw {
		for k, v := range c.keys(t, i) {
			if (token != "" && strings.HasPrefix(v, token)) || strings.Contains(k, ":release-guard:") {
				out[i] = append(out[i], k+"="+v)
			}
		}
	}
	return out
}

func (c *cluster) flush(t *testing.T) {
	t.Helper()
	for _, r := range c.raw {
		require.NoError(t, r.FlushAll(context.Background()).Err())
	}
}

// pause stops server i with SIGSTOP and returns a function that resumes it;
// the test's cleanup resumes it too if the test did not.
func (c *cluster) pause(t *testing.T, i int) (resume func()) {
	t.Helper()
	require.NoError(t, c.servers[i].Pause())
	var once sync.Once
	resume = func() { once.Do(func() { require.NoError(t, c.servers[i].Resume()) }) }
	t.Cleanup(func() { once.Do(func() { _ = c.servers[i].Resume() }) })
	return resume
}

// assertNoLockKeyFor checks, repeatedly for d, that node i has no lock key:
// a late write could create one at any moment after a resume.
func (c *cluster) assertNoLockKeyFor(t *testing.T, i int, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		require.Zero(t, c.raw[i].Exists(context.Background(), lockName).Val(), "orphan lock key on node %d", i)
	}
}
