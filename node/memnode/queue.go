package memnode

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// A lock's fair queue (redlock.QueueNode) lives in two sorted sets, as on
// Redis: "{key}:queue" maps each waiter's ID to its arrival (Unix
// milliseconds), "{key}:queue:ttl" maps it to its entry's expiry on the node
// clock. Both keys live as long as the latest entry (the scripts' PEXPIRE).
// The first waiter is the one with the lowest arrival, ties broken by ID in
// byte order.

// queueLocked drops the expired entries of key's queue and returns its
// arrivals and expiries (nil when the queue is empty); errWrongType when
// either key holds a string. n.mu must be held.
func (n *Node) queueLocked(qk, tk string, now time.Time) (arrivals, expiries holdSet, err error) {
	expiries, err = n.zsetLocked(tk, now) // ZREMRANGEBYSCORE ttl -inf now
	if err != nil {
		return nil, nil, err
	}
	v := n.lookupLocked(qk, now)
	switch {
	case v == nil:
		return nil, expiries, nil
	case v.set == nil:
		return nil, nil, errWrongType
	}
	arrivals = v.set
	for m := range arrivals {
		if _, live := expiries[m]; !live {
			delete(arrivals, m) // ZREM queue <the waiters whose entries expired>
		}
	}
	if len(arrivals) == 0 {
		delete(n.data, qk)
		return nil, expiries, nil
	}
	return arrivals, expiries, nil
}

// firstWaiter returns the first waiter of a queue's arrivals, "" when there
// is none.
func firstWaiter(arrivals holdSet) string {
	first := ""
	var at time.Time
	for m, a := range arrivals {
		if first == "" || a.Before(at) || (a.Equal(at) && m < first) {
			first, at = m, a
		}
	}
	return first
}

// enterLocked enters id in the queue with arrival when absent and sets its
// entry to expire at exp; both keys then expire with their latest entry.
func (n *Node) enterLocked(qk, tk, id string, arrival, exp time.Time, now time.Time) {
	n.zaddLocked(tk, id, exp, roleQueue, now)
	v := n.lookupLocked(qk, now)
	if v == nil {
		v = &value{set: holdSet{}, scored: true, role: roleQueue}
		n.data[qk] = v
		defer n.sweepLocked(now)
	}
	if _, in := v.set[id]; !in {
		v.set[id] = arrival
	}
	if exp.After(v.exp) {
		v.exp = exp
	}
}

// leaveLocked removes id from the queue (arrivals and expiries as
// queueLocked returned them), dropping the keys with their last entry.
func (n *Node) leaveLocked(qk, tk, id string, arrivals, expiries holdSet) {
	if arrivals != nil {
		n.zremLocked(qk, id, arrivals)
	}
	if expiries != nil {
		n.zremLocked(tk, id, expiries)
	}
}

// AcquireQueued implements redlock.QueueNode in one step, as redisnode's
// script does: it drops the expired entries of key's queue, enters w when
// absent (at w.Arrival in whole milliseconds; an entry keeps its first
// arrival), sets w's entry to expire w.TTL (whole milliseconds, at least
// one) from now on the node clock, and reads the lock's fencing counter.
// Then a release guard of key and value refuses; a key that holds value
// already is a retried copy (true); otherwise w takes a free key only when
// it is the queue's first waiter. When key holds value afterwards, w leaves
// the queue. A key, queue or counter of the wrong type fails as on Redis
// (WRONGTYPE; a counter that holds no number), after the queue's changes.
func (n *Node) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, w redlock.Waiter) (bool, int64, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return false, 0, err
	}
	if err := checkTTL(n.addr, w.TTL); err != nil {
		return false, 0, fmt.Errorf("%w (the waiter's TTL)", err)
	}
	guard, err := n.guardKey(key, value)
	if err != nil {
		return false, 0, err
	}
	fenceKey, qk, tk, err := n.queueKeys(key)
	if err != nil {
		return false, 0, err
	}
	arrival := time.UnixMilli(w.Arrival.UnixMilli())
	var ok, number bool
	var fence float64
	var fail error
	err = n.do(ctx, func() {
		now := n.clock()
		if _, _, err := n.queueLocked(qk, tk, now); err != nil {
			fail = err
			return
		}
		n.enterLocked(qk, tk, w.ID, arrival, now.Add(max(w.TTL.Truncate(time.Millisecond), time.Millisecond)), now)
		arrivals, expiries, _ := n.queueLocked(qk, tk, now)
		s, found, err := n.getLocked(fenceKey, now)
		if err != nil {
			fail = err
			return
		}
		fence, number = 0, true
		if found {
			fence, number = luaNumber(s)
		}
		if n.lookupLocked(guard, now) != nil {
			return
		}
		held, found, err := n.getLocked(key, now)
		switch {
		case err != nil:
			fail = err
			return
		case found && held != value, !found && firstWaiter(arrivals) != w.ID:
			return
		case !found:
			n.setLocked(key, value, ttl.Truncate(time.Millisecond), roleLock, now)
		}
		n.leaveLocked(qk, tk, w.ID, arrivals, expiries)
		ok = true
	})
	switch {
	case err != nil:
		return false, 0, err // do not read ok: a late command may still set it
	case fail != nil:
		return false, 0, n.scriptError("acquire_queued.lua", fail)
	case !number:
		return false, 0, fmt.Errorf("memnode %s: acquire_queued.lua: the fencing counter %s holds no number", n.addr, quote(fenceKey))
	}
	return ok, luaInteger(fence), nil
}

// LeaveQueue implements redlock.QueueNode: it removes w from key's queue
// (after dropping the expired entries) and, when w was the first waiter,
// key is free (no value, no holds) and a waiter is left, reports that
// waiter to key's watches as a release does (see Watch).
func (n *Node) LeaveQueue(ctx context.Context, key string, w redlock.Waiter) error {
	_, qk, tk, err := n.queueKeys(key)
	if err != nil {
		return err
	}
	var fail error
	err = n.do(ctx, func() {
		now := n.clock()
		arrivals, expiries, err := n.queueLocked(qk, tk, now)
		if err != nil {
			fail = err
			return
		}
		wasFirst := firstWaiter(arrivals) == w.ID
		n.leaveLocked(qk, tk, w.ID, arrivals, expiries)
		if wasFirst && n.lookupLocked(key, now) == nil {
			if next := n.firstLiveLocked(key, now); next != "" {
				n.notifyLocked(key, now)
			}
		}
	})
	if err != nil {
		return err
	}
	if fail != nil {
		return n.scriptError("leave_queue.lua", fail)
	}
	return nil
}

// queueKeys names the fencing counter and the two queue keys of key.
func (n *Node) queueKeys(key string) (fence, queue, ttl string, err error) {
	if fence, err = n.fenceKey(key); err != nil {
		return "", "", "", err
	}
	queue, _ = n.queueKey(key)
	ttl, _ = n.queueTTLKey(key)
	return fence, queue, ttl, nil
}

// firstLiveLocked returns the first live waiter of key's queue, "" when
// there is none or its keys hold strings.
func (n *Node) firstLiveLocked(key string, now time.Time) string {
	_, qk, tk, err := n.queueKeys(key)
	if err != nil {
		return ""
	}
	arrivals, _, err := n.queueLocked(qk, tk, now)
	if err != nil {
		return ""
	}
	return firstWaiter(arrivals)
}
