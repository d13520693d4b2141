package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
)

// WithFairQueue makes the lock go to waiting Lock calls in the order they
// began (docs/algorithm.md, "Fair queue"). Each Lock call waits in the line
// kept on every node (QueueNode), as without it, but a node grants the lock
// only to the first live waiter of its line; with nodes that report
// releases (QueueNode.Watch), a release wakes only that waiter. TryLock is fair too: it
// succeeds only when no live waiter is ahead of it (its own entry lives
// 1ms). A waiting Lock call's entry lives for max(1s, 4 × (retry backoff
// maximum + node timeout)) after each of its attempts, and a waiter that
// gave up stays out of the queue as long: a waiter that dies, or whose
// removal is lost, holds the queue up at most that long. Order is by each client's clock at the call's start (ties broken at random), so it is as fair as the
// clients' clocks agree. Every client of a lock name should use it: a
// client without it takes the lock whenever it is free, ahead of the queue.
// The queue only makes nodes refuse acquires they would otherwise grant, so
// it changes none of the lock's safety. Applies to NewMutex (fenced or
// not); every node must implement QueueNode (redisnode and memnode do).
// Default: off.
func WithFairQueue() LockOption { return func(l *lockConfig) { l.fair = true } }

// entryTTL is how long a waiter's entry in the nodes' line lives after its
// attempt: several of its longest backoffs, so a live waiter never drops
// out.
func (l *lockConfig) entryTTL(c clientConfig) time.Duration {
	return max(time.Second, 4*(l.retryMax+c.nodeTimeout))
}

// place is a Lock call's place in the nodes' waiting line across its
// attempts (docs/algorithm.md, "Waiting"): its Waiter, which every attempt
// sends (QueueNode.AcquireQueued), and what it must undo. A lock kind that
// waits in no line (a shared lock's hold) has none (nil, whose methods do
// nothing).
type place struct {
	m *Mutex
	w Waiter
	// last is the call's latest acquire round; after, when set, holds a
	// LeaveQueue of the entry's previous ID on each node, which the next
	// attempt's call to that node waits for (requeue).
	last  *round
	after []*call
	// entered: an attempt may have entered the line on some node (a node
	// refused it, or did not reply).
	entered bool
}

// place returns a new Lock call's place in the line, nil when the lock's
// kind waits in none, no node keeps a line, or for a TryLock (once) of a
// lock without WithFairQueue. A fair TryLock's entry need not outlive its one attempt:
// it lives 1ms, and no removal is sent (an entry left behind by a lost
// removal or a late copy of the acquire would otherwise sit ahead of every
// later waiter for a full entry TTL).
func (m *Mutex) place(once bool) *place {
	line, fair := m.kind.inLine()
	if !line || (once && !fair) || !slices.ContainsFunc(m.c.members, func(mb *member) bool { return mb.queue != nil }) {
		return nil
	}
	ttl := m.cfg.entryTTL(m.c.cfg)
	if once {
		ttl = time.Millisecond
	}
	return &place{m: m, w: Waiter{ID: m.c.waiterID(), Arrival: time.Now(), TTL: ttl, Fair: fair}}
}

// waiterID returns a new random waiter ID in the client's group: the
// group, ".", 24 hexadecimal digits. A release's notification naming it
// reaches this client's watch only (QueueNode.Watch).
func (c *Client) waiterID() string { return wire.NewWaiterID(c.group) }

// newGroup returns a client's random group: 8 hexadecimal digits.
func newGroup() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// id is p's waiter ID, "" without a place.
func (p *place) id() string {
	if p == nil {
		return ""
	}
	return p.w.ID
}

// attempt returns what an attempt sends: a copy of p's Waiter (calls of
// the attempt may outlive it, and requeue changes p.w.ID before the next)
// and the calls its calls must wait for (the requeue's removals).
func (p *place) attempt() (*Waiter, []*call) {
	if p == nil {
		return nil, nil
	}
	w, after := p.w, p.after
	p.after = nil
	return &w, after
}

// tried records an attempt's round r, whatever its outcome: whether a
// node may have entered the waiter in its line (it refused the attempt,
// the call was sent and not answered, or it is still running). Such an
// entry must be taken out when the call ends: it records the attempt's
// value, and a release hands the key to the line's first waiter at its
// recorded value (docs/handoff.md), so a stale entry would be handed a key
// its call never releases.
func (p *place) tried(r *round) {
	if p == nil {
		return
	}
	p.last = r
	for _, cl := range r.calls {
		if !cl.finished() || errors.Is(cl.err, ErrNodeTaken) || cl.unanswered() {
			p.entered = true
			return
		}
	}
}

// requeue readies p for its next attempt. A node that grants a waiter,
// or hands it the key at a release (docs/handoff.md), takes it out of its
// line and keeps no trace of it (no tombstone), so that when the attempt
// then fails (no quorum, rolled back) the next attempt enters it again at
// its first arrival, in its place. That is safe only while no earlier copy
// of the waiter's acquire can still reach a node: a late copy would enter
// a waiter that is gone (or holds the lock) and sit ahead of every later
// waiter until its entry expired, and a release would hand it a key its
// call never releases. So after an attempt with a call still running, or
// sent and not answered, the call goes on under a new ID with the same
// arrival, and its old ID leaves every line first, leaving the tombstone
// that stops such a copy (and releasing a key handed to it): the next
// attempt's call to each node waits for the removal there
// (TestFairWaiterGrantedThenRolledBack; model/queue.pml, NoFairRequeue and
// GrantPlainNoRequeue). Fair or not.
func (p *place) requeue(ctx context.Context) {
	if p == nil || p.last == nil {
		return
	}
	if k := p.m.c.cfg.knobs; (p.w.Fair && k.NoFairRequeue) || (!p.w.Fair && k.NoPlainRequeue) {
		return
	}
	r := p.last
	p.last = nil
	late := false
	for _, cl := range r.calls {
		late = late || !cl.finished() || cl.unanswered()
	}
	if !late {
		return
	}
	old := p.w
	p.w.ID = p.m.c.waiterID()
	p.after = p.m.leaveQueue(ctx, old, nil).calls
}

// leave takes p out of the line when it may have entered it (a fair waiter
// always: its entry must not hold the line up; a TryLock's 1ms entry
// never): after the acquisition acq on the nodes that did not grant it
// (those that did took p out themselves), or on every node when acq is nil
// (a Lock call that gave up). When every node that keeps a line had
// granted acq already, there is nothing to send (leaveQueue would skip
// every node): no round.
func (p *place) leave(ctx context.Context, acq *round) {
	if p != nil && (p.w.Fair || p.entered) && p.w.TTL > time.Millisecond && !p.m.grantedAll(acq) {
		p.m.leaveQueue(ctx, p.w, acq)
	}
}

// grantedAll reports whether acq's call to every node that keeps a line
// has finished and was granted (the node said yes, whether or not its vote
// counted): each took the waiter out of its line itself. False for a nil
// acq.
func (m *Mutex) grantedAll(acq *round) bool {
	if acq == nil {
		return false
	}
	for i, cl := range acq.calls {
		if m.c.members[i].queue != nil && !(cl.finished() && granted(cl)) {
			return false
		}
	}
	return true
}

// granted reports whether a finished acquire call left the key with its
// value on its node: the node said yes (its vote may not have counted).
func granted(cl *call) bool { return cl.err == nil || cl.held }

// leaveQueue takes q out of the line in the background, on every node, or,
// when acq is an acquisition that succeeded, on the nodes where it did not
// (those that granted it took q out themselves); each call waits for the
// node's acquire of acq, so that it runs after it. It is bounded by the
// release timeout and does not depend on ctx ending (a waiter left behind
// would hold the line up for its entry's TTL, and be handed keys nobody
// releases); Close waits for it. A call the in-flight cap keeps from being
// sent, or that fails, is retried as a release is (the node's backlog).
func (m *Mutex) leaveQueue(ctx context.Context, q Waiter, acq *round) *round {
	if ctx.Done() != nil { // a ctx that cannot end needs no detaching (as release's)
		ctx = context.WithoutCancel(ctx)
	}
	c := m.c
	pend := pendingRelease{key: m.name, value: "\n" + q.ID, kind: m.kind, lock: &m.info, leave: &q}
	o := op{
		timeout: c.cfg.releaseTimeout,
		no:      ErrNodeNotHeld,
		node:    OpLeave,
		lock:    &m.info,
		do: func(cctx context.Context, i int, mb *member) (bool, error) {
			err := mb.queue.LeaveQueue(cctx, m.name, q)
			if err != nil && !refusedRelease(err, c.cfg.knobs.NoBusyRetry) {
				c.queueRelease(ctx, i, pend)
			}
			return true, err
		},
		busy: func(i int, _ *member) { c.queueRelease(ctx, i, pend) },
		skip: func(i int) bool { return c.members[i].queue == nil }, // it keeps no line
	}
	if acq != nil {
		o.before = [2][]*call{acq.calls}
		o.skip = func(i int) bool {
			return m.c.members[i].queue == nil || granted(acq.calls[i])
		}
	}
	return c.fanout(ctx, o)
}
