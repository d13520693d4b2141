package memnode

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// A lock's fair queue (redlock.QueueNode) lives in two sorted sets, as on
// Redis (redisnode's acquire_queued.lua): "{key}:queue" maps each waiter's
// ID to its arrival (Unix milliseconds), "{key}:queue:ttl" maps it to its
// entry's expiry on the node clock. Both are scored sets (keyspace.go): an
// entry is dropped by the queue's own steps once its expiry has passed
// (ZRANGEBYSCORE ttl -inf (now: an entry expiring now still lives), and
// both keys expire with the latest entry (PEXPIREAT), as on Redis, where a
// key expires once the time is past its expiry. The first waiter is the
// one with the lowest arrival, ties broken by ID in byte order (sorted-set
// order). A waiter that gave up (LeaveQueue) leaves a tombstone: it is removed from "{key}:queue" but stays in
// "{key}:queue:ttl" with an expiry w.TTL from its leaving, so that a late
// copy of its AcquireQueued does not enter it again; a tombstone is
// dropped like an expired entry.
//
// Each entry also records its waiter's latest value and TTL in a third key,
// "{key}:queue:val" (a hash on Redis: valsKey), and a release hands the key over
// at it (handOverLocked; docs/handoff.md), leaving a grant record, the
// string "{key}:grant" (wire.Grant), that lives as long as the key.

// entryVal is a waiter's latest value and TTL in a line.
type entryVal struct {
	value string
	ttl   time.Duration
}

// scoredLocked returns key's scored set, nil when key is absent, and
// errWrongType when key holds a string. n.mu must be held.
func (n *Node) scoredLocked(key string, now time.Time) (holdSet, error) {
	v := n.lookupLocked(key, now)
	switch {
	case v == nil:
		return nil, nil
	case v.set == nil:
		return nil, errWrongType
	}
	return v.set, nil
}

// queueLocked drops the expired entries of key's queue (qk, tk: its keys)
// and returns its arrivals and expiries (nil when empty); errWrongType
// when either key holds a string. n.mu must be held.
func (n *Node) queueLocked(qk, tk string, now time.Time) (arrivals, expiries holdSet, err error) {
	if expiries, err = n.scoredLocked(tk, now); err != nil {
		return nil, nil, err
	}
	if arrivals, err = n.scoredLocked(qk, now); err != nil {
		return nil, nil, err
	}
	for m, exp := range expiries {
		if now.After(exp) {
			delete(expiries, m)
			delete(arrivals, m)
			n.forgetValLocked(qk, m, now)
		}
	}
	return n.dropEmpty(qk, arrivals), n.dropEmpty(tk, expiries), nil
}

// dropEmpty deletes key when its set is empty, and returns the set, nil
// when empty.
func (n *Node) dropEmpty(key string, set holdSet) holdSet {
	if set != nil && len(set) == 0 {
		delete(n.data, key)
		return nil
	}
	return set
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

// scoredSet returns key's scored set, creating it when absent.
func (n *Node) scoredSet(key string, now time.Time) *value {
	v := n.lookupLocked(key, now)
	if v == nil {
		v = &value{set: holdSet{}, scored: true, role: roleQueue}
		n.data[key] = v
		n.sweepLocked(now)
	}
	return v
}

// valsKey names the values of the line whose arrivals are at qk:
// wire.QueueValKey of its lock is wire.QueueKey's name followed by ":val".
func valsKey(qk string) string { return qk + ":val" }

// recordLocked records value and ttl as waiter w's in the line whose
// arrivals are qk (HSET), when w is in it; the values expire with the
// line (coverLocked). An entry of 1 ms (a fair TryLock's, which makes no
// second attempt to take a handed key over) records nothing.
func (n *Node) recordLocked(qk string, w redlock.Waiter, val string, ttl time.Duration, now time.Time) {
	id := w.ID
	if waiterTTL(w) <= time.Millisecond {
		return
	}
	q := n.lookupLocked(qk, now)
	if q == nil || q.set == nil {
		return
	}
	if _, in := q.set[id]; !in {
		return
	}
	vk := valsKey(qk)
	v := n.lookupLocked(vk, now)
	if v == nil || v.vals == nil {
		v = &value{vals: map[string]entryVal{}, role: roleQueue, exp: q.exp}
		n.data[vk] = v
	}
	v.vals[id] = entryVal{val, ttl}
}

// recordOf returns waiter id's record in the line whose arrivals are qk.
func (n *Node) recordOf(qk, id string, now time.Time) (entryVal, bool) {
	v := n.lookupLocked(valsKey(qk), now)
	if v == nil {
		return entryVal{}, false
	}
	rec, ok := v.vals[id]
	return rec, ok
}

// forgetValLocked drops waiter id's value record (HDEL), and the values'
// key with the last one.
func (n *Node) forgetValLocked(qk, id string, now time.Time) {
	vk := valsKey(qk)
	if v := n.lookupLocked(vk, now); v != nil && v.vals != nil {
		delete(v.vals, id)
		if len(v.vals) == 0 {
			delete(n.data, vk)
		}
	}
}

// enterLocked enters id in the queue with arrival when absent (ZADD NX) and
// sets its entry to expire at exp (ZADD); then both keys expire with the
// latest entry. queueLocked has checked the keys' types.
func (n *Node) enterLocked(qk, tk, id string, arrival, exp time.Time, now time.Time) {
	q := n.scoredSet(qk, now)
	if _, in := q.set[id]; !in {
		q.set[id] = arrival
	}
	n.scoredSet(tk, now).set[id] = exp
	n.coverLocked(qk, tk, now)
}

// coverLocked makes both queue keys expire with the latest entry (the
// scripts' PEXPIREAT of the highest expiry).
func (n *Node) coverLocked(qk, tk string, now time.Time) {
	t := n.lookupLocked(tk, now)
	if t == nil || t.set == nil {
		return
	}
	var top time.Time
	for _, exp := range t.set {
		if exp.After(top) {
			top = exp
		}
	}
	t.exp = top
	if q := n.lookupLocked(qk, now); q != nil {
		q.exp = top
	}
	if v := n.lookupLocked(valsKey(qk), now); v != nil && v.vals != nil {
		v.exp = top
	}
}

// leftLocked reports whether id left key's queue: it has a tombstone (an
// expiry in expiries but no arrival in arrivals).
func leftLocked(arrivals, expiries holdSet, id string) bool {
	_, in := arrivals[id]
	_, marked := expiries[id]
	return marked && !in
}

// leaveLocked removes id from the queue and leaves its tombstone, expiring
// at exp, whether or not it was in the queue (ZREM, ZADD); then both keys
// expire with the latest entry. It reports whether id was in the queue.
// queueLocked has checked the keys' types.
func (n *Node) leaveLocked(qk, tk, id string, exp time.Time, now time.Time) bool {
	arrivals, _ := n.scoredLocked(qk, now)
	_, in := arrivals[id]
	n.forgetValLocked(qk, id, now)
	delete(arrivals, id)
	n.dropEmpty(qk, arrivals)
	n.scoredSet(tk, now).set[id] = exp
	n.coverLocked(qk, tk, now)
	return in
}

// dropLocked removes id from the queue without a tombstone (ZREM from
// both keys); then both keys expire with the latest entry.
func (n *Node) dropLocked(qk, tk, id string, now time.Time) {
	arrivals, _ := n.scoredLocked(qk, now)
	n.forgetValLocked(qk, id, now)
	delete(arrivals, id)
	n.dropEmpty(qk, arrivals)
	expiries, _ := n.scoredLocked(tk, now)
	delete(expiries, id)
	n.dropEmpty(tk, expiries)
	n.coverLocked(qk, tk, now)
}

// AcquireQueued implements redlock.QueueNode in one step, as redisnode's
// acquire_queued.lua does: it reads the lock's fencing counter (a counter
// that holds no number fails before anything changes), and a release guard
// of key and value refuses before anything changes. When nobody is in key's
// line (neither queue key exists) it acquires as Acquire does, enters w
// alone when another value holds key. Otherwise it drops the expired entries, enters w when
// absent (at w.Arrival in whole milliseconds; an entry keeps its first
// arrival), sets w's entry to expire w.TTL (whole milliseconds) from now on
// the node clock; then a key that holds value already is a retried copy
// (true); a free key is taken in w's turn:
// with w.Fair when w is the line's first waiter, without when w was in
// line before this call or is alone in it. When key holds value afterwards,
// w leaves the line, with no tombstone (fair or not: acquire_queued.lua
// says why). A waiter that left (its tombstone lives) is not entered again and
// takes nothing: it reports true only when key holds value (a late copy of the call that acquired). A key or queue of
// the wrong type fails as on Redis (WRONGTYPE). ttl and w.TTL must be at
// least a millisecond and w.ID non-empty without a newline, or it fails
// with an error wrapping redlock.ErrNotSent.
func (n *Node) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, w redlock.Waiter) (bool, int64, error) {
	if err := checkTTL(n.addr, ttl); err != nil {
		return false, 0, err
	}
	if err := n.checkWaiter(w); err != nil {
		return false, 0, err
	}
	guard, err := n.guardKey(key, value)
	if err != nil {
		return false, 0, err
	}
	fenceKey, qk, tk, err := n.queueKeys(key)
	if err != nil {
		return false, 0, err
	}
	gk, _ := n.grantKey(key)
	rec, epoch, err := n.callRecord(ctx, ttl)
	if err != nil {
		return false, 0, err
	}
	arrival := time.UnixMilli(w.Arrival.UnixMilli())
	var ok bool
	var fence int64
	var fail error
	err = n.do(ctx, func() {
		if fail = n.configLocked(rec); fail != nil {
			return
		}
		now := n.clock()
		if fence, fail = n.counterLocked(fenceKey, now, epoch); fail != nil {
			return
		}
		ok, fail = n.acquireQueuedLocked(key, value, guard, qk, tk, gk, ttl, w, arrival, now)
	})
	switch {
	case err != nil:
		return false, 0, err // do not read ok: a late command may still set it
	case fail != nil:
		return false, 0, n.scriptError("acquire_queued.lua", fail)
	}
	return ok, fence, nil
}

// acquireQueuedLocked is AcquireQueued's step after the counter's read.
func (n *Node) acquireQueuedLocked(key, value, guard, qk, tk, gk string, ttl time.Duration, w redlock.Waiter, arrival, now time.Time) (bool, error) {
	exp := now.Add(waiterTTL(w))
	ttl = ttl.Truncate(time.Millisecond)
	if n.lookupLocked(guard, now) != nil {
		return false, nil // a straggler: its release ran first
	}
	if held, found, err := n.getLocked(key, now); err != nil {
		return false, err
	} else if found && held != value && !knobs.NoGrantTakeover.Load() { // test-only switch
		if g, _, _ := n.getLocked(gk, now); g == wire.Grant(w.ID, held) {
			// The key a release handed w: taken over.
			n.setLocked(key, value, ttl, roleLock, now)
			delete(n.data, gk)
			if _, _, err := n.queueLocked(qk, tk, now); err != nil {
				return false, err
			}
			n.dropLocked(qk, tk, w.ID, now)
			return true, nil
		}
	}
	if n.lookupLocked(qk, now) == nil && n.lookupLocked(tk, now) == nil {
		// Nobody in line, no tombstone.
		ok, err := n.acquireLocked(key, value, guard, ttl, now)
		switch {
		case err != nil:
			return false, err
		case !ok:
			n.enterLocked(qk, tk, w.ID, arrival, exp, now)
			n.recordLocked(qk, w, value, ttl, now)
		}
		return ok, nil
	}
	arrivals, expiries, err := n.queueLocked(qk, tk, now)
	if err != nil {
		return false, err
	}
	_, queued := arrivals[w.ID]
	left := leftLocked(arrivals, expiries, w.ID)
	if !left {
		n.enterLocked(qk, tk, w.ID, arrival, exp, now)
		n.recordLocked(qk, w, value, ttl, now)
		arrivals, _, _ = n.queueLocked(qk, tk, now)
	}
	held, found, err := n.getLocked(key, now)
	switch {
	case err != nil:
		return false, err
	case left:
		return found && held == value, nil
	case found && held != value:
		return false, nil
	case !found:
		turn := queued || len(arrivals) == 1
		if w.Fair {
			turn = firstWaiter(arrivals) == w.ID
		}
		if !turn {
			return false, nil
		}
		n.setLocked(key, value, ttl, roleLock, now)
	}
	n.dropLocked(qk, tk, w.ID, now)
	return true, nil
}

// handOverLocked hands key, just deleted, to the first live waiter of its
// line when it has a recorded value, as release.lua does: key is set to
// that value for its recorded TTL, the record is deleted (the waiter keeps
// its place until it takes the key over), and the grant record names it
// and the value for as long. It returns the release's notification, which
// names the line's first live waiter ("" when nobody waits), handed the
// key or not (knobs.NoGrant; a waiter without a record): the grant record
// when it was handed the key, its ID alone when not.
func (n *Node) handOverLocked(key string, now time.Time) string {
	next := n.firstLiveLocked(key, now)
	if next == "" || knobs.NoGrant.Load() { // test-only switch: name the waiter only
		return next
	}
	_, qk, _, _ := n.queueKeys(key) // firstLiveLocked found a line: the names are valid
	rec, ok := n.recordOf(qk, next, now)
	if !ok {
		return next
	}
	gk, _ := n.grantKey(key)
	note := wire.Grant(next, rec.value)
	n.setLocked(key, rec.value, rec.ttl, roleLock, now)
	n.setLocked(gk, note, rec.ttl, roleGrant, now)
	n.forgetValLocked(qk, next, now)
	return note
}

// retireHolderLocked runs when a release deleted key holding value, as
// release.lua does: when the grant record says value was handed to a
// waiter (whose call held the lock with the hand-overs it heard), that
// waiter leaves the line without a tombstone, as a waiter that acquires,
// and the record is deleted (knobs.NoGrantHoldRelease: left as it is).
func (n *Node) retireHolderLocked(key, value string, now time.Time) {
	gk, err := n.grantKey(key)
	if err != nil || knobs.NoGrantHoldRelease.Load() { // test-only switch
		return
	}
	_, qk, tk, _ := n.queueKeys(key)
	if n.lookupLocked(qk, now) == nil {
		return // nobody waits: release.lua stops before it reads the record
	}
	g, found, _ := n.getLocked(gk, now)
	id, v := wire.ParseGrant(g)
	if !found || v != value {
		return
	}
	delete(n.data, gk)
	if _, _, err := n.queueLocked(qk, tk, now); err == nil {
		n.dropLocked(qk, tk, id, now)
	}
}

// LeaveQueue implements redlock.QueueNode as leave_queue.lua does: it
// removes w from key's queue (after dropping the expired entries) and
// leaves its tombstone, expiring w.TTL (whole milliseconds) from now on
// the node clock, whether or not w was in the queue (a LeaveQueue that
// overtook w's first AcquireQueued keeps w out too). A key a release
// handed w is deleted. When it was, or when w was the first waiter and key
// is free (no value, no holds), key is handed to the new first waiter
// (handOverLocked) and that waiter ("" when none is left and w was first)
// is reported to key's watches as a release does (see Watch). w.TTL must be at least a millisecond and w.ID non-empty without
// a newline, or it fails with an error wrapping redlock.ErrNotSent.
func (n *Node) LeaveQueue(ctx context.Context, key string, w redlock.Waiter) error {
	if err := n.checkWaiter(w); err != nil {
		return err
	}
	_, qk, tk, err := n.queueKeys(key)
	if err != nil {
		return err
	}
	var fail error
	err = n.do(ctx, func() {
		now := n.clock()
		arrivals, _, err := n.queueLocked(qk, tk, now)
		if err != nil {
			fail = err
			return
		}
		wasFirst := firstWaiter(arrivals) == w.ID
		var in bool
		if knobs.NoLeaveTombstone.Load() { // test-only switch: out of the line, no tombstone
			if _, in = arrivals[w.ID]; in {
				n.dropLocked(qk, tk, w.ID, now)
			}
		} else {
			in = n.leaveLocked(qk, tk, w.ID, now.Add(waiterTTL(w)), now)
		}
		// The key a release handed w: released.
		released := false
		if !knobs.NoGrantLeaveRelease.Load() { // test-only switch
			gk, _ := n.grantKey(key)
			held, found, _ := n.getLocked(key, now)
			if g, _, _ := n.getLocked(gk, now); found && g == wire.Grant(w.ID, held) {
				delete(n.data, key)
				delete(n.data, gk)
				released = true
			}
		}
		if !released && !(in && wasFirst && n.lookupLocked(key, now) == nil) {
			return
		}
		note := n.handOverLocked(key, now)
		if note != "" || !released { // a release nobody waits for is not reported
			n.noteLocked(key, note)
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

// checkWaiter refuses, as redisnode does, a waiter whose entry would live
// less than a millisecond or whose ID is empty or has a newline, with an
// error wrapping redlock.ErrNotSent.
func (n *Node) checkWaiter(w redlock.Waiter) error {
	if err := n.checkWaiterID(w.ID); err != nil {
		return err
	}
	if w.TTL < time.Millisecond {
		return fmt.Errorf("memnode %s: %w: waiter TTL %v is below one millisecond", n.addr, redlock.ErrNotSent, w.TTL)
	}
	return nil
}

// waiterTTL is how long w's entry or tombstone lives: w.TTL in whole
// milliseconds (checkWaiter has checked it is at least one).
func waiterTTL(w redlock.Waiter) time.Duration {
	return max(w.TTL.Truncate(time.Millisecond), time.Millisecond)
}

func (n *Node) checkWaiterID(id string) error {
	if !wire.ValidWaiterID(id) {
		return fmt.Errorf("memnode %s: %w: waiter ID %s is empty or has a newline", n.addr, redlock.ErrNotSent, quote(id))
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

// Line returns the live waiters of key's line, first first (ties in arrival
// broken by ID, as the scripts order them), nil when nobody waits; the
// tombstones are left out. Tests use it to see why a waiter was refused.
func (n *Node) Line(key string) []string {
	_, qk, tk, err := n.queueKeys(key)
	if err != nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.clock()
	arrivals, err := n.scoredLocked(qk, now)
	if err != nil {
		return nil
	}
	expiries, _ := n.scoredLocked(tk, now)
	var line []string
	for id := range arrivals {
		if exp, ok := expiries[id]; ok && !now.After(exp) {
			line = append(line, id)
		}
	}
	slices.SortFunc(line, func(a, b string) int {
		return cmp.Or(arrivals[a].Compare(arrivals[b]), strings.Compare(a, b))
	})
	return line
}
