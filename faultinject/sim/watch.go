package sim

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
)

// Watch implements redlock.QueueNode's Watch over the master's own Watch: the
// subscription is always established (a real node subscribes again after a
// reconnect), and the link's weather acts on each notification, as on a
// reply from the master:
//
//   - it is lost while the client is cut from the master (Partition,
//     Isolate), before an alias address is reachable, and with the plan's
//     reply-drop chance (Net.DropReplyP); a watch that lost one while
//     the link was cut hears wire.Resync when it heals (healed), as a real
//     node's watch does once it has subscribed again;
//   - otherwise it arrives after a reply delay (Net.BaseMax, Net.SpikeMax),
//     so notifications can come late and out of order.
//
// The weather of notifications is drawn from a stream of its own
// (opNotify, no worker: they belong to no worker's call), so watching
// changes no other call's draws. A notification still on its way when
// stop is called is not delivered. Watch fails only as the master's Watch
// does (ctx ended, a malformed name).
func (l *link) Watch(ctx context.Context, key, group string, fn func(next string)) (stop func(), err error) {
	var stopped atomic.Bool
	deliver := func(next string) {
		if !stopped.Load() {
			l.w.count(&l.w.notified)
			fn(next)
		}
	}
	lost := func() { l.w.count(&l.w.lost) }
	cutOff := func() {
		lost()
		l.mu.Lock()
		if l.deaf == nil {
			l.deaf = map[*atomic.Bool]func(string){}
		}
		l.deaf[&stopped] = deliver
		l.mu.Unlock()
	}
	mstop, err := l.m.Watch(ctx, key, group, func(next string) {
		if l.w.isCut(l.client, l.master) {
			cutOff()
			return
		}
		if time.Now().Before(l.from) {
			lost()
			return
		}
		w := l.draw(context.Background(), opNotify)
		if w.dropRep {
			lost()
			return
		}
		if w.rep <= 0 {
			deliver(next)
			return
		}
		time.AfterFunc(w.rep, func() {
			if l.w.isCut(l.client, l.master) {
				cutOff()
				return
			}
			deliver(next)
		})
	})
	if err != nil {
		return nil, err
	}
	return func() {
		stopped.Store(true)
		mstop()
	}, nil
}

// healed is called when the client's link to the master is no longer cut:
// each watch that lost a notification meanwhile hears wire.Resync.
func (l *link) healed() {
	l.mu.Lock()
	deaf := l.deaf
	l.deaf = nil
	l.mu.Unlock()
	for _, deliver := range deaf {
		deliver(wire.Resync)
	}
}
