package redisnode

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/nodetest"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestNodetestStandalone runs the Node suite on one redis-server, emptied
// before each subtest. It runs with AOF (appendfsync always), so that the
// Down checks' kill and restart keep the data, as they must.
func TestNodetestStandalone(t *testing.T) {
	redisproc.Require(t)
	srv := redisproc.StartT(t, redisproc.Config{AppendOnly: true})
	admin := adminT(t, &redis.Options{Addr: srv.Addr()})
	nodetest.Run(t, func(t *testing.T) redlock.Node {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := admin.FlushAll(ctx).Err(); err != nil {
			t.Fatalf("FLUSHALL on %s: %v", srv.Addr(), err)
		}
		return dialT(t, srv.Addr())
	}, func(t *testing.T, _ redlock.Node) func() {
		if err := srv.Kill(); err != nil {
			t.Fatalf("killing %s: %v", srv.Addr(), err)
		}
		return func() {
			if err := srv.Restart(); err != nil {
				t.Fatalf("restarting %s: %v", srv.Addr(), err)
			}
		}
	})
}

// TestNodetestCluster runs the Node suite on a Node over a Redis Cluster of
// three masters, emptied before each subtest. A cluster client never claims
// "not sent", and a killed master of a cluster is not a down Node (the
// others still answer), so the Down checks are skipped.
func TestNodetestCluster(t *testing.T) {
	c := redisproc.StartClusterT(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = cc.Close() })
	nodetest.Run(t, func(t *testing.T) redlock.Node {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return m.FlushAll(ctx).Err()
		})
		if err != nil {
			t.Fatalf("FLUSHALL on the cluster's masters: %v", err)
		}
		n, err := New(cc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() }) // its watch goroutine; cc stays open
		return n
	}, nil)
}
