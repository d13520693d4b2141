package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
)

// Waiting: how a Lock call whose attempt failed waits for its next one
// (docs/algorithm.md, "Waiting"). A waiting type per call owns it: the
// backoff (WithRetryBackoff), the bound (WithMaxWait), the
// watch and the wake-up policy; the lock kind owns the call's place in the
// nodes' line (fair.go).
//
// It always sleeps its backoff (its longest one, up to a quarter of the
// TTL, when it holds on grants and a quorum refused it for a held lock:
// it hears its turn, so it does not poll; its ordinary one, from then,
// once a node hands it the key). When the nodes report releases
// (QueueNode.Watch), the client also keeps one watch per lock name while any of
// its Lock calls waits for that name (and for watchLinger after the last
// one stops). A node's release names the first waiter of its line
// (QueueNode), and only that waiter, in whichever client it is, counts the
// report: one wake-up per release across the clients. A report with no
// name (a shared lock's hold released) counts for the client's oldest
// waiting call. A call's sleep ends as soon as reports counted for it
// since its last attempt began come from nodes that refused that attempt
// because the lock was held (or had not replied when it was decided), and
// those nodes together with the ones that were free make a quorum (the
// reports of its own rollback, or of a node in quarantine, never wake it:
// no retry loop without a pause). A report that a release handed the
// waiter the key at its latest attempt's value, from a node that refused
// that attempt for a held lock, is more than news: once such reports make
// a quorum the call holds the lock with them, without another round
// (place.hold; docs/handoff.md, the hold on grants). The backoff stays the
// fallback for what is never reported: a lost notification, a key that
// expired, a waiter named that is gone, a node that cannot notify.

// waiting is one Lock call's waiting between its attempts.
type waiting struct {
	m      *Mutex
	p      *place
	giveUp time.Time // WithMaxWait: no attempt starts after it
	w      *watch    // nil until the first failed attempt, or without one
	wt     *waiter
	began  time.Time // the latest attempt's start
}

// waiting returns how a Lock call of m with place p waits.
func (m *Mutex) waiting(p *place) *waiting {
	wg := &waiting{m: m, p: p}
	if m.cfg.maxWait > 0 {
		wg.giveUp = time.Now().Add(m.cfg.maxWait)
	}
	return wg
}

// begin is called as an attempt begins: from now on only releases reported
// after it wake the call. A call with a place in the line joins the lock
// name's watch at its first attempt when the client has one listening
// already (another call's, or one that lingers), so that the releases
// reported while that attempt runs (a hand-over to it among them) count.
func (wg *waiting) begin() {
	wg.began = time.Now()
	if wg.w == nil && wg.p != nil {
		wg.w, wg.wt, _ = wg.m.waitFor(context.Background(), wg.p.id(), true)
	}
	if wg.w != nil {
		wg.w.reset(wg.wt, wg.p.id())
	}
}

// after decides, once attempt k failed with err, whether the call makes
// another attempt, and waits for it: it returns nil when the next attempt
// should start (or the call may hold with hand-overs: held), and the
// call's error otherwise (err itself, wrapping ctx.Err() when ctx ended,
// or saying that WithMaxWait passed).
func (wg *waiting) after(ctx context.Context, k int, err error) error {
	m := wg.m
	switch {
	case ctx.Err() != nil, errors.Is(err, ErrClosed), errors.Is(err, ErrInvalidConfig):
		return withCtxErr(ctx, err)
	case denied(err): // a wrong password stays wrong: no retry
		return err
	}
	took := time.Since(wg.began)
	if wg.w == nil {
		// The first failed attempt starts the watch; a later one starts it
		// again when it could not listen (its nodes unreachable then).
		var fresh bool
		if wg.w, wg.wt, fresh = m.waitFor(ctx, wg.p.id(), false); fresh && !m.c.cfg.knobs.NoFreshLook { // test-only switch (internal/knobs)
			// A release between the attempt and the watch went
			// unreported: look once more now that it listens.
			return nil
		}
	}
	var wake <-chan struct{}
	if wg.wt != nil {
		wg.w.settle(wg.wt, err, wg.p.value(), wg.p.lastCalls())
		wake = wg.wt.wake
	}
	if wg.held() != nil {
		return nil // it holds with the hand-overs it heard while the attempt ran
	}
	delay := m.backoff(k)
	var part <-chan struct{} // a hand-over from fewer nodes than a quorum
	if wg.wt != nil && wg.w.awaitsGrants(wg.wt) {
		// A waiter that holds on grants, refused for a held lock by a
		// quorum of nodes, hears its turn (the hand-overs): another
		// attempt before then is refused and, worse, changes the value
		// a release hands it the key at, so that hand-overs on their
		// way count for nothing and the next attempt takes them over and
		// splits. So it sleeps its longest backoff, up to a quarter of
		// the TTL (a holder that died leaves keys that expire unreported
		// within a TTL), unless WithMaxWait's bound comes first: the
		// fallback for what is never reported.
		//
		// But once a node hands it the key, the rest of that release's
		// hand-overs follow within moments; when they do not within its
		// ordinary backoff, the other nodes handed their keys to other
		// waiters (the lines differed as the keys were handed on: a
		// requeue's gap, an entry not made there yet), who sleep too,
		// refused by the keys parked with it: nobody would release
		// before a longest backoff. So it then makes its next attempt,
		// which takes over what it was handed (docs/handoff.md, rule 3)
		// and wins, or rolls back and hands the keys on (part).
		if d := jitter(min(m.cfg.retryMax, max(m.cfg.retryMin, m.cfg.ttl/4))); d > delay && (wg.giveUp.IsZero() || time.Now().Add(d).Before(wg.giveUp)) {
			delay = d
			if !m.c.cfg.knobs.HandOverKeepsSleep { // test-only switch
				part = wg.wt.part
			}
		}
	}
	last := false // the bound ends this wait: no attempt after it
	if !wg.giveUp.IsZero() && !time.Now().Add(delay).Before(wg.giveUp) {
		// The backoff's attempt would start after the bound: only a
		// release reported before it may still start one.
		if delay = time.Until(wg.giveUp); wake == nil || delay <= 0 {
			return fmt.Errorf("%w (gave up waiting after %v: WithMaxWait)", err, m.cfg.maxWait)
		}
		last = true
	}
	t := m.c.timers.get(delay)
	defer m.c.timers.put(t)
	end := time.Now().Add(delay)
	for {
		select {
		case <-part:
			part = nil // from the first hand-over only
			if d := m.backoff(k); time.Now().Add(d).Before(end) {
				t.Reset(d)
				last = false // its attempt starts before the bound
			}
		case <-t.C:
			if last {
				return fmt.Errorf("%w (gave up waiting after %v: WithMaxWait)", err, m.cfg.maxWait)
			}
			return nil
		case <-wake:
			if wg.p == nil && !m.scatter(ctx, took) {
				return withCtxErr(ctx, err)
			}
			return nil
		case <-wg.p.running():
			// A call of the attempt that had not finished did: its
			// refusal may complete a quorum of hand-overs heard before,
			// and its yes (rolled back) makes its node free for the next
			// attempt (waiter.freed).
			if wg.held() != nil {
				return nil
			}
			if wg.wt != nil {
				wg.w.recheck(wg.wt)
			}
		case <-m.c.closing:
			return fmt.Errorf("%w: %w", err, ErrClosed)
		case <-ctx.Done():
			return withCtxErr(ctx, err)
		}
	}
}

// held returns the nodes whose hand-overs of the failed attempt's value
// make a quorum (see waiter.handed), nil when they do not.
func (wg *waiting) held() []bool {
	if wg.wt == nil {
		return nil
	}
	return wg.w.held(wg.wt)
}

// stop ends the call's waiting: it leaves the watch.
func (wg *waiting) stop() {
	if wg.w != nil {
		wg.m.leave(wg.w, wg.wt)
	}
}

// watchLinger is how long a client keeps a lock name's watch after its last
// waiting call stopped waiting, so that a lock under steady contention is
// not subscribed and unsubscribed for every call.
const watchLinger = time.Second

// watches is a client's watches, by lock name.
type watches struct {
	mu     sync.Mutex
	m      map[string]*watch
	closed bool // Close was called: no new watch, none lingers
}

// watch is one lock name watched on every node that can report releases.
type watch struct {
	name  string
	group string  // the client's group for a lock with a line, else ""
	q     *quorum // the lock's: reports from nodes that make it may wake a waiter

	refs   int         // waiting calls using it (under watches.mu)
	linger *time.Timer // ends it after watchLinger unused (under watches.mu)

	ready chan struct{} // closed once every node's Watch returned
	live  bool          // a quorum of nodes listen (written before ready)
	stops []func()      // (written before ready)

	mu      sync.Mutex
	waiters []*waiter // oldest first
}

// waiter is one waiting Lock call on a watch.
type waiter struct {
	id   string // its waiter ID in the nodes' line; "" without a place
	seen []bool // nodes that reported a release since its attempt began (under watch.mu)
	// After its attempt failed (settled): taken, the nodes that refused it
	// because the lock was held, or had not replied when it was decided
	// (their reports are news); free, the nodes that said yes (free once rolled
	// back). The reports of every other node are ignored: those of a node
	// that said yes come from the attempt's own rollback, and a node that
	// timed out, was busy or is in quarantine is not made worth trying by a
	// release. A node without a reply may have been held (the attempt was
	// decided by the others' refusals): ignoring its report lost the
	// wake-up of a release that freed it. Its report may come from the
	// attempt's own rollback instead (it said yes too late), but such
	// reports never make a quorum: the attempt was decided by more than
	// N - quorum refusals (of some set, with WithQuorumOf), so fewer than
	// a quorum of nodes (of that set) can have said yes, on time or late.
	settled bool
	taken   []bool
	free    []bool
	// resynced: a node said that its notifications may have been lost
	// (watch.resync) while the attempt ran: the call tries again at once
	// when it fails.
	resynced bool
	wake     chan struct{} // signalled when a new attempt is worth making, or the call holds
	part     chan struct{} // signalled when a node handed it the key, fewer than a quorum (hold)
	// The hold on grants (docs/handoff.md), for a call that may hold so
	// (hold): handed[i] is the value node i last reported handing the
	// waiter the key at since its attempt began; value and calls, the
	// failed attempt's value and calls (set when it settles). Node i
	// counts once its call there was answered with a refusal because the
	// lock was held, on time or late (a node that said yes was rolled
	// back, and one that did not answer may still get the rollback's
	// release, which would delete the handed key), and it handed the key
	// at value.
	hold     bool
	handed   []string
	value    string
	calls    []*call
	anyValue bool // knobs.NoGrantCurrentValue
	noReply  bool // knobs.GrantHoldUnanswered
	// Up to smallRound nodes, seen, taken and handed live in the waiter
	// (one allocation).
	seenBuf, takenBuf, freeBuf [smallRound]bool
	handedBuf                  [smallRound]string
}

// holds reports whether wt's call holds node i with a hand-over (see
// handed). Under watch.mu.
func (wt *waiter) holds(i int) bool {
	if v := wt.handed[i]; v == "" || (v != wt.value && !wt.anyValue) || i >= len(wt.calls) {
		return false
	}
	cl := wt.calls[i]
	if !cl.finished() {
		return wt.noReply // test-only switch: a call without a reply counts
	}
	if cl.replied {
		return errors.Is(cl.err, ErrNodeTaken)
	}
	return wt.noReply && cl.unanswered()
}

// freed reports whether node i is free for wt's next attempt: it said yes
// to the failed attempt (it is rolled back), on time or late. A late yes
// comes from a node that had not replied when the attempt was decided (by
// refusals, or yes votes that did not count: quarantine): without it, the
// hand-overs of the nodes that refused, fewer than a quorum (an even N, a
// quarantined node), never woke the call, which slept its longest backoff
// with the lock free (TestALateYesCountsAsFree). Under watch.mu.
func (wt *waiter) freed(i int) bool {
	if wt.free[i] {
		return true
	}
	if i >= len(wt.calls) {
		return false
	}
	cl := wt.calls[i]
	return cl.finished() && cl.replied && cl.err == nil
}

// held is how many nodes wt's call holds with hand-overs. Under watch.mu.
func (wt *waiter) held(q *quorum) bool { return q.holds(len(wt.handed), wt.holds) }

// waitFor registers a waiting Lock call of m (its waiter ID id in the
// nodes' line, "" without a place) on the watch of m's name, starting the watch when there is
// none; fresh reports that it was started now (so a release may have been
// missed before it listened). It returns nil when no quorum of nodes can
// report releases or the client is closed: the call then sleeps its
// backoff alone, and asks again after its next failed attempt. Starting a
// watch is bounded by the node timeout. With joinOnly it only joins a
// watch that already listens, and returns nil otherwise, at once.
func (m *Mutex) waitFor(ctx context.Context, id string, joinOnly bool) (w *watch, wt *waiter, fresh bool) {
	c := m.c
	ws := &c.watches
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return nil, nil, false
	}
	w = ws.m[m.name]
	if joinOnly && (w == nil || !isClosed(w.ready)) {
		ws.mu.Unlock()
		return nil, nil, false
	}
	if w == nil {
		if ws.m == nil {
			ws.m = map[string]*watch{}
		}
		w = &watch{name: m.name, q: &m.quorum, ready: make(chan struct{})}
		if line, _ := m.kind.inLine(); line {
			w.group = c.group
		}
		ws.m[m.name] = w
		fresh = true
	}
	w.refs++
	if w.linger != nil {
		w.linger.Stop()
		w.linger = nil
	}
	ws.mu.Unlock()
	if fresh {
		m.startWatch(ctx, w)
	} else {
		select {
		case <-w.ready:
		case <-ctx.Done():
		}
	}
	if !isClosed(w.ready) || !w.live {
		c.unwatch(w)
		return nil, nil, false
	}
	k := c.cfg.knobs
	wt = &waiter{id: id, wake: make(chan struct{}, 1), part: make(chan struct{}, 1), hold: m.holdsOnGrants(), anyValue: k.NoGrantCurrentValue, noReply: k.GrantHoldUnanswered}
	if n := len(c.members); n <= smallRound {
		wt.seen, wt.taken, wt.free, wt.handed = wt.seenBuf[:n], wt.takenBuf[:n], wt.freeBuf[:n], wt.handedBuf[:n]
	} else {
		wt.seen, wt.taken, wt.free, wt.handed = make([]bool, n), make([]bool, n), make([]bool, n), make([]string, n)
	}
	w.mu.Lock()
	w.waiters = append(w.waiters, wt)
	w.mu.Unlock()
	return w, wt, fresh
}

// startWatch asks every node that can report releases to watch w's name,
// concurrently, each for at most the node timeout (even when ctx has
// ended: the watch serves the client's other calls too). A node that
// denied it (ACL channel permissions) is not asked again.
func (m *Mutex) startWatch(ctx context.Context, w *watch) {
	c := m.c
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.nodeTimeout)
	defer cancel()
	stops := make([]func(), len(c.members))
	var wg sync.WaitGroup
	for i, mb := range c.members {
		if mb.queue == nil || mb.watchDenied.Load() {
			continue
		}
		wg.Go(func() {
			stop, err := mb.queue.Watch(sctx, w.name, w.group, func(msg string) { w.notify(i, msg) })
			switch {
			case err == nil:
				stops[i] = stop
			case errors.Is(err, ErrNodeDenied):
				mb.watchDenied.Store(true)
			}
		})
	}
	wg.Wait()
	for _, s := range stops {
		if s != nil {
			w.stops = append(w.stops, s)
		}
	}
	w.live = w.q.holds(len(stops), func(i int) bool { return stops[i] != nil })
	close(w.ready)
}

// notify is node i's report of a release of w's name; msg names the first
// waiter of its line (followed by the value it was handed the key at, when
// it was: wire.Grant): only that waiter counts it, or, when it names
// none (no line), the oldest waiting call.
func (w *watch) notify(i int, msg string) {
	if msg == wire.Resync {
		w.resync(i)
		return
	}
	next, value := wire.ParseGrant(msg)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wt := range w.waiters {
		if next == "" || wt.id == next {
			wt.seen[i] = true
			if value != "" {
				wt.handed[i] = value
			}
			w.check(wt)
			return
		}
	}
}

// awaitsGrants reports whether wt's failed attempt may be followed by its
// hold on grants: it holds on grants, and nodes that refused the attempt
// for a held lock (or did not reply) make a quorum, each able to hand it
// the key.
func (w *watch) awaitsGrants(wt *waiter) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !wt.hold || !wt.settled {
		return false
	}
	return w.q.holds(len(wt.taken), func(i int) bool { return wt.taken[i] })
}

// resync is node i's word that its notifications may have been lost (its
// connection broke and it listens again: wire.Resync): every call whose
// attempt node i did not say yes to, on time or late (waiter.freed; it
// refused for a held lock, or could not be reached: the same break, a
// partition), and that has not been woken since, makes its next attempt
// now, which takes over what a lost notification handed it (there is no
// round trip to save by waiting for the backoff). A node says so at most
// once per dial, with a pause between failed dials (redisnode), so this
// is no retry loop.
func (w *watch) resync(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wt := range w.waiters {
		switch {
		case !wt.settled:
			wt.resynced = true
		case !wt.freed(i):
			select {
			case wt.wake <- struct{}{}:
			default:
			}
		}
	}
}

// check wakes wt when a new attempt is worth making: a node that refused
// it for a held lock has reported a release since, and those nodes with
// the free ones make a quorum; or when its call may hold with the
// hand-overs it heard (holding). Under watch.mu.
func (w *watch) check(wt *waiter) {
	if !wt.settled {
		return // its attempt is running
	}
	if wt.resynced {
		select {
		case wt.wake <- struct{}{}:
		default:
		}
		return
	}
	if wt.hold && wt.held(w.q) {
		select {
		case wt.wake <- struct{}{}:
		default:
		}
		return
	}
	if wt.hold && slices.ContainsFunc(wt.handed, func(v string) bool { return v != "" }) {
		select {
		case wt.part <- struct{}{}:
		default:
		}
	}
	news := false
	for i, s := range wt.seen {
		news = news || s && wt.taken[i]
	}
	if news && w.q.holds(len(wt.seen), func(i int) bool { return wt.seen[i] && wt.taken[i] || wt.freed(i) }) {
		select {
		case wt.wake <- struct{}{}:
		default:
		}
	}
}

// recheck looks again at whether wt's call may wake, once a call of its
// failed attempt finished late (see freed).
func (w *watch) recheck(wt *waiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.check(wt)
}

// settle records how wt's attempt, made with value by calls, ended (err:
// its *QuorumError; any other error settles nothing, so only the backoff
// wakes it), and wakes it at once when the reports that came while the
// attempt ran are enough.
func (w *watch) settle(wt *waiter, err error, value string, calls []*call) {
	qe := asQuorumError(err)
	if qe == nil || len(qe.Nodes) != len(wt.taken) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(wt.free)
	wt.value, wt.calls = value, calls
	for i, r := range qe.Nodes {
		wt.taken[i] = errors.Is(r.Err, ErrNodeTaken) || errors.Is(r.Err, ErrNoReply)
		if r.Err == nil {
			wt.free[i] = true
		}
	}
	wt.settled = true
	w.check(wt)
}

// held returns the nodes wt's call holds with hand-overs (waiter.holds),
// nil unless they make a quorum. It reads the calls as they are now: a
// refusal that came after the attempt was decided counts.
func (w *watch) held(wt *waiter) []bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !wt.hold || !wt.settled || !wt.held(w.q) {
		return nil
	}
	out := make([]bool, len(wt.handed))
	for i := range out {
		out[i] = wt.holds(i)
	}
	return out
}

// reset forgets the reports wt has had, and gives it the waiter ID its
// call's next attempt goes on under (a fair call's changes: requeue):
// called as that attempt begins, so that only releases from then on wake
// it.
func (w *watch) reset(wt *waiter, id string) {
	w.mu.Lock()
	clear(wt.seen)
	clear(wt.handed)
	wt.settled, wt.resynced, wt.calls = false, false, nil
	wt.id = id
	select {
	case <-wt.wake:
	default:
	}
	select {
	case <-wt.part:
	default:
	}
	w.mu.Unlock()
}

// leave unregisters wt and releases w.
func (m *Mutex) leave(w *watch, wt *waiter) {
	w.mu.Lock()
	for i, x := range w.waiters {
		if x == wt {
			w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
			break
		}
	}
	w.mu.Unlock()
	m.c.unwatch(w)
}

// unwatch drops one use of w; the last one lets it linger, or ends it at
// once when the client is closed.
func (c *Client) unwatch(w *watch) {
	ws := &c.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.refs--
	if w.refs > 0 {
		return
	}
	if ws.closed || !w.live {
		c.endWatch(w)
		return
	}
	w.linger = time.AfterFunc(watchLinger, func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if w.refs == 0 && ws.m[w.name] == w {
			c.endWatch(w)
		}
	})
}

// endWatch removes w (unused, started) and stops it on every node; under
// watches.mu.
func (c *Client) endWatch(w *watch) {
	if c.watches.m[w.name] == w {
		delete(c.watches.m, w.name)
	}
	if w.linger != nil {
		w.linger.Stop()
		w.linger = nil
	}
	for _, stop := range w.stops {
		stop() // does not block on the network (QueueNode.Watch)
	}
	w.stops = nil
}

// closeWatches ends the lingering watches and lets no new one start; those
// in use end when their last waiting call stops (Close makes it stop at
// once).
func (c *Client) closeWatches() {
	ws := &c.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.closed = true
	for _, w := range ws.m {
		if w.refs == 0 {
			c.endWatch(w)
		}
	}
}

// scatterRounds is how many attempt durations a waiter's wake-up by an
// unnamed report is spread over (scatter).
const scatterRounds = 4

// scatter delays a waiting call of a lock without a line (a shared lock's
// hold), woken by a release, by a random time in [0, scatterRounds x took),
// took being its last attempt's duration. Every client with a waiting call
// is woken by the same release (one call each); attempts made at the same
// instant split the nodes' votes, fail together and roll back, and their
// rollbacks' reports wake them all again. Spread out, the first attempt
// usually takes the lock whole and the later ones are refused without a
// rollback. A call in a line needs none: a release wakes only the waiter
// it names. It reports false when ctx ended first.
func (m *Mutex) scatter(ctx context.Context, took time.Duration) bool {
	d := time.Duration(rand.Int64N(int64(scatterRounds*took) + 1))
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
