package sim

import (
	"context"
	"fmt"
	"github.com/quorumlock/quorumlock/internal/wire"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/redlock"
)

// A script's links carry the waiting line's calls (QueueNode, its Watch included) as
// the script says, like its other calls: a waiter's acquire is the
// acquisition's CallAcquire, its LeaveQueue a CallLeave, a subscription a
// CallWatch (it listens from its ApplyAt). They also record what the line
// did for the checker (history.KeptOut): a waiter's acquire refused while
// the lock key was free (Refused, with the master's line right after) and a
// waiter leaving a master's line (Left).
//
// Waiter IDs are random in the code (a client's random group, "." and 24
// random hexadecimal digits), and they break ties between arrivals in the
// same millisecond, which a model decides otherwise (queue.pml: client 0
// first, a call's old ID before its new one). So a script's links rename
// them on their way to the masters, as a proxy may: client c's group is
// "c<c>" and its IDs "c<c>.0001", "c<c>.0002", ... in the order the client
// first uses them (a notification naming one is renamed back). A renaming
// keeps what the masters do with IDs (equal or not, the group before the
// "."), and the order it gives is one the random IDs may have.

// waiterNames renames one client's waiter IDs (its links share it).
type waiterNames struct {
	client   int
	mu       sync.Mutex
	to, from map[string]string // the client's ID -> the masters' and back
}

// id returns the masters' name of the client's waiter ID real.
func (n *waiterNames) id(real string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if v, ok := n.to[real]; ok {
		return v
	}
	v := fmt.Sprintf("%s.%04d", n.group(), len(n.to)+1)
	n.to[real], n.from[v] = v, real
	return v
}

// real returns the client's ID of the masters' name id (id itself when it
// is none of the client's: "", or another client's).
func (n *waiterNames) real(id string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r, ok := n.from[id]; ok {
		return r
	}
	return id
}

// group is the client's group as the masters see it.
func (n *waiterNames) group() string { return fmt.Sprintf("c%d", n.client) }

// AcquireQueued is a waiter's acquire (redlock.QueueNode): the
// acquisition's CallAcquire, as AcquireFenced.
func (l *scriptLink) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, wt redlock.Waiter) (bool, int64, error) {
	sent := time.Now()
	l.w.sending(l.client, key, value)
	wt.ID = l.names.id(wt.ID)
	l.w.count(&l.w.queued)
	r := l.call(ctx, l.steer(CallAcquire, l.attempt(key, value, true)), func(dctx context.Context) reply {
		ok, fence, err := l.m.AcquireQueued(dctx, key, value, ttl, wt)
		l.afterAcquire(key, value, sent, ok, err)
		l.entered(key, wt.ID, value, ok, err)
		if err == nil && key == scriptName {
			// ctx is the caller's: ended, the call is a late copy.
			l.lined(key, wt, ok, ctx.Err() != nil)
		}
		return reply{ok: ok, fence: fence, err: err}
	})
	return r.ok, r.fence, r.err
}

// lined records what a waiter's acquire that applied did in the line: a
// fair waiter that took the key left the line (Left); an acquire refused
// while another value holds the key, the waiter in line, is Queued; one
// refused while the key is free is Refused, with the line as the master has it
// now (read right after the acquire, at the same instant of the bubble's
// clock).
func (l *scriptLink) lined(key string, wt redlock.Waiter, ok, late bool) {
	at := l.w.at(time.Now())
	switch {
	case ok && wt.Fair:
		l.w.record(history.Event{Client: l.client, Kind: history.Left, At: at, Lock: key, Token: wt.ID, Node: l.master, Note: "acquired"})
	case !ok:
		line := l.m.Line(key)
		if _, held := l.m.Keys()[key]; held {
			if slices.Contains(line, wt.ID) {
				l.w.record(history.Event{Client: l.client, Kind: history.Queued, At: at, Lock: key, Token: wt.ID, Node: l.master, Late: late})
			}
			return
		}
		l.w.record(history.Event{Client: l.client, Kind: history.Refused, At: at, Lock: key, Token: wt.ID, Node: l.master, Line: line, Late: late})
		l.w.log("c%d's waiter %s refused the free key on m%d (line %s, late %v)", l.client, wt.ID, l.master, strings.Join(line, " "), late)
	}
}

// LeaveQueue takes a waiter out of the line (redlock.QueueNode): a
// CallLeave, the Seq-th the client sends to the master.
func (l *scriptLink) LeaveQueue(ctx context.Context, key string, wt redlock.Waiter) error {
	wt.ID = l.names.id(wt.ID)
	sc := ScriptCall{}
	if key == scriptName {
		sc = l.steer(CallLeave, 0)
	}
	r := l.call(ctx, sc, func(dctx context.Context) reply {
		err := l.m.LeaveQueue(dctx, key, wt)
		if err == nil {
			l.unlined(key, wt.ID)
		}
		if err == nil && key == scriptName {
			l.w.record(history.Event{Client: l.client, Kind: history.Left, At: l.w.at(time.Now()), Lock: key, Token: wt.ID, Node: l.master, Note: "LeaveQueue"})
		}
		return reply{err: err}
	})
	l.leaveRefused(key, wt.ID, r)
	return r.err
}

// Watch subscribes to the master's release notifications
// (redlock.QueueNode.Watch): a CallWatch, which listens from its ApplyAt (a
// release before then goes unheard) or never (DropRequest: it fails at
// ctx's end); notifications arrive at once.
func (l *scriptLink) Watch(ctx context.Context, key, group string, fn func(next string)) (stop func(), err error) {
	sc := ScriptCall{}
	if key == scriptName {
		sc = l.steer(CallWatch, 0)
	}
	if group != "" {
		group = l.names.group()
	}
	var wait time.Duration
	if sc.ApplyAt > 0 {
		wait = time.Until(l.w.t0.Add(sc.ApplyAt))
	}
	if sc.DropRequest || wait > 0 {
		var after <-chan time.Time // nil: never
		if !sc.DropRequest {
			t := time.NewTimer(wait)
			defer t.Stop()
			after = t.C
		}
		select {
		case <-after:
		case <-ctx.Done():
			return nil, l.ctxErr(ctx)
		}
	}
	return l.m.Watch(ctx, key, group, func(msg string) {
		l.w.count(&l.w.notified)
		if msg == wire.Resync {
			fn(msg)
			return
		}
		// The waiter's ID renamed back, the value a hand-over carries kept.
		next, value := wire.ParseGrant(msg)
		if next = l.names.real(next); value != "" {
			next = wire.Grant(next, value)
		}
		fn(next)
	})
}
