package memnode

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

var _ redlock.ShapeNode = (*Node)(nil)

// holdSet is one key's holds (or waiting marks): member -> expiry on the
// node clock.
type holdSet map[string]time.Time

// live prunes expired members and returns the set (nil when none is left).
func (s holdSet) live(now time.Time) holdSet {
	for m, exp := range s {
		if !now.Before(exp) {
			delete(s, m)
		}
	}
	if len(s) == 0 {
		return nil
	}
	return s
}

// member is a hold's name, as redisnode stores it.
func member(h redlock.Hold) string { return h.Group + "\n" + h.ID }

// setLocked returns the live set of key in sets, creating it if create;
// n.mu must be held.
func (n *Node) setLocked(sets map[string]holdSet, key string, create bool) holdSet {
	s := sets[key].live(n.clock())
	if s == nil {
		delete(sets, key)
		if create {
			s = holdSet{}
			sets[key] = s
		}
	}
	return s
}

// AcquireHold implements redlock.ShapeNode with the rules of redisnode's
// acquire_hold.lua.
func (n *Node) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return 0, err
	}
	var count int
	err := n.do(ctx, func() {
		now := n.clock()
		holds := n.setLocked(n.holds, key, false)
		waiting := n.setLocked(n.waiting, key, false)
		mine := member(h)
		prefix := h.Group + "\n"
		ours := 0
		for m := range holds {
			if !strings.HasPrefix(m, prefix) || strings.Contains(m[len(prefix):], "\n") {
				ours = -1
				break
			}
			ours++
		}
		if _, held := holds[mine]; held {
			count = max(ours, 0)
			return
		}
		if n.guardedLocked(key, mine, now) {
			return
		}
		if ours < 0 || (h.Limit > 0 && len(holds) >= h.Limit) || (h.Yield && len(waiting) > 0) {
			if h.Waiter != "" {
				n.setLocked(n.waiting, key, true)[h.Waiter] = now.Add(max(h.WaitTTL.Truncate(time.Millisecond), time.Millisecond))
			}
			return
		}
		n.setLocked(n.holds, key, true)[mine] = now.Add(ttl.Truncate(time.Millisecond))
		if h.Waiter != "" && waiting != nil {
			delete(waiting, h.Waiter)
		}
		count = ours + 1
	})
	if err != nil {
		return 0, err // do not read count: a late command may still set it
	}
	return count, nil
}

// ExtendHold implements redlock.ShapeNode.
func (n *Node) ExtendHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (bool, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return false, err
	}
	var ok bool
	err := n.do(ctx, func() {
		holds := n.setLocked(n.holds, key, false)
		if _, ok = holds[member(h)]; ok {
			holds[member(h)] = n.clock().Add(ttl.Truncate(time.Millisecond))
		}
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// ReleaseHold implements redlock.ShapeNode.
func (n *Node) ReleaseHold(ctx context.Context, key string, h redlock.Hold, guard time.Duration) (bool, error) {
	var ok bool
	err := n.do(ctx, func() {
		holds := n.setLocked(n.holds, key, false)
		if _, ok = holds[member(h)]; ok {
			delete(holds, member(h))
			n.setLocked(n.holds, key, false) // drops the key with its last hold
			return
		}
		n.guardLocked(key, member(h), guard)
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// holdKeysLocked adds the live hold sets (under the lock's key) and waiting
// marks (under key+":waiting") to a Keys result, each as its members, sorted
// and space separated; n.mu must be held.
func (n *Node) holdKeysLocked(out map[string]string) {
	for suffix, sets := range map[string]map[string]holdSet{"": n.holds, ":waiting": n.waiting} {
		for k := range sets {
			if s := n.setLocked(sets, k, false); s != nil {
				ms := make([]string, 0, len(s))
				for m := range s {
					ms = append(ms, m)
				}
				sort.Strings(ms)
				out[k+suffix] = strings.Join(ms, " ")
			}
		}
	}
}
