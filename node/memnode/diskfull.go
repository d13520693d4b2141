package memnode

import (
	"errors"
	"fmt"
	"maps"
	"time"
)

// ErrDiskFull is the reply of a node whose disk is full (SetDiskFull) to a
// command that would write: the text of Redis's reply when its
// append-only file cannot be written (appendfsync everysec on a full
// disk). The coordinator reads the reply's "MISCONF " prefix, as it does
// Redis's (a release so answered is retried), so the text has no package
// prefix; the error a call returns wraps it and names the node after it.
var ErrDiskFull = errors.New("MISCONF Errors writing to the AOF file: No space left on device")

// SetDiskFull makes the node answer as a Redis master with appendfsync
// everysec does on a full disk (full true), or as it does again once the
// disk is freed (false): a command that would change the keyspace (a lock
// taken, extended, released, a guard or a fencing counter written) changes
// nothing and fails with an error reply wrapping ErrDiskFull, as Redis
// refuses a script's first write with MISCONF; a command that only reads
// (Info, Peek, an acquire a release guard refuses, an extend of a key it
// does not hold) answers as usual. Keys keep expiring. Commands queued or
// in flight are judged when they apply.
func (n *Node) SetDiskFull(full bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.diskFull = full
}

// applyReadOnlyLocked runs apply as a full disk lets it: if apply changed
// the keyspace (beyond what expiry removes by itself), its changes and the
// release notifications it queued are undone and the ErrDiskFull reply is
// returned. n.mu must be held.
func (n *Node) applyReadOnlyLocked(apply func()) error {
	before, sweepAt, pending := copyData(n.data), n.sweepAt, len(n.pending)
	apply()
	if sameLive(before, n.data, n.clock()) {
		return nil
	}
	n.data, n.sweepAt, n.pending = before, sweepAt, n.pending[:pending]
	n.owed.Store(len(n.pending) > 0)
	return replyError{fmt.Errorf("%w (memnode %s)", ErrDiskFull, n.addr)}
}

// sameLive reports whether two keyspaces hold the same live values at now:
// a key or a set member that expired counts as absent in both.
func sameLive(a, b map[string]*value, now time.Time) bool {
	for k := range a {
		if !sameValue(live(a[k], now), live(b[k], now)) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && live(b[k], now) != nil {
			return false
		}
	}
	return true
}

// live returns v as the node would find it at now (nil when gone), its
// set's expired members left out, without changing v.
func live(v *value, now time.Time) *value {
	if v == nil {
		return nil
	}
	switch {
	case v.set != nil && v.scored:
		if len(v.set) == 0 || !v.exp.IsZero() && now.After(v.exp) {
			return nil
		}
		return v
	case v.set != nil:
		c := *v
		c.set = maps.Clone(v.set)
		maps.DeleteFunc(c.set, func(_ string, exp time.Time) bool { return !now.Before(exp) })
		if len(c.set) == 0 {
			return nil
		}
		return &c
	case v.exp.IsZero() || now.Before(v.exp):
		return v
	}
	return nil
}

// sameValue compares two live values.
func sameValue(a, b *value) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.str == b.str && a.exp.Equal(b.exp) && a.scored == b.scored && a.role == b.role && maps.Equal(a.vals, b.vals) &&
		maps.EqualFunc(a.set, b.set, time.Time.Equal) && (a.set == nil) == (b.set == nil)
}
