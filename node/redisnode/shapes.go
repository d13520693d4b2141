package redisnode

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

var _ redlock.ShapeNode = (*Node)(nil)

// AcquireHold adds a hold to the shared lock key (a sorted set of holds, member
// "<group>\n<id>", score = expiry in server milliseconds) with
// acquire_hold.lua; see redlock.ShapeNode for the rules. Waiting writers are
// kept in "{key}:waiting" (or "key:waiting" when key has a hash tag), in
// key's Cluster slot. ttl and h.WaitTTL are rounded down to whole
// milliseconds; ttl must be at least one. It implements redlock.ShapeNode.
func (n *Node) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	cfg := n.config.Load()
	ms, err := n.keyMillis(cfg, ttl)
	if err != nil {
		return 0, err
	}
	guard, err := guardKey(key, wire.Member(h.Group, h.ID))
	if err != nil {
		return 0, err
	}
	yield := "0"
	if h.Yield {
		yield = "1"
	}
	res, err := n.runWith(ctx, cfg, acquireHoldScript, []string{key, wire.WaitingKey(key), guard},
		h.Group, h.ID, ms, h.Limit, h.Waiter, max(h.WaitTTL.Milliseconds(), 1), yield)
	return int(max(res, 0)), err
}

// ExtendHold resets the expiry of one hold of key to ttl if it is still live
// (extend_hold.lua); it never creates it. It implements redlock.ShapeNode.
func (n *Node) ExtendHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (bool, error) {
	cfg := n.config.Load()
	ms, err := n.keyMillis(cfg, ttl)
	if err != nil {
		return false, err
	}
	res, err := n.runWith(ctx, cfg, extendHoldScript, []string{key}, h.Group, h.ID, ms)
	return res == 1, err
}

// ReleaseHold removes one hold of key (release_hold.lua), leaving a release
// guard when it was not there and guard > 0 (as Release does). After a
// removal it tells the lock's watchers, as Release does (see Watch). It
// implements redlock.ShapeNode.
func (n *Node) ReleaseHold(ctx context.Context, key string, h redlock.Hold, guard time.Duration) (bool, error) {
	var gms int64
	if guard > 0 {
		gms = max(guard.Milliseconds(), 1)
	}
	gkey, err := guardKey(key, wire.Member(h.Group, h.ID))
	if err != nil {
		return false, err
	}
	res, err := n.run(ctx, releaseHoldScript, []string{key, gkey, wire.QueueKey(key), wire.QueueTTLKey(key)}, h.Group, h.ID, gms, wire.Channel(key, ""))
	return res == 1, err
}
