package faultinject

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockkey"
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
	// lockActions is the *redisnode.Node: Node has its methods of
	// redlock.FencingNode and redlock.ShapeNode (Info, Acquire, Extend,
	// Release, AcquireFenced, RaiseFence, AcquireHold, ExtendHold,
	// ReleaseHold), all but Addr. Its Close is not promoted: the cluster or
	// link that built the Node owns it.
	lockActions
	name string
	raw  *redis.Client
}

// lockActions is what Node promotes from its *redisnode.Node.
type lockActions interface {
	redlock.FenceExpiryNode
	redlock.ShapeNode
	redlock.PeekNode
}

var (
	_ redlock.FenceExpiryNode = (*Node)(nil)
	_ redlock.ShapeNode       = (*Node)(nil)
	_ redlock.PeekNode        = (*Node)(nil)
	_ lockActions             = (*redisnode.Node)(nil)
)

// dialNode builds the Node of the master called name behind proxyAddr.
func dialNode(proxyAddr, name string) (*Node, error) {
	rn, err := redisnode.Dial(proxyAddr)
	if err != nil {
		return nil, fmt.Errorf("faultinject: node for %s via %s: %w", name, proxyAddr, err)
	}
	return &Node{lockActions: rn, name: name, raw: redis.NewClient(lockkey.ClientOptions(proxyAddr))}, nil
}

// Addr returns the master's server address (Cluster.ServerAddr).
func (n *Node) Addr() string { return n.name }

// Inspect reads the current value of key on the master and its remaining
// TTL, bounded by ctx (an error wrapping ctx.Err() when it ends first).
func (n *Node) Inspect(ctx context.Context, key string) (Holder, error) {
	return lockkey.Inspect(ctx, n.raw, key)
}

// close closes both clients; the cluster or link that built the node calls
// it.
func (n *Node) close() error {
	return errors.Join(n.lockActions.(*redisnode.Node).Close(), n.raw.Close())
}

// redlockNodes converts nodes for redlock.New.
func redlockNodes(nodes []*Node) []redlock.Node {
	out := make([]redlock.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n
	}
	return out
}
