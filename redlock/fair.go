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
// releases (QueueNode.Watch), a release wakes only that waiter. TryLock is
// fair too: it succeeds only when no live waiter is ahead of it (its own
// entry lives 1ms). A waiting Lock call's entry lives for max(1s, 4 ×
// (retry backoff maximum + node timeout)) after each of its attempts, and
// a waiter that gave up stays out of the queue as long: a waiter that
// dies, or whose removal is lost, holds the queue up at most that long,
// unless a release in that time hands it the key, which then stays, as a
// crashed holder's does, for the TTL of its last acquire (docs/handoff.md).
// Order is by each client's clock at the call's start (ties broken at
// random), so it is as fair as the clients' clocks agree. Every client of a
// lock name should use it: a client without it takes the lock whenever it
// is free, ahead of the queue. The queue only makes nodes refuse acquires
// they would otherwise grant, so it changes none of the lock's safety.
// Applies to NewMutex (fenced or not); every node must implement QueueNode
// (redisnode and memnode do). Default: off.
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
	// token and value are the latest attempt's (a call may hold with the
	// keys releases handed it at that value: hold).
	token, val string
	// in: node i's line may hold the waiter under its current ID (a
	// finished call of one of its attempts was refused, or not answered);
	// nil while none may.
	in []bool
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

// attempt returns what an attempt with token and value sends: a copy of
// p's Waiter (calls of the attempt may outlive it, and requeue changes
// p.w.ID before the next) and the calls its calls must wait for (the
// requeue's removals).
func (p *place) attempt(token, value string) (*Waiter, []*call) {
	if p == nil {
		return nil, nil
	}
	p.token, p.val = token, value
	w, after := p.w, p.after
	p.after = nil
	return &w, after
}

// tried records an attempt's round r, whatever its outcome: the nodes
// whose finished call may have entered the waiter in their line (it
// refused the attempt, or the call was sent and not answered). A call still
// running is judged once it finishes, by leave (the next attempt requeues
// after it: see requeue). Such an entry records the attempt's value, and a
// release hands the key to the line's first waiter at its recorded value
// (docs/handoff.md), so a stale one would be handed a key its call never
// releases: it must be taken out when the call ends.
func (p *place) tried(r *round) {
	if p == nil {
		return
	}
	p.last = r
	for i, cl := range r.calls {
		if cl.finished() && mayEnter(cl) {
			if p.in == nil {
				p.in = make([]bool, len(r.calls))
			}
			p.in[i] = true
		}
	}
}

// mayEnter reports whether a finished acquire call may have left its
// waiter in the node's line: refused because the lock was held, or sent
// and not answered.
func mayEnter(cl *call) bool { return errors.Is(cl.err, ErrNodeTaken) || cl.unanswered() }

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
	r := p.last
	p.tried(r) // its calls that finished after the attempt was decided count now
	p.last = nil
	if k := p.m.c.cfg.knobs; (p.w.Fair && k.NoFairRequeue) || (!p.w.Fair && k.NoPlainRequeue) {
		return
	}
	late := false
	for _, cl := range r.calls {
		late = late || !cl.finished() || cl.unanswered()
	}
	if !late {
		return
	}
	// The removal goes out now, without waiting for the attempt's calls.
	// A call of theirs already sent is a copy on the network, which the
	// removal's tombstone stops; one not sent yet (waiting for its node's
	// first identification, up to identifyTimeout, far beyond the
	// attempt) is never sent: sent after the removal had applied, it would
	// meet no tombstone where the node restarted empty in between, and
	// enter the departed waiter with a value record that a release then
	// hands the key to (an orphan until its TTL; the simulator's late
	// family, seed 59066).
	if !p.m.c.cfg.knobs.RequeueSendsUnsent { // test-only switch
		for _, cl := range r.calls {
			cl.drop()
		}
	}
	old := p.w
	p.w.ID = p.m.c.waiterID()
	p.in = nil // the old ID leaves every line
	p.after = p.m.leaveQueue(ctx, old, nil, nil).calls
}

// leave takes p out of the lines that may hold it, when its Lock call
// ends: after the acquisition acq (the call's last attempt, which
// succeeded), or when the call gave up (acq nil). A node needs the removal
// when an earlier attempt's call there may have entered p (tried), or when
// the last attempt's call there, once finished, may have (mayEnter), and
// did not leave the key with p's value (granted: the node took p out
// itself). Each removal waits for that last call. A TryLock's 1ms entry
// needs none. When no node can need one, there is no round.
func (p *place) leave(ctx context.Context, acq *round) {
	if p == nil || p.w.TTL <= time.Millisecond {
		return
	}
	last := p.last
	need := func(i int) bool {
		if p.m.c.members[i].queue == nil {
			return false // it keeps no line
		}
		if last == nil || i >= len(last.calls) {
			return p.in != nil && p.in[i]
		}
		cl := last.calls[i]
		if acq != nil && granted(cl) {
			return false
		}
		return (p.in != nil && p.in[i]) || mayEnter(cl)
	}
	needed := false
	for i := range p.m.c.members {
		if last != nil && !last.calls[i].finished() || need(i) {
			needed = true
			break
		}
	}
	if needed {
		p.m.leaveQueue(ctx, p.w, last, func(i int) bool { return !need(i) })
	}
}

// lined reports whether the call waits in the nodes' lines with a value
// record a release hands the key at (not a fair TryLock's 1 ms entry).
func (p *place) lined() bool { return p != nil && p.w.TTL > time.Millisecond }

// value is the latest attempt's value, "" without a place.
func (p *place) value() string {
	if p == nil {
		return ""
	}
	return p.val
}

// lastCalls returns the latest attempt's calls, nil without a place or
// before the first attempt ended.
func (p *place) lastCalls() []*call {
	if p == nil || p.last == nil {
		return nil
	}
	return p.last.calls
}

// running returns a channel closed when the first call of the latest
// attempt that has not finished does; nil (never ready) when every one has,
// or without a place or an attempt.
func (p *place) running() <-chan struct{} {
	if p == nil || p.last == nil {
		return nil
	}
	for _, cl := range p.last.calls {
		if ch := cl.done(); ch != nil {
			return ch
		}
	}
	return nil
}

// holdsOnGrants reports whether m's Lock calls may hold the lock with the
// keys releases handed them (docs/handoff.md, the hold on grants): a
// mutex's, plain or fair, without fencing (a hand-over carries no fencing
// counter: a fenced call takes the keys over with a round, which writes
// its token back), on a client without a restart quarantine on any of its
// nodes (a hand-over is a vote made by whichever run of the server holds
// the line then: counting it would need that server's identity read after
// it, as checkQuarantine reads it after a yes; the take-over round does
// that).
func (m *Mutex) holdsOnGrants() bool {
	line, _ := m.kind.inLine()
	c := m.c
	if !line || m.cfg.fencing || c.cfg.knobs.NoGrantHold {
		return false
	}
	if c.cfg.quarantine && !c.cfg.knobs.NoQuarantine && !c.cfg.knobs.GrantHoldQuarantined { // test-only switch
		for _, mb := range c.members {
			if !mb.durable {
				return false
			}
		}
	}
	return true
}

// hold makes the lease of a call that holds with hand-overs: counted names
// the nodes that refused its latest attempt because the lock was held and
// then reported handing its waiter the key at that attempt's value, a
// quorum of them (waiting.held). Each such node holds the key at that
// value, written after the attempt began, for the attempt's TTL: the
// lease's validity runs from the attempt's start, as the attempt's own
// would have. It returns nil when too little of it is left (the call then
// makes its next attempt, which takes the keys over). The call then leaves
// the lines of the other nodes (a key handed there is released) and stays
// in those it counted: the lease's release there takes it out
// (release.lua). Its Unlock releases on the counted nodes and wherever the
// attempt's calls may hold.
func (p *place) hold(ctx context.Context, renew float64, counted []bool) *Lease {
	if p == nil || counted == nil || p.last == nil || ctx.Err() != nil {
		return nil
	}
	m, r := p.m, p.last
	if validity := time.Until(m.deadline(r.start)); validity <= m.cfg.minValidity || validity <= 0 {
		return nil
	}
	// As for a round's yes: none on a closing client, nor after a duplicate
	// server was found, nor from a node not in the identified set, all of
	// them at one moment (identity.go, allIdentified).
	if m.c.usable() != nil || m.c.dupErr.Load() != nil {
		return nil
	}
	if !m.c.allIdentified(func(i int) bool { return i < len(counted) && counted[i] }) {
		return nil
	}
	held := &round{start: r.start, calls: make([]*call, len(r.calls))}
	d := decision{held: true, at: time.Now(), answered: make([]bool, len(r.calls))}
	for i, cl := range r.calls {
		held.calls[i] = cl
		if counted[i] {
			held.calls[i] = &call{fin: true, sent: true, replied: true}
			d.yes++
			d.answered[i] = true
		}
	}
	lease := newLease(m, p.token, p.val, held, d, 0)
	lease.holds = 1 // an exclusive lock's: the only kinds in a line
	w := p.w
	lease.waiter, lease.counted = &w, counted
	// Its calls that finished after it was decided count now.
	p.tried(r)
	if m.c.cfg.knobs.GrantHoldLeaveAll { // test-only switch: leave every line
		p.leave(ctx, nil)
		return lease.start(renew)
	}
	p.last = held
	p.leave(ctx, held)
	return lease.start(renew)
}

// granted reports whether a finished acquire call left the key with its
// value on its node: the node said yes (its vote may not have counted).
func granted(cl *call) bool { return cl.err == nil || cl.held }

// leaveQueue takes q out of the line in the background, on every node
// that keeps one, or on those skip does not name; with after, each call
// waits for the node's call of that round (an acquire), so that it runs
// after it, and skip is asked then. It is bounded by the release timeout
// and does not depend on ctx ending (a waiter left behind would hold the
// line up for its entry's TTL, and be handed keys nobody releases); Close
// waits for it. A call the in-flight cap keeps from being sent, or that
// fails, is retried as a release is (the node's backlog).
func (m *Mutex) leaveQueue(ctx context.Context, q Waiter, after *round, skip func(i int) bool) *round {
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
	if after != nil {
		o.before = [2][]*call{after.calls}
	}
	if skip != nil {
		o.skip = skip
	}
	return c.fanout(ctx, o)
}
