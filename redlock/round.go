package redlock

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

// call is one operation on one node. Its fields are final once it has
// finished (finished, wait).
type call struct {
	mu   sync.Mutex
	fin  bool          // under mu: the call has finished
	wake chan struct{} // under mu: made by the first wait before the end, closed by finish
	// thens, under mu: what runs once the call has finished (then), on
	// the goroutine that finishes it.
	thens []func()
	// err is nil when the node said yes, the operation's "no" sentinel when
	// it said no, else why the call failed.
	err error
	// sent: a request may have reached the server. Set under mu (send),
	// so that drop either finds it set or keeps it from being set.
	sent bool
	// dropped, under mu: the call's waiter left the lines before the call
	// was sent (requeue): it is never sent (send).
	dropped bool
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
	// left counts the calls sharing the round's deadline still running;
	// the last one to finish cancels it.
	left atomic.Int32
	// running counts the calls not finished; the last one to finish drops
	// an Unlock's round from the client's releasing (o.unlock).
	running atomic.Int32
	cancel  context.CancelFunc
	timers  *timerPool // the client's

	dl deadlineCtx // the shared deadline when ctx cannot end (deadline.go)
	o  op          // the operation, for the workers
	// ids: set on a vote's round, whose quorum counts only if every node
	// whose yes it counted is in ids' identified set when it is reached
	// (identity.go, allIdentified).
	ids *Client

	// Up to smallRound nodes, the calls live in the round (one allocation).
	slab  [smallRound]call
	slabp [smallRound]*call
}

// smallRound is the most nodes whose calls are kept inside the round.
const smallRound = 7

// finished ends a call that shared the round's deadline.
func (r *round) finished() {
	if r.left.Add(-1) == 0 { // the round's last call on the shared deadline is done
		if r.cancel != nil {
			r.cancel()
		} else {
			r.dl.stop()
		}
	}
}

// op describes one operation for fanout.
type op struct {
	timeout time.Duration
	// no is the per-node error of a node that answered no.
	no error
	// before, when set, gives for each node calls that must finish first:
	// up to two rounds' (an acquire's release waits for the acquire; an
	// acquire waits for the last Unlock's release of its lock, see
	// releasing, and for its fair waiter's leave).
	before [2][]*call
	// unlock: the round is an Unlock's release, kept in the client's
	// releasing until its last call finishes.
	unlock bool
	// inline: with one node, its call may run on the caller's goroutine:
	// the caller waits for it anyway, and the call's context ends when
	// the caller's does.
	inline bool
	// skip, when set, reports nodes that need no call; they count as "no"
	// without being contacted.
	skip func(i int) bool
	// busy, when set, is called for a node skipped because of the cap.
	busy func(i int, m *member)
	// do performs the operation on one node: yes or no, or an error.
	do func(ctx context.Context, i int, m *member) (bool, error)
	// exec, when set, stands for skip, busy and do: one value instead of
	// three closures on the hot path (acquire, release).
	exec opExec
	// vote: a yes is a vote for holding the lock (acquire, extend), which
	// the restart quarantine may refuse to count.
	vote bool
	// node and lock describe each node call to the client's Observer.
	node Op
	lock *LockInfo // a pointer: op stays small enough for closures to copy (no allocation)
}

// opExec is an op's per-node behaviour (see op.skip, op.busy and op.do).
type opExec interface {
	skip(i int) bool
	busy(i int, m *member)
	do(ctx context.Context, i int, m *member) (bool, error)
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
// first wait for another (o.before, not finished when the round starts) or
// for its node's first contact, or when it starts more than lateStart after
// the round (a starved scheduler): no call has less than o.timeout -
// lateStart.
//
// A call that waits for nothing and that o skips (its node needs no call)
// is decided at once, on the caller's goroutine: no worker, and no share of
// the deadline, which a round of such calls only does without. A call that
// is not a vote and waits for another has no worker until that one has
// finished (behind), and none at all when o skips it then.
//
// Up to smallRound nodes the round and its calls are one allocation; each
// call's goroutine is the other per-node cost.
func (c *Client) fanout(ctx context.Context, o op) *round {
	n := len(c.members)
	r := &round{
		start:   time.Now(),
		timeout: o.timeout,
		replies: make(chan int, n),
		timers:  &c.timers,
	}
	var slab []call
	if n <= smallRound {
		slab, r.calls = r.slab[:n], r.slabp[:n]
	} else {
		slab, r.calls = make([]call, n), make([]*call, n)
	}
	var wbuf, sbuf [smallRound]bool
	waits := wbuf[:0] // the call waits for o.before: no shared deadline
	skips := sbuf[:0] // the call needs no node call (o.skip), known now
	if n > smallRound {
		waits, skips = make([]bool, 0, n), make([]bool, 0, n)
	}
	waits, skips = waits[:n], skips[:n]
	shared := 0
	for i := range slab {
		r.calls[i] = &slab[i]
		waits[i] = o.waits(i)
		// A call that waits for nothing and needs no node call is
		// decided here, as runCall would decide it: no worker, no
		// deadline (a rollback's nodes that refused the acquire).
		skips[i] = !waits[i] && o.skips(i)
		if !waits[i] && !skips[i] {
			shared++
		}
	}
	var deadline context.Context
	if shared > 0 {
		if ctx.Done() == nil {
			// A ctx that never ends (Background, or values only): the
			// round's own deadline context, kept in the round.
			r.dl.init(ctx, r.start.Add(o.timeout))
			deadline = &r.dl // r.cancel stays nil: finished stops r.dl
		} else {
			deadline, r.cancel = context.WithDeadline(ctx, r.start.Add(o.timeout))
		}
		r.left.Store(int32(shared))
	}
	r.o = o
	if o.vote && !c.cfg.knobs.VoteSetUnchecked { // test-only: the old rule
		r.ids = c
	}
	r.running.Store(int32(n))
	if n == 1 && o.inline && !skips[0] {
		// One node: its call runs on the caller's goroutine (no handoff
		// to a worker and back), before fanout returns.
		c.work.add() // done by runWaiting or runShared
		if waits[0] {
			c.runWaiting(ctx, r, 0, r.o)
		} else {
			c.runShared(ctx, deadline, r, 0, r.o)
		}
		return r
	}
	for i := range n {
		switch {
		case skips[i]:
			r.calls[i].skip(o.no)
			c.finish(r, i)
		case waits[i] && !o.vote:
			c.work.add() // done by behind
			c.behind(task{r: r, i: i, ctx: ctx, waits: true})
		default:
			c.spawn(task{r: r, i: i, ctx: ctx, deadline: deadline, waits: waits[i]})
		}
	}
	return r
}

// behind runs t, a call that is not a vote, once its node's calls in
// o.before have finished, with no goroutine waiting for them meanwhile: it
// is registered on the first of those still running (call.then), and the
// goroutine that finishes that one runs behind again. Once they have all
// finished, a call that o skips then (a release after an acquire that said
// no; a waiter's leave where its release did the removal) is decided on
// that goroutine, as fanout decides one skipped at once; any other goes to
// a worker. Most calls made behind others need no node call: an Unlock's
// removals of a waiter that held with hand-overs, the removals after a
// hold, the releases of an attempt's refusals that came after its
// decision.
func (c *Client) behind(t task) {
	for _, b := range t.r.o.before {
		if b != nil && b[t.i].then(func() { c.behind(t) }) {
			return // behind runs again when b[t.i] finishes
		}
	}
	defer c.work.done()
	if t.r.o.skips(t.i) {
		t.r.calls[t.i].skip(t.r.o.no)
		c.finish(t.r, t.i)
		return
	}
	c.spawn(t) // runWaiting: every call it waits for has finished
}

// skips reports whether node i needs no call (op.skip, op.exec's skip).
func (o *op) skips(i int) bool {
	return (o.exec != nil && o.exec.skip(i)) || (o.skip != nil && o.skip(i))
}

// skip records that the call's node needed none: it counts as a "no".
func (cl *call) skip(no error) {
	cl.replied = true
	cl.skipped = true
	cl.err = no
}

// task is one node call of a round, for a worker.
type task struct {
	r        *round
	i        int
	ctx      context.Context
	deadline context.Context // the round's shared deadline, nil when the call waits
	waits    bool
}

// idleWorker is how long a worker waits for its next task before it ends.
// It is short: a worker is kept for the next round of a busy client, and a
// client that is never closed leaves no goroutine behind for long.
const idleWorker = 50 * time.Millisecond

// spawn hands t to an idle worker of the client, or starts a worker for it:
// the goroutines (and their grown stacks) of one round serve the next.
func (c *Client) spawn(t task) {
	c.work.add() // done by run
	select {
	case c.tasks <- t:
	default:
		go c.worker(t)
	}
}

// worker runs t, then the tasks handed to it, until it has been idle for
// idleWorker or the client is closing.
func (c *Client) worker(t task) {
	var idle *time.Timer
	for {
		c.run(t)
		if idle == nil {
			idle = time.NewTimer(idleWorker)
		} else {
			idle.Reset(idleWorker)
		}
		select {
		case t = <-c.tasks:
		case <-idle.C:
			return
		case <-c.closing:
			idle.Stop()
			return
		}
	}
}

// run runs one task, under the profiler labels of its caller's context (a
// goroutine started per call inherited its caller's; a worker serves many
// callers).
func (c *Client) run(t task) {
	pprof.SetGoroutineLabels(t.ctx)
	if t.waits {
		c.runWaiting(t.ctx, t.r, t.i, t.r.o)
	} else {
		c.runShared(t.ctx, t.deadline, t.r, t.i, t.r.o)
	}
}

// runShared runs call i of r on the round's shared deadline, unless it
// starts too late for it.
func (c *Client) runShared(ctx, deadline context.Context, r *round, i int, o op) {
	defer c.work.done()
	cl := r.calls[i]
	if time.Since(r.start) > lateStart {
		deadline = nil // the call makes its own
	}
	cl.err = c.callNode(ctx, deadline, i, cl, o)
	r.finished()
	c.finish(r, i)
}

// finish marks call i of r finished and hands it to r's decision.
func (c *Client) finish(r *round, i int) {
	r.calls[i].finish()
	r.replies <- i
	if r.running.Add(-1) == 0 && r.o.unlock {
		c.releasing.forget(r.o.lock.Name, r)
	}
}

// waits reports whether node i's call must wait for a call of o.before
// still running.
func (o *op) waits(i int) bool {
	for _, b := range o.before {
		if b != nil && !b[i].finished() {
			return true
		}
	}
	return false
}

// runWaiting runs call i of r once o.before[i] has finished, on a deadline
// of its own.
func (c *Client) runWaiting(ctx context.Context, r *round, i int, o op) {
	defer c.work.done()
	cl := r.calls[i]
	if o.vote {
		// A vote waits for the node's earlier calls (the last Unlock's
		// release; a fair waiter's leave) no longer than its node timeout,
		// and is then not sent: a node that is slow to release is not
		// asked, and a hung one builds no chain of calls each waiting for
		// the one before.
		if !o.waitBefore(ctx, i, o.timeout, r.timers) {
			cl.err = errBehind
			c.report(ctx, i, o, errBehind, 0)
			c.finish(r, i)
			return
		}
	} else {
		for _, b := range o.before {
			if b != nil {
				b[i].wait() // bounded by that call's own deadline
			}
		}
	}
	cl.err = c.callNode(ctx, nil, i, cl, o)
	c.finish(r, i)
}

// errBehind is the result of a vote not sent because the node's earlier
// call had not finished within the node timeout.
var errBehind = fmt.Errorf("%w: the node's previous call on this lock is still running", ErrNodeBusy)

// waitBefore waits up to limit, or until ctx ends, for node i's calls in
// o.before, and reports whether they all finished. Its timer comes from
// tp.
func (o *op) waitBefore(ctx context.Context, i int, limit time.Duration, tp *timerPool) bool {
	var t *time.Timer
	defer func() {
		if t != nil {
			tp.put(t)
		}
	}()
	for _, b := range o.before {
		if b == nil {
			continue
		}
		ch := b[i].done()
		if ch == nil {
			continue
		}
		if t == nil {
			t = tp.get(limit)
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// errLeftLine is the result of an acquire not sent because its waiter had
// left the lines first (requeue, call.drop).
var errLeftLine = fmt.Errorf("%w: its waiter left the line before the call was sent", ErrNodeBusy)

// send marks the call sent, just before its request goes out, unless drop
// came first.
func (cl *call) send() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.dropped {
		return false
	}
	cl.sent = true
	return true
}

// drop keeps a call that has not been sent yet (it waits for its node's
// identification, its in-flight slot or an earlier call) from ever being
// sent; a call already sent is not affected.
func (cl *call) drop() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if !cl.fin && !cl.sent {
		cl.dropped = true
	}
}

// lateStart is how late after its round a call may start and still share
// the round's deadline.
const lateStart = time.Millisecond

// finish marks the call finished (its fields are final) and wakes its
// waiters.
func (cl *call) finish() {
	cl.mu.Lock()
	cl.fin = true
	if cl.wake != nil {
		close(cl.wake)
	}
	then := cl.thens
	cl.thens = nil
	cl.mu.Unlock()
	for _, fn := range then {
		fn()
	}
}

// then registers fn to run once the call has finished, on the goroutine
// that finishes it, and reports true; it reports false, and does not run
// fn, when the call has finished already.
func (cl *call) then(fn func()) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.fin {
		return false
	}
	cl.thens = append(cl.thens, fn)
	return true
}

// finished reports whether the call has finished.
func (cl *call) finished() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.fin
}

// unanswered reports whether a finished call was sent and its server did
// not answer: its request may still be on the network, and take effect
// later (a late copy).
func (cl *call) unanswered() bool {
	return cl.sent && !cl.replied && !errors.Is(cl.err, ErrNotSent)
}

// wait returns once the call has finished.
func (cl *call) wait() {
	if ch := cl.done(); ch != nil {
		<-ch
	}
}

// done returns a channel closed when the call finishes, or nil when it has
// finished. The channel is made only when a call is waited for before its
// end (a release behind a straggling acquire): a round's calls cost no
// channel each.
func (cl *call) done() <-chan struct{} {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.fin {
		return nil
	}
	if cl.wake == nil {
		cl.wake = make(chan struct{})
	}
	return cl.wake
}

// callNode runs o on node i and reports it to the client's Observer.
// shared, when set, is the round's deadline context (a child of ctx), used
// when the node was identified already.
func (c *Client) callNode(ctx, shared context.Context, i int, cl *call, o op) error {
	if c.obs == nil {
		return c.runCall(ctx, shared, i, cl, o)
	}
	start := time.Now()
	err := c.runCall(ctx, shared, i, cl, o)
	if !cl.skipped {
		c.report(ctx, i, o, err, time.Since(start))
	}
	return err
}

// report tells the client's Observer, if any, of node i's call of o.
func (c *Client) report(ctx context.Context, i int, o op, err error, took time.Duration) {
	if c.obs == nil {
		return
	}
	c.obs.NodeCall(ctx, NodeEvent{Lock: *o.lock, Op: o.node, Node: c.members[i].addr, Index: i, Took: took, Err: err})
	c.noteDenied(ctx, i, err)
}

// runCall is callNode without the report.
func (c *Client) runCall(ctx, shared context.Context, i int, cl *call, o op) error {
	m := c.members[i]
	if o.skips(i) {
		cl.skip(o.no)
		return o.no
	}
	if err := ctx.Err(); err != nil {
		return err // never sent: the caller had already given up
	}
	if !m.tryTake(c.cfg.maxInFlight) {
		if o.exec != nil {
			o.exec.busy(i, m)
		} else if o.busy != nil {
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
	if !cl.send() {
		return errLeftLine
	}
	var yes bool
	var err error
	if o.exec != nil {
		yes, err = o.exec.do(cctx, i, m)
	} else {
		yes, err = o.do(cctx, i, m)
	}
	if err != nil {
		// A vote the server refused before it changed anything was
		// answered: it needs no release and leaves no late copy.
		cl.replied = o.vote && unrun(err) && !c.cfg.knobs.ErrorReplyMayApply
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
	t       tally // the votes per set of the quorum
	// held: the quorum said yes; at is the time its last yes arrived (zero
	// if it never did).
	held bool
	at   time.Time
	// answered[i] says node i's call had finished by then.
	answered []bool
}

// wait collects replies until q said yes, or until so many said no or
// failed that q can no longer be reached, or every call's deadline (plus
// extra and a grace period for scheduling) has passed. ctx only ends the
// wait early; the calls carry their own deadlines.
func (r *round) wait(ctx context.Context, q *quorum, extra time.Duration) decision {
	d := decision{answered: make([]bool, len(r.calls))}
	grace := r.timers.get(r.timeout + extra + 20*time.Millisecond)
	defer r.timers.put(grace)
	for !d.held && !q.out(&d.t) {
		select {
		case i := <-r.replies:
			d.count(i, r.calls[i], q)
			if d.held && r.ids != nil && !r.ids.allIdentified(func(i int) bool { return r.yesBy(d, i) }) {
				// A node whose yes counted left the identified set since
				// (a read of it failed in a pass), and another may have
				// joined without it being read: they may be one server.
				// The attempt fails; the next goes on with the set as it is.
				d.held, d.at = false, time.Time{}
				return d
			}
		case <-grace.C:
			return d
		case <-ctx.Done():
			return d
		}
	}
	return d
}

func (d *decision) count(i int, cl *call, q *quorum) {
	d.answered[i] = true
	q.add(&d.t, i, cl.err == nil)
	if cl.err != nil {
		d.no++
		return
	}
	d.yes++
	if !d.held && q.reached(&d.t) {
		d.held, d.at = true, time.Now()
	}
}

// yesBy reports whether node i had said yes by decision d (its call's
// fields are final once d counted it).
func (r *round) yesBy(d decision, i int) bool {
	return d.answered[i] && r.calls[i].err == nil
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

// timerPool recycles the timers of wait, settle, waitBefore and a waiting
// Lock call's backoff (two or three per cycle). Since Go 1.23 a stopped or reset timer never delivers a stale
// value, so a recycled timer needs no draining. Each Client has its own, so
// that a timer never leaves the testing/synctest bubble its client runs in.
type timerPool struct{ p sync.Pool }

// get returns a running timer that fires after d.
func (tp *timerPool) get(d time.Duration) *time.Timer {
	if t, ok := tp.p.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// put stops t and keeps it for get.
func (tp *timerPool) put(t *time.Timer) {
	t.Stop()
	tp.p.Put(t)
}
