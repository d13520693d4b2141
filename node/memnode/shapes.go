package memnode

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

var _ redlock.ShapeNode = (*Node)(nil)

// AcquireHold implements redlock.ShapeNode as redisnode's acquire_hold.lua
// does: key holds a sorted set of holds, and the lock's waiting writers are
// in the sorted set "{key}:waiting". On a key (or a waiting key) that holds
// a string, such as a mutex, it fails with WRONGTYPE.
func (n *Node) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return 0, err
	}
	waitKey, err := n.waitingKey(key)
	if err != nil {
		return 0, err
	}
	mine := wire.Member(h.Group, h.ID)
	guard, err := n.guardKey(key, mine)
	if err != nil {
		return 0, err
	}
	rec, _, err := n.callRecord(ctx, ttl)
	if err != nil {
		return 0, err
	}
	var count int
	var fail error
	err = n.do(ctx, func() {
		if fail = n.configLocked(rec); fail != nil {
			return
		}
		now := n.clock()
		holds, err := n.zsetLocked(key, now)
		if err != nil {
			fail = err
			return
		}
		waiting, err := n.zsetLocked(waitKey, now)
		if err != nil {
			fail = err
			return
		}
		// ours counts the live holds of h's group, -1 when another group
		// holds one.
		ours := 0
		for m := range holds {
			if !wire.InGroup(m, h.Group) {
				ours = -1
				break
			}
			ours++
		}
		if _, held := holds[mine]; held {
			count = max(ours, 0)
			return
		}
		if n.lookupLocked(guard, now) != nil {
			return
		}
		if ours < 0 || (h.Limit > 0 && len(holds) >= h.Limit) || (h.Yield && len(waiting) > 0) {
			if h.Waiter != "" {
				n.zaddLocked(waitKey, h.Waiter, now.Add(max(h.WaitTTL.Truncate(time.Millisecond), time.Millisecond)), roleWaiting, now)
			}
			return
		}
		n.zaddLocked(key, mine, now.Add(ttl.Truncate(time.Millisecond)), roleHolds, now)
		if h.Waiter != "" && waiting != nil {
			n.zremLocked(waitKey, h.Waiter, waiting)
		}
		count = ours + 1
	})
	if err != nil {
		return 0, err // do not read count: a late command may still set it
	}
	if fail != nil {
		return 0, n.scriptError("acquire_hold.lua", fail)
	}
	return count, nil
}

// ExtendHold implements redlock.ShapeNode as extend_hold.lua does.
func (n *Node) ExtendHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (bool, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return false, err
	}
	rec, _, err := n.callRecord(ctx, ttl)
	if err != nil {
		return false, err
	}
	var ok bool
	var fail error
	err = n.do(ctx, func() {
		if fail = n.configLocked(rec); fail != nil {
			return
		}
		now := n.clock()
		holds, err := n.zsetLocked(key, now)
		if err != nil {
			fail = err
			return
		}
		if _, ok = holds[wire.Member(h.Group, h.ID)]; ok {
			holds[wire.Member(h.Group, h.ID)] = now.Add(ttl.Truncate(time.Millisecond))
		}
	})
	if err != nil {
		return false, err
	}
	if fail != nil {
		return false, n.scriptError("extend_hold.lua", fail)
	}
	return ok, nil
}

// ReleaseHold implements redlock.ShapeNode as release_hold.lua does.
func (n *Node) ReleaseHold(ctx context.Context, key string, h redlock.Hold, guard time.Duration) (bool, error) {
	mine := wire.Member(h.Group, h.ID)
	guardKey, err := n.guardKey(key, mine)
	if err != nil {
		return false, err
	}
	var ok bool
	var fail error
	err = n.do(ctx, func() {
		now := n.clock()
		holds, err := n.zsetLocked(key, now)
		switch {
		case err != nil:
			fail = err
		case n.zremLocked(key, mine, holds):
			ok = true
			n.notifyLocked(key, now)
		case guard > 0:
			n.setLocked(guardKey, "1", guardTTL(guard), roleGuard, now)
		}
	})
	if err != nil {
		return false, err
	}
	if fail != nil {
		return false, n.scriptError("release_hold.lua", fail)
	}
	return ok, nil
}
