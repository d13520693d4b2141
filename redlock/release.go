package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
)

// pendingRelease is a release that failed on a node that may hold the key,
// kept to be retried until the node answers; or, with leave set, a
// waiter's LeaveQueue (its value is then a newline and the waiter's ID):
// it releases a key the node handed the waiter (docs/handoff.md), so it is
// kept as a release is.
type pendingRelease struct {
	key, value string
	guard      time.Duration
	kind       kind      // the lock's kind: removes key=value, or value's hold
	lock       *LockInfo // for the client's Observer (the Mutex's)
	leave      *Waiter
}

// send runs the release on mb.
func (p pendingRelease) send(ctx context.Context, mb *member) (bool, error) {
	if p.leave != nil {
		return true, mb.queue.LeaveQueue(ctx, p.key, *p.leave)
	}
	return p.kind.release(ctx, mb, p.key, p.value, p.guard)
}

// releasePlan says whether a node whose acquire call was acq may hold the
// key, and which guard its release must leave. A node whose acquire
// certainly never reached the server, or answered no, cannot hold our value.
// Where the acquire's effect is unknown (it failed or timed out, so the
// server may still apply it later) the release leaves a guard for the TTL so
// that the late acquire is refused.
// k is the client's test-only switches (knobs.NoReleaseGuard,
// knobs.HeldVoteUnreleased).
func releasePlan(acq *call, ttl time.Duration, k *knobs.Set) (needed bool, guard time.Duration) {
	switch {
	case !mayHold(acq, k.HeldVoteUnreleased):
		return false, 0
	case acq.replied, k.NoReleaseGuard:
		return true, 0
	}
	return true, ttl
}

// mayHold reports whether the node of the finished acquire call acq may
// hold the key: the server said yes (its vote may not have counted), or
// the call may have reached it and it did not answer no. A yes whose vote
// did not count can carry ErrNotSent: the identity read after it
// (WithRestartQuarantine) was not sent, as when the caller's ctx ended
// just after Lock returned; the acquire itself was. heldNotSent is the
// test-only knobs.HeldVoteUnreleased: such a yes counts as not sent.
func mayHold(acq *call, heldNotSent bool) bool {
	switch {
	case acq.held && !heldNotSent:
		return true
	case !acq.sent || errors.Is(acq.err, ErrNotSent):
		return false
	case acq.replied && acq.err != nil && !acq.held:
		return false
	}
	return true
}

// release deletes p (key=value, or a hold) on every node that may hold it (releasePlan), on
// a context detached from ctx so that a cancelled caller still cleans up. On
// each node it waits for that node's acquire call to finish first. A release
// that fails, or that the in-flight cap keeps from being sent, is queued for
// retry. nop says, to the client's Observer, whether it is an Unlock or a
// rollback.
func (c *Client) release(ctx context.Context, p pendingRelease, ttl time.Duration, acq []*call, nop Op) *round {
	// With one node, Unlock's release runs on the caller's goroutine when
	// the caller's ctx cannot end before the release's own timeout does
	// (no deadline, or a later one): Unlock waits for that node anyway. A
	// rollback never does: a failed TryLock returns without waiting for a
	// release behind a timed-out acquire.
	inline := false
	if nop == OpRelease && len(c.members) == 1 {
		dl, ok := ctx.Deadline()
		inline = !ok || time.Until(dl) >= c.cfg.releaseTimeout
	}
	if !c.cfg.knobs.AttachedRollback && ctx.Done() != nil { // a ctx that cannot end needs no detaching
		ctx = context.WithoutCancel(ctx)
	}
	// Each node's plan is made once, when its acquire call has finished
	// (skip runs first, on the node's own goroutine; busy or do follow it).
	e := &releaseExec{c: c, ctx: ctx, p: p, ttl: ttl, acq: acq}
	if n := len(acq); n <= smallRound {
		e.guards = e.gbuf[:n]
	} else {
		e.guards = make([]time.Duration, n)
	}
	return c.fanout(ctx, op{
		timeout: c.cfg.releaseTimeout,
		no:      ErrNodeNotHeld,
		node:    nop,
		lock:    p.lock,
		before:  [2][]*call{acq},
		unlock:  nop == OpRelease,
		inline:  inline,
		exec:    e,
	})
}

// releaseExec is a release's per-node behaviour (opExec): one allocation
// for the whole round.
type releaseExec struct {
	c      *Client
	ctx    context.Context // detached: a queued release outlives the caller
	p      pendingRelease
	ttl    time.Duration
	acq    []*call
	guards []time.Duration // node i's, written by skip before busy or do
	gbuf   [smallRound]time.Duration
}

func (e *releaseExec) skip(i int) bool {
	needed, guard := releasePlan(e.acq[i], e.ttl, &e.c.cfg.knobs)
	e.guards[i] = guard
	return !needed
}

func (e *releaseExec) busy(i int, _ *member) {
	q := e.p
	q.guard = e.guards[i]
	e.c.queueRelease(e.ctx, i, q)
}

func (e *releaseExec) do(ctx context.Context, i int, m *member) (bool, error) {
	q := e.p
	q.guard = e.guards[i]
	ok, err := q.send(ctx, m)
	if err != nil && !refusedRelease(err, e.c.cfg.knobs.NoBusyRetry) {
		e.c.queueRelease(e.ctx, i, q)
	}
	return ok, err
}

// refusedRelease reports whether err is the node's answer to a release that
// a retry cannot change, so the release is not retried (its key, if any,
// expires with its TTL): a denial (ErrNodeDenied), or an error reply of the
// server (WRONGTYPE: the key holds another kind of lock; a script error),
// other than one that asks to try again later (serverBusy; unless final,
// the test-only knobs.NoBusyRetry). An error reply is an error with a
// RedisError method, go-redis's mark of one.
func refusedRelease(err error, final bool) bool {
	if errors.Is(err, ErrNodeDenied) {
		return true
	}
	reply, ok := replyText(err)
	return ok && (final || !serverBusy(reply))
}

// replyText returns the text of the Redis error reply err carries (an
// error with a RedisError method, go-redis's mark of one) and whether it
// carries one.
func replyText(err error) (string, bool) {
	var reply interface {
		error
		RedisError()
	}
	if !errors.As(err, &reply) {
		return "", false
	}
	return reply.Error(), true
}

// unrun reports whether err is a Redis error reply that says the command
// did not run, so that it changed nothing: the server is busy (serverBusy:
// out of memory, refusing writes, loading, ...; inside one of our scripts,
// Redis raises OOM only at the script's first write and MISCONF, READONLY
// or NOREPLICAS at every write, so such a reply means that none ran), or a
// master's configuration check (redisnode's config_check.lua: QLCONFIG,
// raised before the script changes anything) refused the call. A vote so
// answered needs no release and leaves no copy that could apply later:
// without this, each attempt rolled back such a master and requeued its
// waiter, and fenced Lock calls of three clients with one master out of
// memory or without the current configuration record took the lock about
// once in 8 seconds (TestOutOfMemoryMasterDoesNotStallFencedLocks).
func unrun(err error) bool {
	reply, ok := replyText(err)
	return ok && (serverBusy(reply) || strings.HasPrefix(reply, "QLCONFIG "))
}

// serverBusy reports whether a Redis error reply says that the command did
// not run for a while only: the server is loading its data, running a long
// script, out of memory, refusing writes after a failed save (MISCONF),
// read-only (a replica that a failover may promote), or its cluster is
// moving or down. Redis before 7.0 reports such a reply to a command of a
// script inside "ERR Error running script ... -CODE ...". A release so
// answered is retried.
func serverBusy(reply string) bool {
	inScript := strings.HasPrefix(reply, "ERR Error running script")
	for _, code := range []string{"LOADING ", "BUSY ", "TRYAGAIN ", "CLUSTERDOWN ", "MASTERDOWN ", "READONLY ", "OOM ", "MISCONF ", "MOVED ", "ASK ", "NOREPLICAS ", "ERR max number of clients"} {
		if strings.HasPrefix(reply, code) || inScript && strings.Contains(reply, "-"+code) {
			return true
		}
	}
	return false
}

// errAbandoned is the error of a backlog entry that Close gave up on
// (NodeStateEvent.Err).
var errAbandoned = fmt.Errorf("%w: release abandoned unconfirmed; the key expires with its TTL", ErrClosed)

// queueRelease keeps a release that failed on a node that may hold the key.
// A paused server executes, when it resumes, an acquire it had queued; a
// release sent meanwhile may never reach it (a connection opened while a
// server is paused cannot even say HELLO, and once its accept queue is full
// new dials time out), and an acquire applied just before a partition loses
// its reply while the release is refused until the partition heals. So the
// release is retried until the node answers: once it has, the acquire
// either ran before it (and was deleted) or runs after it (and is refused by
// the guard). A refused connection also ends the retry: the process is gone,
// and what a restart reloads from its disk expires on the key's own
// schedule. A timed-out dial does not: the server may be alive and paused.
// A release the server refused is not retried (refusedRelease: a denial,
// ErrNodeDenied, or an error reply such as WRONGTYPE; not one that asks to
// try later, such as LOADING): retrying cannot help, and its key expires
// with its TTL. Refused at once, it is not queued; refused on a retry, it
// leaves the queue as dropped.
//
// The queue (backlog) has no cap and drops nothing: it holds one entry per
// (key, value) whose acquire on the node may have taken effect unreleased;
// a second release of the same (key, value) is merged into the first (the
// longer guard is kept). See docs/algorithm.md for what bounds it.
//
// One goroutine per node drains the queue with backoff (from min(node
// timeout, 100ms), doubling up to 1s) and stops when the queue is empty.
// Once Close is called it retries at once, then every min(node timeout,
// 100ms); when Close gives up it abandons the queue.
func (c *Client) queueRelease(ctx context.Context, i int, p pendingRelease) {
	m := c.members[i]
	m.mu.Lock()
	var gaveUp error
	delta := 0
	switch {
	case isClosed(c.giveUp):
		m.abandoned++
		gaveUp = errAbandoned
	case m.backlog.add(p):
		delta = 1
		if !m.draining {
			m.draining = true
			c.work.add()
			go c.drain(i)
		}
	}
	n := m.backlog.len()
	m.mu.Unlock()
	if c.obs != nil {
		c.obs.NodeState(ctx, NodeStateEvent{Lock: *p.lock, Node: m.addr, Index: i, Backlog: n, Delta: delta, Err: gaveUp})
	}
}

// drain retries node i's queued releases, the oldest key first, sending
// that key's pending values back to back before it moves on to the next
// key, until the queue is empty or Close gives up.
func (c *Client) drain(i int) {
	defer c.work.done()
	m := c.members[i]
	first := min(c.cfg.nodeTimeout, 100*time.Millisecond)
	delay := first
	for {
		m.mu.Lock()
		var abandoned []pendingRelease
		if isClosed(c.giveUp) {
			abandoned = m.backlog.clear()
			m.abandoned += len(abandoned)
		}
		q := m.backlog.front()
		if q == nil {
			m.draining = false
			m.mu.Unlock()
			if c.obs != nil {
				for _, p := range abandoned {
					c.obs.NodeState(context.Background(), NodeStateEvent{Lock: *p.lock, Node: m.addr, Index: i, Delta: -1, Err: errAbandoned})
				}
			}
			return
		}
		p := q.pendingRelease // q's fields change only under m.mu
		m.mu.Unlock()

		var start time.Time
		if c.obs != nil {
			start = time.Now()
		}
		err := ErrNodeBusy
		if m.tryTake(c.cfg.maxInFlight) {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.releaseTimeout)
			var ok bool
			ok, err = p.send(ctx, m)
			cancel()
			m.give()
			if err == nil && !ok {
				err = ErrNodeNotHeld // answered: the key is not (or no longer) there
			}
		}
		if c.obs != nil {
			c.obs.NodeCall(context.Background(), NodeEvent{Lock: *p.lock, Op: OpRetry, Node: m.addr, Index: i, Took: time.Since(start), Err: err})
			c.noteDenied(context.Background(), i, err)
		}
		// Done once the node answered, or refused the connection: then
		// the server process that may have received the acquire is gone,
		// and whatever a restart brings back from its disk expires on the
		// key's own schedule.
		final := c.cfg.knobs.NoBusyRetry
		if err == nil || errors.Is(err, ErrNodeNotHeld) || errors.Is(err, ErrNotSent) || refusedRelease(err, final) {
			refused := refusedRelease(err, final) && !errors.Is(err, ErrNotSent)
			var dropped error
			m.mu.Lock()
			// A release of the same value merged meanwhile with a longer
			// guard is sent again, unless the node refused this one.
			removed := refused || q.guard <= p.guard
			if removed {
				m.backlog.remove(q)
				if refused {
					m.abandoned++ // refused: retrying cannot help; the key expires with its TTL
					dropped = err
				}
			}
			n := m.backlog.len()
			m.mu.Unlock()
			if removed && c.obs != nil {
				c.obs.NodeState(context.Background(), NodeStateEvent{Lock: *p.lock, Node: m.addr, Index: i, Backlog: n, Delta: -1, Err: dropped})
			}
			delay = first
			continue
		}
		// Close wakes a long backoff once; after that the retries come
		// every `first` until Close gives up.
		wake := c.closing
		if isClosed(c.closing) {
			delay, wake = first, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-wake:
		case <-c.giveUp:
		}
		t.Stop()
		delay = min(2*delay, time.Second)
	}
}

// backlog is a node's releases awaiting a retry (member.backlog, under
// member.mu), grouped by key: the keys in the order of their first pending
// release, each with its distinct pending values in order. The release of
// one value cannot stand for another's (each value's own guard is what
// refuses its late acquire), so a key may have several. The zero value is
// empty.
type backlog struct {
	pending     map[releaseID]*queuedRelease
	keys        map[string]*keyReleases
	first, last *keyReleases // the keys with pending releases, oldest first
}

// releaseID names a pending release: a key and a value.
type releaseID struct{ key, value string }

// queuedRelease is one pending release in its key's list.
type queuedRelease struct {
	pendingRelease
	next *queuedRelease
}

// keyReleases is one key's pending releases, oldest first.
type keyReleases struct {
	first, last *queuedRelease
	n           int // pending releases of the key
	turn        int // releases left in the key's turn (0: no turn begun)
	next        *keyReleases
}

// len returns the number of pending releases.
func (b *backlog) len() int { return len(b.pending) }

// add queues p and reports whether it is new: a release of the same key
// and value already pending takes p's guard when it is longer, and p is not
// queued again.
func (b *backlog) add(p pendingRelease) bool {
	id := releaseID{p.key, p.value}
	if q := b.pending[id]; q != nil {
		q.guard = max(q.guard, p.guard)
		return false
	}
	if b.pending == nil {
		b.pending = map[releaseID]*queuedRelease{}
		b.keys = map[string]*keyReleases{}
	}
	q := &queuedRelease{pendingRelease: p}
	b.pending[id] = q
	k := b.keys[p.key]
	if k == nil {
		k = &keyReleases{}
		b.keys[p.key] = k
		b.pushKey(k)
	}
	if k.last == nil {
		k.first = q
	} else {
		k.last.next = q
	}
	k.last = q
	k.n++
	return true
}

// pushKey appends k to the keys' order.
func (b *backlog) pushKey(k *keyReleases) {
	k.next = nil
	if b.last == nil {
		b.first = k
	} else {
		b.last.next = k
	}
	b.last = k
}

// front returns the release to send next (nil when none is pending): the
// oldest pending value of the current key.
func (b *backlog) front() *queuedRelease {
	if b.first == nil {
		return nil
	}
	return b.first.first
}

// remove takes q, which front returned, out of the backlog. A key's turn
// begins when its first release is removed and covers the values pending
// then; when it ends with values still pending (queued during the turn),
// the key goes behind the others.
func (b *backlog) remove(q *queuedRelease) {
	k := b.first
	if k.turn == 0 {
		k.turn = k.n
	}
	k.first = q.next
	if k.first == nil {
		k.last = nil
	}
	q.next = nil
	k.n--
	k.turn--
	delete(b.pending, releaseID{q.key, q.value})
	switch {
	case k.n == 0:
		delete(b.keys, q.key)
		b.first = k.next
		if b.first == nil {
			b.last = nil
		}
	case k.turn <= 0:
		k.turn = 0
		if k.next != nil {
			b.first = k.next
			b.pushKey(k)
		}
	}
}

// clear empties the backlog and returns what it held, in drain order.
func (b *backlog) clear() []pendingRelease {
	if b.len() == 0 {
		return nil
	}
	out := make([]pendingRelease, 0, b.len())
	for k := b.first; k != nil; k = k.next {
		for q := k.first; q != nil; q = q.next {
			out = append(out, q.pendingRelease)
		}
	}
	*b = backlog{}
	return out
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
