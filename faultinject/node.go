package faultinject

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/faultinject/internal/lockkey"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Holder is what one master stores for one lock key, as read by
// Node.Inspect.
type Holder = lockkey.Holder

// Node is one master as the lock sees it: a redlock.Node reached through a
// proxy (the master's shared proxy, or a Link's). Its lock actions go through
// a *redisnode.Node built by redisnode.Dial on the proxy's address; its Addr
// is the master's ServerAddr instead, the same across restarts and links, so
// that errors and stats name the master. Inspect reads a key through a raw
// go-redis client on the same proxy. It is safe for concurrent use.
type Node struct {
	name string
	rn   *redisnode.Node
	raw  *redis.Client
}

var (
	_ redlock.FencingNode = (*Node)(nil)
	_ redlock.ShapeNode   = (*Node)(nil)
)

// dialNode builds the Node of the master called name behind proxyAddr.
func dialNode(proxyAddr, name string) (*Node, error) {
	rn, err := redisnode.Dial(proxyAddr)
	if err != nil {
		return nil, fmt.Errorf("faultinject: node for %s via %s: %w", name, proxyAddr, err)
	}
	return &Node{name: name, rn: rn, raw: redis.NewClient(lockkey.ClientOptions(proxyAddr))}, nil
}

// Addr returns the master's server address (Cluster.ServerAddr).
func (n *Node) Addr() string { return n.name }

// Info implements redlock.Node.
func (n *Node) Info(ctx context.Context) (redlock.ServerInfo, error) {
	return n.rn.Info(ctx)
}

// Acquire implements redlock.Node.
func (n *Node) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return n.rn.Acquire(ctx, key, value, ttl)
}

// Extend implements redlock.Node.
func (n *Node) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return n.rn.Extend(ctx, key, value, ttl)
}

// Release implements redlock.Node.
func (n *Node) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	return n.rn.Release(ctx, key, value, guard)
}

// AcquireFenced implements redlock.FencingNode.
func (n *Node) AcquireFenced(ctx context.Context, key, value string, ttl time.Duration) (bool, int64, error) {
	return n.rn.AcquireFenced(ctx, key, value, ttl)
}

// RaiseFence implements redlock.FencingNode.
func (n *Node) RaiseFence(ctx context.Context, key, value string, token int64) (bool, error) {
	return n.rn.RaiseFence(ctx, key, value, token)
}

// AcquireHold implements redlock.ShapeNode.
func (n *Node) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	return n.rn.AcquireHold(ctx, key, h, ttl)
}

// ExtendHold implements redlock.ShapeNode.
func (n *Node) ExtendHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (bool, error) {
	return n.rn.ExtendHold(ctx, key, h, ttl)
}

// ReleaseHold implements redlock.ShapeNode.
func (n *Node) ReleaseHold(ctx context.Context, key string, h redlock.Hold, guard time.Duration) (bool, error) {
	return n.rn.ReleaseHold(ctx, key, h, guard)
}

// Inspect reads the current value of key on the master and its remaining
// TTL, bounded by ctx (an error wrapping ctx.Err() when it ends first).
func (n *Node) Inspect(ctx context.Context, key string) (Holder, error) {
	return lockkey.Inspect(ctx, n.raw, key)
}

// close closes both clients; the cluster or link that built the node calls
// it.
func (n *Node) close() error {
	return errors.Join(n.rn.Close(), n.raw.Close())
}

// redlockNodes converts nodes for redlock.New.
func redlockNodes(nodes []*Node) []redlock.Node {
	out := make([]redlock.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n
	}
	return out
}
