package memnode

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// watch is one Watch call's registration.
type watch struct {
	fn      func(next string)
	stopped bool // n.mu
}

// channel names the release notifications of key for the watches of group
// as redisnode names its pub/sub channel (wire.Channel). So "x" and "{x}"
// share their notifications, as on Redis; a name with '}' but no valid
// hash tag is refused (checkKey).
func (n *Node) channel(key, group string) (string, error) {
	return n.derived(key, func(key string) string { return wire.Channel(key, group) })
}

// note is a notification owed to a watch.
type note struct {
	w   *watch
	msg string
}

// Watch implements redlock.QueueNode. After each Release that removes
// key's value while someone waits in key's line, each ReleaseHold that
// removes one of its holds (also a late command that applies after its
// caller gave up), and after a LeaveQueue of the first waiter of a free
// key, it calls fn with the first live waiter of key's line ("" when
// none; followed by a newline and the value when the release handed it the
// key, wire.Grant), when the watch's group is that waiter's (the part of its ID
// before the first "."; "" for an ID without one). A release that removes
// nothing, an expiry, a restart and a node that Fails report nothing.
//
// fn is called synchronously, in order, by the goroutine whose call
// applied the release (the caller of Release, or the timer of a delayed
// call, or the caller of Pause's resume), after the release's change and
// outside the node's lock: fn may call the node, and a notification such a
// call causes is delivered after fn returns. When another goroutine is
// delivering already, it delivers this one too, so a Release may return
// before fn is called. fn must not block; a fn that panics panics in the
// delivering goroutine (the release has applied), and later notifications
// are delivered as usual.
//
// The notifications of key are those of its channel, named as redisnode
// names it ("{key}:released"; key+":released" when key has a hash tag):
// so a watch of "x" also reports the releases of "{x}", as on Redis.
//
// Watch fails only when ctx has ended (the error wraps redlock.ErrNotSent
// and ctx.Err()), and for a name with '}' but no valid hash tag, which
// redisnode refuses too (the error wraps redlock.ErrNotSent); it ignores
// Fail, Pause and SetDelay: a watch is not a command. It starts no
// goroutine. stop is idempotent and never blocks: after it returns fn is
// not called again, except by a delivery already under way on another
// goroutine. The node has no Close: a watch ends only with its stop
// (memnode holds no connection to close), and Restart keeps it.
func (n *Node) Watch(ctx context.Context, key, group string, fn func(next string)) (stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memnode %s: %w: %w", n.addr, redlock.ErrNotSent, err)
	}
	if fn == nil {
		return nil, fmt.Errorf("memnode %s: %w: Watch of %s with a nil fn", n.addr, redlock.ErrNotSent, quote(key))
	}
	ch, err := n.channel(key, group)
	if err != nil {
		return nil, err
	}
	w := &watch{fn: fn}
	n.mu.Lock()
	if n.watches == nil {
		n.watches = map[string]map[*watch]struct{}{}
	}
	if n.watches[ch] == nil {
		n.watches[ch] = map[*watch]struct{}{}
	}
	n.watches[ch][w] = struct{}{}
	n.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			w.stopped = true
			delete(n.watches[ch], w)
			if len(n.watches[ch]) == 0 {
				delete(n.watches, ch)
			}
		})
	}, nil
}

// notifyLocked owes key's watches a notification with the first live waiter
// of key's queue; deliver sends it. n.mu must be held.
func (n *Node) notifyLocked(key string, now time.Time) {
	n.noteLocked(key, n.firstLiveLocked(key, now))
}

// noteLocked tells key's watches of the named waiter's group that a
// release names it: msg is its ID, or the grant record (ID, newline,
// value) when the release handed it the key ("" when nobody is left: the
// watches of group "").
func (n *Node) noteLocked(key, msg string) {
	next, _ := wire.ParseGrant(msg)
	ch, err := n.channel(key, wire.WaiterGroup(next)) // the waiter's group's watches only
	if err != nil {
		return
	}
	ws := n.watches[ch]
	if len(ws) == 0 {
		return
	}
	for w := range ws {
		n.pending = append(n.pending, note{w, msg})
	}
	n.owed.Store(true)
}

// deliver calls the watches' fns with the notifications owed, in order,
// outside n.mu; n.mu must not be held. Only one goroutine delivers at a
// time: another one that finds it delivering leaves its notifications to
// it.
func (n *Node) deliver() {
	if !n.owed.Load() { // the common case: no lock taken again
		return
	}
	n.mu.Lock()
	if n.delivering || len(n.pending) == 0 {
		n.mu.Unlock()
		return
	}
	n.delivering = true
	locked := true
	defer func() { // also when fn panics: the next release delivers again
		if !locked {
			n.mu.Lock()
		}
		n.delivering = false
		n.owed.Store(len(n.pending) > 0)
		n.mu.Unlock()
	}()
	for len(n.pending) > 0 {
		nt := n.pending[0]
		n.pending = n.pending[1:]
		if nt.w.stopped {
			continue
		}
		n.mu.Unlock()
		locked = false
		nt.w.fn(nt.msg)
		n.mu.Lock()
		locked = true
	}
	n.pending = nil
}
