package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Mutex is a named lock over the client's nodes. Create it with
// Client.NewMutex. A Mutex holds no state between calls: several goroutines
// may call Lock on the same Mutex and compete like separate processes; each
// successful call returns its own Lease.
type Mutex struct {
	c      *Client
	name   string
	cfg    lockConfig
	quorum quorum
	drift  time.Duration
	kind   kind // mutex, fenced mutex or shared lock's hold (kind.go)
	info   LockInfo
	// suffix is appended to every value the mutex stores (an Election's
	// candidate value).
	suffix string
	// releasedErr is the Err of its unlocked leases (built once: errors
	// are values).
	releasedErr error
}

// TryLock makes one attempt to acquire the lock.
//
// It sends SET NX PX with a fresh 128-bit token to every node at once, each
// call bounded by the node timeout, and returns as soon as a quorum has said
// yes or can no longer say yes (in joint mode, WithQuorumOf, when a node
// that refused the connection decided that, once every call has answered
// or timed out, so that a stale configuration's reply is heard:
// ErrConfigStale). On success the
// lease is valid until the
// start of the attempt plus the TTL minus the drift allowance, measured on
// the monotonic clock, provided the quorum answered early enough to leave
// more than the minimum validity. On failure the attempt is rolled back on
// every node that may hold the key, on a detached context (a call still
// running when TryLock returns is rolled back once it finishes, in the
// background: until then a next attempt may find it, as a place of a
// semaphore taken), and the error
// wraps ErrNotObtained (and ErrValidityTooShort when the quorum came too
// late, ErrClosed after Close, ErrInvalidConfig when one server was found
// behind two addresses, and ctx.Err() whenever ctx had ended by the time
// TryLock returned); errors.As gives a *QuorumError with every node's result.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	ctx, start := m.opStart(ctx, OpAcquire, false)
	lease, err := m.attempt(ctx, m.cfg.renew, m.place(true))
	err = withCtxErr(ctx, err)
	m.acquired(ctx, start, lease, err, 1)
	return lease, err
}

// Lock acquires the lock, retrying with exponential backoff and jitter (see
// WithRetryBackoff; a call that holds on grants waits for its turn instead)
// until it succeeds, ctx ends, or WithMaxWait has passed
// (no attempt starts after it). Without a deadline on ctx and without that
// option it can block forever.
// Its errors are TryLock's; when ctx ended, the error wraps ctx.Err().
//
// On nodes that keep a waiting line (QueueNode; redisnode and memnode do),
// a Lock call that finds the lock held waits in it, and one that arrives
// while others wait joins the line behind them, even when the lock is free
// at that instant; a call in line takes a free lock whatever its place
// (WithFairQueue makes the order binding). A release wakes the line's first
// waiter, in whichever client it is (QueueNode.Watch), and the backoff covers
// what no release reports (docs/algorithm.md, "Waiting"). TryLock ignores
// the line.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	return m.lock(ctx, m.cfg.renew)
}

// lock is Lock with the renewal fraction of the leases it returns (0: none).
func (m *Mutex) lock(ctx context.Context, renew float64) (*Lease, error) {
	ctx, start := m.opStart(ctx, OpAcquire, false)
	lease, attempts, err := m.retry(ctx, renew)
	m.acquired(ctx, start, lease, err, attempts)
	return lease, err
}

// acquired reports the end of an acquisition that began at start to the
// client's Observer.
func (m *Mutex) acquired(ctx context.Context, start time.Time, lease *Lease, err error, attempts int) {
	if m.c.obs == nil {
		return
	}
	e := OpEvent{Op: OpAcquire, Attempts: attempts, Err: err}
	if lease != nil {
		e.Fence, e.FenceEpoch = lease.fence, lease.epoch
	}
	m.opDone(ctx, e, start)
}

// retry is Lock's loop: attempt, decide, wait (wait.go); it also returns
// the number of attempts it made.
func (m *Mutex) retry(ctx context.Context, renew float64) (*Lease, int, error) {
	// A Lock call is background work for Close: Close waits for it to
	// stop waiting (closing wakes it) and to start taking its waiter out of
	// the lines, where a release may have handed it the key.
	m.c.work.add()
	defer m.c.work.done()
	p := m.place(false)
	wg := m.waiting(p)
	defer wg.stop()
	for k := 0; ; k++ {
		p.requeue(ctx)
		wg.begin()
		lease, err := m.attempt(ctx, renew, p)
		if err == nil {
			return lease, k + 1, nil
		}
		if err = wg.after(ctx, k, err); err != nil {
			p.leave(ctx, nil)
			return nil, k + 1, err
		}
		if lease := p.hold(ctx, renew, wg.held()); lease != nil {
			return lease, k + 1, nil
		}
	}
}

// denied reports whether a failed attempt's error names a node that denied
// access (ErrNodeDenied), refused the client's configuration
// (ErrConfigStale), or found the call's configuration invalid
// (ErrInvalidConfig: a TTL its record does not allow): retrying cannot help.
func denied(err error) bool {
	qe := asQuorumError(err)
	if qe == nil {
		return false
	}
	for _, r := range qe.Nodes {
		if errors.Is(r.Err, ErrNodeDenied) || errors.Is(r.Err, ErrConfigStale) || errors.Is(r.Err, ErrInvalidConfig) {
			return true
		}
	}
	return false
}

// asQuorumError is errors.As(err, &qe) for a *QuorumError, without its
// allocation (its target escapes) when err is one itself, as a failed
// attempt's error is; nil when err holds none.
func asQuorumError(err error) *QuorumError {
	if qe, ok := err.(*QuorumError); ok {
		return qe
	}
	var qe *QuorumError
	if errors.As(err, &qe) {
		return qe
	}
	return nil
}

// withCtxErr makes err wrap ctx.Err() when ctx has ended, so that a caller
// always learns that its own deadline or cancellation was involved.
func withCtxErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if err == nil || cerr == nil || errors.Is(err, cerr) {
		return err
	}
	var qe *QuorumError
	if errors.As(err, &qe) {
		qe.errs = append(qe.errs, cerr)
		return qe
	}
	return fmt.Errorf("%w: %w", err, cerr)
}

// backoff returns the delay after failed attempt k: uniform in [d/2, d] with
// d = min(retryMax, retryMin*2^k).
func (m *Mutex) backoff(k int) time.Duration {
	d := m.cfg.retryMin
	for i := 0; i < k && d < m.cfg.retryMax; i++ {
		d *= 2
	}
	return jitter(min(d, m.cfg.retryMax))
}

// jitter returns a random duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// attempt makes one attempt. q is the call's place in the nodes' line (nil
// without one).
func (m *Mutex) attempt(ctx context.Context, renew float64, q *place) (*Lease, error) {
	c := m.c
	if err := c.usable(); err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrNotObtained, m.name, err)
	}
	token, value := c.newValue()
	value += m.suffix
	keyTTL := m.keyTTL()
	e := &acquireExec{m: m, value: value, ttl: keyTTL}
	var before [2][]*call
	e.w, before[0] = q.attempt(token, value)
	before[1] = c.releasing.pending(m.name)
	if n := len(c.members); n <= smallRound {
		e.grants = e.gbuf[:n]
	} else {
		e.grants = make([]grant, n)
	}
	grants := e.grants // each written before its call's done
	r := c.fanout(ctx, op{
		timeout: c.cfg.nodeTimeout,
		no:      ErrNodeTaken,
		vote:    true,
		node:    OpAcquire,
		lock:    &m.info,
		exec:    e,
		before:  before,
		inline:  true,
	})
	d := r.wait(ctx, &m.quorum, 0)
	var causes []error // why it failed, besides ErrNotObtained
	// A duplicate server found while the attempt ran fails it (its own
	// vote never counted; see identity.go).
	if d.held && ctx.Err() == nil && c.dupErr.Load() == nil {
		validity := m.deadline(r.start).Sub(d.at)
		var fence int64
		var epoch bool
		if m.cfg.fencing {
			var err error
			if fence, epoch, err = m.raiseFence(ctx, value, r, d, grants); err != nil {
				causes = append(causes, err)
			}
			// The lease starts only once the token is written back.
			validity = time.Until(m.deadline(r.start))
		}
		switch {
		case len(causes) > 0:
		case validity > m.cfg.minValidity && validity > 0 && ctx.Err() == nil:
			lease := newLease(m, token, value, r, d, fence)
			lease.epoch, lease.lined = epoch, q.lined()
			lease.holds = m.holdCount(r, d, grants)
			q.tried(r)
			q.leave(ctx, r)
			return lease.start(renew), nil
		default:
			causes = append(causes, fmt.Errorf("%w: %v left", ErrValidityTooShort, validity))
		}
	}
	reached := d.held
	m.rollback(ctx, value, r, d)
	q.tried(r)
	if p := c.dupErr.Load(); p != nil {
		causes = append(causes, *p)
	}
	if !reached && len(m.quorum.sets) > 1 && refusedBy(r, d) {
		// Joint mode, decided by masters that refused the connection
		// (down): the others' answers, due within the node timeout, may
		// say more (a stale configuration, ErrConfigStale, which stops
		// Lock: a joint configuration whose new set is lost, aborted
		// since). A client of one set returns at once, as it always did.
		for _, cl := range r.calls {
			if ch := cl.done(); ch != nil { // nil: finished
				select {
				case <-ch:
				case <-ctx.Done():
				}
			}
		}
	}
	// Report replies that arrived while rolling back too, so that the error
	// names every node that was taken, not only those that decided it.
	for i, cl := range r.calls {
		if cl.finished() {
			d.answered[i] = true
		}
	}
	return nil, &QuorumError{Op: "lock", Key: m.name, Quorum: m.quorum.first(), quorum: &m.quorum, Nodes: c.results(r, d), errs: append([]error{ErrNotObtained}, causes...), reached: reached}
}

// refusedBy reports whether a node that answered by decision d refused
// the connection (ErrNotSent; not a yes whose vote did not count, whose
// identity read after it was not sent: mayHold).
func refusedBy(r *round, d decision) bool {
	for i, cl := range r.calls {
		if d.answered[i] && !cl.held && errors.Is(cl.err, ErrNotSent) {
			return true
		}
	}
	return false
}

// raiseFence computes the fencing token of an acquisition that reached a
// quorum and writes it back to a quorum of nodes that still hold our key;
// only then may the lease be returned.
//
// The token is the highest counter read, plus one, when at least a quorum
// of the counters read exist: the last write-back reached a quorum, which
// meets them in a counter that has been there since. When fewer exist, the
// lock is new or masters lost their counters (a restart without
// persistence), and a later quorum need not meet the last write-back in a
// surviving counter: the token then starts a new epoch from the clock, the
// microseconds since 1970, above every token handed out before as long as
// the clients' clocks agree to better than the time between two such
// losses (docs/algorithm.md, "Fencing tokens").
//
// It also reports whether the token started a new epoch.
func (m *Mutex) raiseFence(ctx context.Context, value string, acq *round, d decision, grants []grant) (int64, bool, error) {
	var highest int64
	for i, cl := range acq.calls {
		if d.answered[i] && cl.replied {
			highest = max(highest, grants[i].fence)
		}
	}
	present := m.quorum.holds(len(acq.calls), func(i int) bool {
		return d.answered[i] && acq.calls[i].replied && grants[i].fence > 0
	})
	token := highest + 1
	epoch := false
	if !present && !m.c.cfg.knobs.NoFenceEpoch {
		if now := time.Now().UnixMicro(); now > token {
			token, epoch = now, true
		}
	}
	if !m.c.cfg.knobs.NoFenceWriteBack {
		keep := m.cfg.fenceRetention(m.c.cfg)
		r := m.c.fanout(ctx, op{
			timeout: m.c.cfg.nodeTimeout,
			no:      ErrNodeNotHeld,
			node:    OpFence,
			lock:    &m.info,
			do: func(ctx context.Context, _ int, mb *member) (bool, error) {
				if mb.keeper != nil {
					return mb.keeper.RaiseFenceKeep(ctx, m.name, value, token, keep)
				}
				return mb.fencing.RaiseFence(ctx, m.name, value, token) // fencedKind: every node has it
			},
		})
		if rd := r.wait(ctx, &m.quorum, 0); !rd.held {
			return 0, false, fmt.Errorf("redlock: fencing token %d written back to %d nodes, quorum %s", token, rd.yes, &m.quorum)
		}
	}
	return token, epoch, nil
}

// deadline is the validity deadline of an acquire or extend that started at
// start (on the monotonic clock): start + TTL - drift. The validity left at
// a moment t is deadline(start).Sub(t); it is written nowhere else.
func (m *Mutex) deadline(start time.Time) time.Time { return start.Add(m.cfg.ttl - m.drift) }

// keyTTL is the time to live written on the nodes: the TTL plus the lock
// delay (WithLockDelay, stretched by the drift factor), which only a clean
// Unlock cuts short.
func (m *Mutex) keyTTL() time.Duration { return m.cfg.keyTTL(m.c.cfg) }

// rollback releases a failed attempt on every node that may hold it. It
// waits for the releases on nodes whose acquire had said yes by the decision
// (so that the caller sees them clean when the error returns); the releases
// on nodes that failed, timed out or are still pending finish in the
// background, sequenced after their acquire.
func (m *Mutex) rollback(ctx context.Context, value string, acq *round, d decision) {
	rel := m.c.release(ctx, m.target(value), m.keyTTL(), acq.calls, OpRollback)
	for i, cl := range rel.calls {
		if acq.yesBy(d, i) {
			cl.wait() // bounded by the release timeout
		}
	}
}

// acquireExec is an acquire's per-node behaviour (opExec): one allocation
// for the whole round, its grants included.
type acquireExec struct {
	m      *Mutex
	value  string
	ttl    time.Duration
	w      *Waiter // the call's entry in the line, nil without a place
	grants []grant
	gbuf   [smallRound]grant
}

func (*acquireExec) skip(int) bool     { return false }
func (*acquireExec) busy(int, *member) {}

func (e *acquireExec) do(ctx context.Context, i int, mb *member) (bool, error) {
	g, err := e.m.kind.acquire(ctx, mb, e.m.name, e.value, e.ttl, e.w)
	e.grants[i] = g
	return g.ok, err
}
