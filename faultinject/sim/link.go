package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/internal/notsent"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// link is one client's connection to one master: a redlock.Node that delays
// requests and replies, drops either, and obeys partitions, over a memnode.
// A request that is sent applies on the master whatever the caller does
// meanwhile (it may time out first, the reply may be lost): that is what
// makes stragglers. Every call's weather is drawn from the link's own
// random stream (seeded from the schedule's seed and the link's position),
// so the draws on one link do not depend on other links' timing.
//
// A link is also a proxy that keeps the client's connections open across
// a restart of the server behind it (a TCP proxy or load balancer): nothing
// on the link tells the client that the server changed. A request in flight
// to a run that died is lost with the proxy's connection to that run;
// later requests reach the new run. The client learns of a restart only
// from what the server itself says (Info's run_id and uptime).
//
// The link keeps a pool of connections as go-redis does: a call takes an
// idle one or dials a new one, and a call that ends without its reply (a
// timeout) discards its connection. A new connection to a master whose
// accept queue is full (BacklogPause) times out on its dial: nothing is
// sent, and the error is classified by internal/notsent as a real node's
// is (unknown, not redlock.ErrNotSent).
type link struct {
	w              *world
	client, master int
	addr           int // position in the client's node list (== master, but for an alias)
	alias          bool
	from           time.Time // an alias: unreachable until then (its first contacts come after)
	m              *memnode.Node

	mu    sync.Mutex
	rngs  map[int]*rand.Rand // per worker (the context says which; none: background calls) and operation
	extra time.Duration      // SlowLink: added to every request
	// released: key+"\x00"+value whose release reached the master
	released map[string]time.Time
	// entries: the waiters this link's client put in the master's lines,
	// by leftKey; carried: the same, by key+"\x00"+value of each of their
	// acquires that applied (both created on first use; restoredLines)
	entries, carried map[string]*entry
	// conns: open connections (idle or busy); busy: calls using one.
	conns, busy int
	// deaf: watches that lost a notification while the link was cut;
	// healed tells them so (Watch).
	deaf map[*atomic.Bool]func(string)
}

type workerKey struct{}

// withWorker tags a worker's calls, so that each link draws their weather
// from a stream of its own: concurrent workers' draws do not interleave.
// The coordinator's rollbacks and releases keep the tag (their context is
// detached with context.WithoutCancel); its retry queue does not.
func withWorker(ctx context.Context, id int) context.Context {
	return context.WithValue(ctx, workerKey{}, id)
}

var (
	_ redlock.FencingNode = (*link)(nil)
	_ redlock.ShapeNode   = (*link)(nil)
	_ redlock.QueueNode   = (*link)(nil)
)

// Addr is the master's address, or for an alias another spelling of it.
func (l *link) Addr() string {
	if l.alias {
		return l.m.Addr() + "-alias"
	}
	return l.m.Addr()
}
func (l *link) setExtra(d time.Duration) {
	l.mu.Lock()
	l.extra = d
	l.mu.Unlock()
}

type weather struct {
	req, rep         time.Duration
	dropReq, dropRep bool
}

func (l *link) draw(ctx context.Context, op int) weather {
	id, ok := ctx.Value(workerKey{}).(int)
	if !ok {
		id = -1
	}
	id = (id+1)*8 + op
	l.mu.Lock()
	defer l.mu.Unlock()
	rng := l.rngs[id]
	if rng == nil {
		rng = rand.New(rand.NewPCG(l.w.plan.Seed, uint64(1+l.client)<<40|uint64(1+l.addr)<<20|uint64(id)))
		l.rngs[id] = rng
	}
	n := l.w.plan.Net
	var w weather
	for _, d := range []*time.Duration{&w.req, &w.rep} {
		if n.BaseMax > 0 {
			*d = time.Duration(rng.Int64N(int64(n.BaseMax) + 1))
		}
		if n.SpikeP > 0 && rng.Float64() < n.SpikeP {
			*d += time.Duration(rng.Int64N(int64(n.SpikeMax) + 1))
		}
	}
	w.req += l.extra
	w.dropReq = n.DropReqP > 0 && rng.Float64() < n.DropReqP
	w.dropRep = n.DropReplyP > 0 && rng.Float64() < n.DropReplyP
	return w
}

type reply struct {
	ok    bool
	n     int // AcquireHold's count
	fence int64
	info  redlock.ServerInfo
	err   error
	// dialTimeout: the call needed a new connection and its dial timed out
	// (nothing sent; whatever the error says, the master may be alive).
	dialTimeout bool
}

// deliverBound bounds how long a delivered request waits on a paused master
// (its command still applies on resume, as memnode does): it waits between
// deliverBound and twice that (deliveries share a context per deliverBound).
const deliverBound = 2 * time.Second

// deliveries is the context that requests delivered now wait on: one per
// deliverBound of virtual time, ending two deliverBounds after it is made
// (a timer per period, not per request).
type deliveries struct {
	mu      sync.Mutex
	ctx     context.Context
	at      time.Time
	cancels []context.CancelFunc
}

func (d *deliveries) current() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now := time.Now(); d.ctx == nil || now.Sub(d.at) >= deliverBound {
		ctx, cancel := context.WithTimeout(context.Background(), 2*deliverBound)
		d.ctx, d.at, d.cancels = ctx, now, append(d.cancels, cancel)
	}
	return d.ctx
}

// end releases every period's timer.
func (d *deliveries) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cancel := range d.cancels {
		cancel()
	}
	d.cancels = nil
}

// dialTimedOut is a call whose dial times out, at the caller's deadline:
// nothing is sent.
func (l *link) dialTimedOut(ctx context.Context) reply {
	<-ctx.Done()
	err := notsent.Dial(&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded})
	return reply{err: fmt.Errorf("sim link c%d-%s: %w", l.client, l.Addr(), err), dialTimeout: true}
}

func (l *link) ctxErr(ctx context.Context) error {
	return fmt.Errorf("sim link c%d-m%d: %w", l.client, l.master, ctx.Err())
}

// unsent is the error of a call whose ctx had ended before it was sent:
// as redisnode's (Node.do), it wraps redlock.ErrNotSent and ctx.Err().
func (l *link) unsent(ctx context.Context) error {
	return fmt.Errorf("sim link c%d-m%d: %w: %w", l.client, l.master, redlock.ErrNotSent, ctx.Err())
}

// refusedUnsent reports whether r is a call the master refused without
// applying it (the connection refused: redlock.ErrNotSent), not a dial
// that timed out nor a call whose ctx had ended before it was sent (the
// coordinator retries a release of either).
func refusedUnsent(r reply) bool {
	return !r.dialTimeout && errors.Is(r.err, redlock.ErrNotSent) &&
		!errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded)
}

// Operations, each with its own weather stream per worker (draw keys a
// stream by worker*8 + op: at most 8 operations). New operations go last,
// so that the streams of the others keep their seeds.
const (
	opInfo = iota
	opAcquire
	opRaise
	opExtend
	opRelease
	opLeave  // LeaveQueue
	opNotify // release notifications (drawn with no worker: see Watch)
)

func (l *link) call(ctx context.Context, op int, f func(ctx context.Context) reply) reply {
	if ctx.Err() != nil {
		return reply{err: l.unsent(ctx)}
	}
	w := l.draw(ctx, op)
	if w.req > 0 || w.rep > 0 {
		l.w.cover(NetDelay)
	}
	if w.req > l.w.plan.Net.BaseMax || w.rep > l.w.plan.Net.BaseMax {
		l.w.cover(NetSpike)
	}
	if l.w.isCut(l.client, l.master) || w.dropReq || time.Now().Before(l.from) {
		if w.dropReq {
			l.w.cover(DropRequest)
		}
		<-ctx.Done() // a black hole: the caller waits for its deadline
		return reply{err: l.ctxErr(ctx)}
	}
	if !l.takeConn() {
		// The master's accept queue is full.
		return l.dialTimedOut(ctx)
	}
	r, ok := l.exchange(ctx, f, w.req, func() time.Duration { return w.rep }, w.dropRep, func() { l.w.cover(DropReply) })
	l.putConn(!ok) // a call that ends without its reply discards its connection
	return r       // a refused connection (ErrNotSent) answers at once
}

// exchange sends a request on a connection the caller took: the master
// applies it (f) once apply has passed, and its reply comes back
// replyDelay() after that (read once applied; a refused connection answers
// at once). The reply is lost when dropReply (then onDrop is called) or the
// link is cut by then; the caller waits for its deadline. exchange reports
// whether the reply arrived: only then can the connection be reused.
func (l *link) exchange(ctx context.Context, f func(context.Context) reply, apply time.Duration, replyDelay func() time.Duration, dropReply bool, onDrop func()) (reply, bool) {
	res := make(chan reply, 1)
	run := l.m.Runs()
	deliver := func() {
		if l.m.Runs() != run {
			return // sent to a run that died: lost with its connection
		}
		r := f(carried(ctx, l.w.deliveries.current()))
		if d := replyDelay(); d > 0 && !errors.Is(r.err, redlock.ErrNotSent) {
			time.Sleep(d)
		}
		res <- r
	}
	if apply > 0 {
		time.AfterFunc(apply, deliver)
	} else {
		go deliver()
	}
	select {
	case r := <-res:
		if dropReply || l.w.isCut(l.client, l.master) {
			if dropReply {
				onDrop()
			}
			<-ctx.Done() // applied, reply lost
			return reply{err: l.ctxErr(ctx)}, false
		}
		return r, true
	case <-ctx.Done():
		return reply{err: l.ctxErr(ctx)}, false
	}
}

// takeConn takes an idle connection, or dials a new one; it reports false
// when the dial times out (the master is paused with its accept queue full).
func (l *link) takeConn() bool {
	full := l.w.backlogFull(l.master)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy == l.conns {
		if full {
			return false
		}
		l.conns++
	}
	l.busy++
	return true
}

// putConn gives a call's connection back, or discards it (go-redis closes a
// connection whose read timed out).
func (l *link) putConn(broken bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.busy--
	if broken {
		l.conns--
	}
}

func (l *link) Info(ctx context.Context) (redlock.ServerInfo, error) {
	r := l.call(ctx, opInfo, func(ctx context.Context) reply {
		info, err := l.m.Info(ctx)
		return reply{info: info, err: err}
	})
	return r.info, r.err
}

// afterAcquire looks for an orphan in the making: an acquire that took the
// key on the master after the same value's release had reached it (the
// release guard exists to refuse exactly that).
func (l *link) afterAcquire(key, value string, sent time.Time, ok bool, err error) {
	l.afterAcquireOf(key, value, value, func() bool { return l.m.Keys()[key] == value }, sent, ok, err)
}

// afterAcquireOf is afterAcquire for what: a key's value, or a shared lock's
// hold (its member; id is the lease's value); held reports whether the
// master holds it now.
func (l *link) afterAcquireOf(key, what, id string, held func() bool, sent time.Time, ok bool, err error) {
	if !ok || err != nil {
		return
	}
	l.mu.Lock()
	rel, released := l.released[key+"\x00"+what]
	l.mu.Unlock()
	if !released || !held() {
		return
	}
	// The guard lasts the key's TTL on the master's clock: a straggler that
	// a paused master applies later than that leaves a key that expires on
	// its own (docs: the guard covers the TTL); the checker excuses it
	// (history.ReleaseGuard, history.NoOrphans). 0.8: the master's clock
	// may run fast within the drift allowances drawn.
	guard := time.Duration(float64(l.w.plan.TTL+l.w.plan.Delay) * 0.8)
	l.w.record(history.Event{Client: l.client, Kind: history.Overtaken, At: l.w.at(time.Now()), Lock: key, Token: id, Node: l.master,
		Released: l.w.at(rel), Guard: guard, Note: fmt.Sprintf("sent at %v", l.w.at(sent))})
}

func (l *link) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	sent := time.Now()
	r := l.call(ctx, opAcquire, func(ctx context.Context) reply {
		ok, err := l.m.Acquire(ctx, key, value, ttl)
		l.afterAcquire(key, value, sent, ok, err)
		return reply{ok: ok, err: err}
	})
	return r.ok, r.err
}

func (l *link) AcquireFenced(ctx context.Context, key, value string, ttl time.Duration) (bool, int64, error) {
	sent := time.Now()
	r := l.call(ctx, opAcquire, func(ctx context.Context) reply {
		ok, fence, err := l.m.AcquireFenced(ctx, key, value, ttl)
		l.afterAcquire(key, value, sent, ok, err)
		return reply{ok: ok, fence: fence, err: err}
	})
	return r.ok, r.fence, r.err
}

// AcquireQueued is AcquireFenced for a fair waiter (redlock.QueueNode):
// the same operation's weather, and the same orphan detection.
func (l *link) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, wt redlock.Waiter) (bool, int64, error) {
	sent := time.Now()
	l.w.count(&l.w.queued)
	r := l.call(ctx, opAcquire, func(ctx context.Context) reply {
		ok, fence, err := l.m.AcquireQueued(ctx, key, value, ttl, wt)
		l.afterAcquire(key, value, sent, ok, err)
		l.entered(key, wt.ID, value, ok, err)
		if !ok && err == nil {
			l.afterLeave(key, value, wt, sent)
		}
		return reply{ok: ok, fence: fence, err: err}
	})
	return r.ok, r.fence, r.err
}

// LeaveQueue takes a fair waiter out of key's queue (redlock.QueueNode),
// with weather of its own operation.
func (l *link) LeaveQueue(ctx context.Context, key string, wt redlock.Waiter) error {
	r := l.call(ctx, opLeave, func(ctx context.Context) reply {
		err := l.m.LeaveQueue(ctx, key, wt)
		if err == nil {
			k := leftKey(key, wt.ID)
			l.mu.Lock()
			if _, ok := l.released[k]; !ok {
				l.released[k] = time.Now() // the first leave: the tombstone's start
			}
			l.mu.Unlock()
			l.unlined(key, wt.ID)
		}
		return reply{err: err}
	})
	l.leaveRefused(key, wt.ID, r)
	return r.err
}

// leaveRefused records, when the master refused waiter id's LeaveQueue
// without applying it (redlock.ErrNotSent, as a release's: the coordinator
// does not retry it), a refused release of every value the waiter's
// acquires carried there: the waiter stays in that master's line (one
// that restarts from its disk brings it back), where a release may hand
// it the key at one of them, which nobody releases; it expires with its
// TTL.
func (l *link) leaveRefused(key, id string, r reply) {
	if !refusedUnsent(r) {
		return
	}
	l.mu.Lock()
	var vs []string
	if e := l.entries[leftKey(key, id)]; e != nil {
		vs = e.valuesBy(time.Now())
	}
	l.mu.Unlock()
	for _, v := range vs {
		l.w.refused(l, v)
	}
}

// leftKey names, in released, a waiter's LeaveQueue that reached the master;
// in entries, the waiter.
func leftKey(key, id string) string { return key + "\x00left\x00" + id }

// entry is what a link knows of one waiter's entry in a master's line:
// the values its acquires that applied carried, and when (the entry's
// value record, or a key a release handed it, holds one of them), and
// when the entry was last removed (its LeaveQueue applied, or an acquire
// that took the key: the waiter leaves the line).
type entry struct {
	key, id string
	applied []applied
	removed time.Time
}

// applied is an acquire of a waiter that applied on the master.
type applied struct {
	value string
	at    time.Time
}

// valuesBy returns the values of the entry's acquires applied at or before
// t, each once.
func (e *entry) valuesBy(t time.Time) []string {
	var vs []string
	for _, a := range e.applied {
		if !a.at.After(t) && !slices.Contains(vs, a.value) {
			vs = append(vs, a.value)
		}
	}
	return vs
}

// entryLocked returns waiter id's entry of key's line; l.mu held.
func (l *link) entryLocked(key, id string) *entry {
	k := leftKey(key, id)
	e := l.entries[k]
	if e == nil {
		if l.entries == nil {
			l.entries, l.carried = map[string]*entry{}, map[string]*entry{}
		}
		e = &entry{key: key, id: id}
		l.entries[k] = e
	}
	return e
}

// entered notes an acquire of waiter id that applied with value: the
// waiter is in the line with it, or left it (ok: it took the key).
func (l *link) entered(key, id, value string, ok bool, err error) {
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entryLocked(key, id)
	e.applied = append(e.applied, applied{value, time.Now()})
	l.carried[key+"\x00"+value] = e
	if ok {
		e.removed = time.Now()
	}
}

// unlined notes that waiter id's LeaveQueue applied.
func (l *link) unlined(key, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entryLocked(key, id).removed = time.Now()
}

// unlinedBy notes that a release of value applied: the waiter whose
// acquire carried value, when it is no longer in the line, has left it (a
// waiter that held with hand-overs leaves at its release: release.lua).
func (l *link) unlinedBy(key, value string) {
	l.mu.Lock()
	e := l.carried[key+"\x00"+value]
	l.mu.Unlock()
	if e == nil || slices.Contains(l.m.Line(key), e.id) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e.removed = time.Now()
}

// removedSince returns the entries this link removed from the master's
// lines after t.
func (l *link) removedSince(t time.Time) []entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []entry
	for _, e := range l.entries {
		if e.removed.After(t) {
			out = append(out, entry{key: e.key, id: e.id, applied: slices.Clone(e.applied), removed: e.removed})
		}
	}
	return out
}

// afterLeave looks for the other orphan in the making of a fair acquire
// (docs/handoff.md: "a late copy older than the tombstone can put a waiter
// that left back in a line, where a release may hand it a key it never
// releases"): a straggling AcquireQueued of value that did not take the key
// but put its waiter, whose LeaveQueue had reached the master, back in the
// line. It is recorded as an Overtaken acquire of value, released when the
// waiter left, whose guard is the tombstone's life (the entry's TTL, 0.8 of
// it on a master's clock that may run fast, as afterAcquireOf's): the
// checker excuses it past the tombstone (history.NoOrphans) and fails it
// within (history.ReleaseGuard).
func (l *link) afterLeave(key, value string, wt redlock.Waiter, sent time.Time) {
	l.mu.Lock()
	left, ok := l.released[leftKey(key, wt.ID)]
	l.mu.Unlock()
	if !ok || !slices.Contains(l.m.Line(key), wt.ID) {
		return
	}
	guard := time.Duration(float64(wt.TTL) * 0.8)
	l.w.record(history.Event{Client: l.client, Kind: history.Overtaken, At: l.w.at(time.Now()), Lock: key, Token: value, Node: l.master,
		Released: l.w.at(left), Guard: guard, Note: fmt.Sprintf("sent at %v, its waiter back in the line after its LeaveQueue", l.w.at(sent))})
}

func (l *link) RaiseFence(ctx context.Context, key, value string, token int64) (bool, error) {
	r := l.call(ctx, opRaise, func(ctx context.Context) reply {
		ok, err := l.m.RaiseFence(ctx, key, value, token)
		return reply{ok: ok, err: err}
	})
	return r.ok, r.err
}

func (l *link) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	r := l.call(ctx, opExtend, func(ctx context.Context) reply {
		ok, err := l.m.Extend(ctx, key, value, ttl)
		return reply{ok: ok, err: err}
	})
	return r.ok, r.err
}

func (l *link) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	r := l.call(ctx, opRelease, func(ctx context.Context) reply {
		ok, err := l.m.Release(ctx, key, value, guard)
		if err == nil {
			l.unlinedBy(key, value)
		}
		// A release that deleted the key had our acquire before it: only one
		// that found the key absent can be overtaking it.
		if err == nil && !ok {
			l.mu.Lock()
			if _, ok := l.released[key+"\x00"+value]; !ok {
				l.released[key+"\x00"+value] = time.Now()
			}
			l.mu.Unlock()
		}
		return reply{ok: ok, err: err}
	})
	if refusedUnsent(r) {
		l.w.refused(l, value) // refused: the coordinator stops retrying, documented
	}
	return r.ok, r.err
}

// holds reports whether the master holds member m under key now.
func (l *link) holds(key, m string) bool {
	return slices.Contains(strings.Split(l.m.Keys()[key], " "), m)
}

func (l *link) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	sent := time.Now()
	r := l.call(ctx, opAcquire, func(ctx context.Context) reply {
		n, err := l.m.AcquireHold(ctx, key, h, ttl)
		mem := wire.Member(h.Group, h.ID)
		l.afterAcquireOf(key, mem, h.ID, func() bool { return l.holds(key, mem) }, sent, n > 0, err)
		return reply{n: n, err: err}
	})
	return r.n, r.err
}

func (l *link) ExtendHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (bool, error) {
	r := l.call(ctx, opExtend, func(ctx context.Context) reply {
		ok, err := l.m.ExtendHold(ctx, key, h, ttl)
		return reply{ok: ok, err: err}
	})
	return r.ok, r.err
}

func (l *link) ReleaseHold(ctx context.Context, key string, h redlock.Hold, guard time.Duration) (bool, error) {
	r := l.call(ctx, opRelease, func(ctx context.Context) reply {
		ok, err := l.m.ReleaseHold(ctx, key, h, guard)
		// As Release: only a release that found the hold absent can be
		// overtaking its acquire.
		if err == nil && !ok {
			l.mu.Lock()
			if _, ok := l.released[key+"\x00"+wire.Member(h.Group, h.ID)]; !ok {
				l.released[key+"\x00"+wire.Member(h.Group, h.ID)] = time.Now()
			}
			l.mu.Unlock()
		}
		return reply{ok: ok, err: err}
	})
	if refusedUnsent(r) {
		l.w.refused(l, h.ID) // refused: the coordinator stops retrying, documented
	}
	return r.ok, r.err
}
