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
//
// On the process and docker backends it is also a redlock.QueueNode (a
// waiting Lock call waits in the masters' line and is woken by releases),
// as a redisnode.Node is. On the memory backend the clients poll instead
// (redlockNodes hides the line and its watches): miniredis interprets
// acquire_queued.lua in Go, and under -race on two cores that cost a
// contended lock nine acquisitions in ten (the healthy scenario made 9
// instead of about 75), too few for the suite's checks.
type Node struct {
	// lockActions is the *redisnode.Node: Node has its methods of
	// redlock.FenceExpiryNode, ShapeNode, PeekNode and QueueNode
	// (Info, Acquire, Extend, Release, AcquireFenced, RaiseFence, ...,
	// AcquireQueued, LeaveQueue, Watch), all but Addr. Its Close is not promoted: the cluster or
	// link that built the Node owns it.
	lockActions
	name string
	raw  *redis.Client
	// polls: the waiting line and watches are hidden (the memory backend).
	polls bool
}

// lockActions is what Node promotes from its *redisnode.Node.
type lockActions interface {
	redlock.FenceExpiryNode
	redlock.ShapeNode
	redlock.PeekNode
	redlock.QueueNode
}

var (
	_ redlock.FenceExpiryNode = (*Node)(nil)
	_ redlock.ShapeNode       = (*Node)(nil)
	_ redlock.PeekNode        = (*Node)(nil)
	_ redlock.QueueNode       = (*Node)(nil)
	_ lockActions             = (*redisnode.Node)(nil)
)

// dialNode builds the Node of the master called name behind proxyAddr;
// polls hides its waiting line and watches from the lock (the memory
// backend).
func dialNode(proxyAddr, name string, polls bool) (*Node, error) {
	rn, err := redisnode.Dial(proxyAddr)
	if err != nil {
		return nil, fmt.Errorf("faultinject: node for %s via %s: %w", name, proxyAddr, err)
	}
	return &Node{lockActions: rn, name: name, raw: redis.NewClient(lockkey.ClientOptions(proxyAddr)), polls: polls}, nil
}

// SetConfig gives the node a configuration record, as
// redisnode.Node.SetConfig does: its calls that count a vote are then
// checked against the master's record (package reconfig).
func (n *Node) SetConfig(record string) error {
	return n.lockActions.(*redisnode.Node).SetConfig(record)
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
		if n.polls {
			out[i] = pollingNode{pollingActions: n.lockActions, n: n}
		}
	}
	return out
}

// pollingNode is a Node whose waiting line and watches the lock does not
// see: the other capabilities stay.
type pollingNode struct {
	pollingActions
	n *Node
}

// pollingActions is what pollingNode promotes.
type pollingActions interface {
	redlock.FenceExpiryNode
	redlock.ShapeNode
	redlock.PeekNode
}

func (p pollingNode) Addr() string { return p.n.Addr() }

// Inspect is the Node's.
func (p pollingNode) Inspect(ctx context.Context, key string) (Holder, error) {
	return p.n.Inspect(ctx, key)
}
