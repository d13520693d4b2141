package redlock

import (
	"context"
	"sync/atomic"
	"time"
)

// call is one operation on one node. Its fields are final once done is
// closed.
type call struct {
	done chan struct{}
	// err is nil when the node said yes, the operation's "no" sentinel when
	// it said no, else why the call failed.
	err error
	// sent: a request may have reached the server.
	sent bool
	// replied: the server answered (yes or no), so the effect is known.
	replied bool
	// held: the server said yes, but the vote did not count (quarantine):
	// the key is there all the same.
	held bool
	// skipped: the node needed no call (op.skip); it was not contacted.
	skipped bool
}

// round is one operation fanned out to every node.
type round struct {
	start   time.Time
	timeout time.Duration
	calls   []*call
	replies chan int
}

// op describes one operation for fanout.
type op struct {
	timeout time.Duration
	// no is the per-node error of a node that answered no.
	no error
	// before, when set, gives for each node a call that must finish first.
	before []*call
	// skip, when set, reports nodes that need no call; they count as "no"
	// without being contacted.
	skip func(i int) bool
	// busy, when set, is called for a node skipped because of the cap.
	busy func(i int, m *member)
	// do performs the operation on one node: yes or no, or an error.
	do func(ctx context.Context, i int, m *member) (bool, error)
	// vote: a yes is a vote for holding the lock (acquire, extend), which
	// the restart quarantine may refuse to count.
	vote bool
	// node and lock describe each node call to the client's Observer.
	node NodeOp
	lock *LockInfo // a pointer: op stays small enough for closures to copy (no allocation)
}

// identifyTimeout bounds the first contact with a node (dial, TLS, AUTH and
// INFO), which a loaded machine can make slower than a node timeout. It does
// not delay a decision: a node still being identified is a straggler.
const identifyTimeout = time.Second

// fanout starts o on every node concurrently, each call bounded by
// o.timeout and by ctx. A node at the in-flight cap fails at once with
// ErrNodeBusy; a node whose server identity is not known yet is identified
// first (and fails, unsent, if that fails).
//
// The calls of a round start together, so they share one deadline (one
// timer per round, not per node) measured from the round's start. A call
// gets a deadline of its own, measured from when it is sent, when it must
// first wait for another (o.before, not finished yet) or for its node's
// first contact, or when it starts more than lateStart after the round (a
// starved scheduler): no call has less than o.timeout - lateStart.
func (c *Client) fanout(ctx context.Context, o op) *round {
	r := &round{
		start:   time.Now(),
		timeout: o.timeout,
		calls:   make([]*call, len(c.members)),
		replies: make(chan int, len(c.members)),
	}
	var shared context.Context
	finished := func() {}
	if allDone(o.before) {
		var cancel context.CancelFunc
		shared, cancel = context.WithDeadline(ctx, r.start.Add(o.timeout))
		var left atomic.Int32
		left.Store(int32(len(c.members)))
		finished = func() {
			if left.Add(-1) == 0 {
				cancel() // the round's last call is done
			}
		}
	}
	for i := range c.members {
		cl := &call{done: make(chan struct{})}
		r.calls[i] = cl
		c.work.add()
		go func() {
			defer c.work.done()
			if o.before != nil {
				<-o.before[i].done // bounded by that call's own deadline
			}
			deadline := shared // nil: the call makes its own
			if deadline != nil && time.Since(r.start) > lateStart {
				deadline = nil
			}
			cl.err = c.callNode(ctx, deadline, i, cl, o)
			finished()
			close(cl.done)
			r.replies <- i
		}()
	}
	return r
}

// lateStart is how late after its round a call may start and still share
// the round's deadline.
const lateStart = time.Millisecond

// allDone reports whether every call in calls has finished (true for none).
func allDone(calls []*call) bool {
	for _, cl := range calls {
		select {
		case <-cl.done:
		default:
			return false
		}
	}
	return true
}

// callNode runs o on node i and reports it to the client's Observer.
// shared, when set, is the round's deadline context (a child of ctx), used
// when the node was identified already.
func (c *Client) callNode(ctx, shared context.Context, i int, cl *call, o op) error {
	obs := c.obs
	if obs == nil {
		return c.runCall(ctx, shared, i, cl, o)
	}
	start := time.Now()
	err := c.runCall(ctx, shared, i, cl, o)
	if !cl.skipped {
		obs.NodeCall(ctx, NodeEvent{Lock: *o.lock, Op: o.node, Node: c.members[i].addr, Index: i, Vote: voteOf(err), Took: time.Since(start), Err: err})
	}
	return err
}

// runCall is callNode without the report.
func (c *Client) runCall(ctx, shared context.Context, i int, cl *call, o op) error {
	m := c.members[i]
	if o.skip != nil && o.skip(i) {
		cl.replied = true
		cl.skipped = true
		return o.no
	}
	if err := ctx.Err(); err != nil {
		return err // never sent: the caller had already given up
	}
	if !m.tryTake(c.cfg.maxInFlight) {
		if o.busy != nil {
			o.busy(i, m)
		}
		return ErrNodeBusy
	}
	defer m.give()
	cctx := shared
	// Only a vote needs the node identified; a release goes out whatever
	// became of its identity since the acquire (a client that found a
	// duplicate server must still clean up).
	if o.vote && !m.identified.Load() {
		if err := c.identify(ctx, i, max(o.timeout, identifyTimeout)); err != nil {
			return err
		}
		cctx = nil
	}
	if cctx == nil {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	cl.sent = true
	yes, err := o.do(cctx, i, m)
	m.lagging.Store(err != nil)
	if err != nil {
		return err
	}
	cl.replied = true
	if !yes {
		return o.no
	}
	if o.vote {
		if p := c.dupErr.Load(); p != nil {
			cl.held = true // a vote after a duplicate server was found never counts
			return *p
		}
		if err := c.checkQuarantine(cctx, i); err != nil {
			cl.held = true
			return err
		}
	}
	return nil
}

// decision is what a round had when it was decided.
type decision struct {
	yes, no int
	// at is the time the quorum-th yes arrived (zero if it never did).
	at time.Time
	// answered[i] says node i's call had finished by then.
	answered []bool
}

// wait collects replies until need nodes said yes, or until so many said no
// or failed that need can no longer be reached, or every call's deadline
// (plus extra and a grace period for scheduling) has passed. ctx only ends
// the wait early; the calls carry their own deadlines.
func (r *round) wait(ctx context.Context, need int, extra time.Duration) decision {
	n := len(r.calls)
	d := decision{answered: make([]bool, n)}
	grace := time.NewTimer(r.timeout + extra + 20*time.Millisecond)
	defer grace.Stop()
	for d.yes < need && d.no <= n-need {
		select {
		case i := <-r.replies:
			d.count(i, r.calls[i], need)
		case <-grace.C:
			return d
		case <-ctx.Done():
			return d
		}
	}
	return d
}

func (d *decision) count(i int, cl *call, need int) {
	d.answered[i] = true
	if cl.err != nil {
		d.no++
		return
	}
	d.yes++
	if d.yes == need {
		d.at = time.Now()
	}
}

// yesBy reports whether node i had said yes by decision d (its call's
// fields are final once d counted it).
func (r *round) yesBy(d decision, i int) bool {
	return d.answered[i] && r.calls[i].err == nil
}

// settle keeps collecting replies after a decision from the nodes in
// expected, for at most limit. Unlock uses it so that healthy nodes just
// behind the quorum are included while a known straggler is not waited for.
func (r *round) settle(ctx context.Context, d *decision, limit time.Duration, expected []bool) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		pending := false
		for i, a := range d.answered {
			pending = pending || (!a && expected[i])
		}
		if !pending {
			return
		}
		select {
		case i := <-r.replies:
			d.count(i, r.calls[i], len(r.calls)+1)
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// results returns every node's result as of the decision d: nodes that had
// not answered get ErrNoReply.
func (c *Client) results(r *round, d decision) []NodeResult {
	out := make([]NodeResult, len(r.calls))
	for i, cl := range r.calls {
		out[i] = NodeResult{Node: c.members[i].addr, Err: ErrNoReply}
		if d.answered[i] {
			out[i].Err = cl.err
		}
	}
	return out
}
