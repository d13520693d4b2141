package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Lease is one held acquisition of a Mutex. It is safe for concurrent use:
// reading it (Valid, Until, Done, Err, Token) never waits on the network,
// even while an Extend or Unlock runs.
type Lease struct {
	m        *Mutex
	token    string
	value    string
	acquired []*call       // each node's acquire call, possibly still running
	fence    int64         // fencing token (WithFencing), 0 without
	epoch    bool          // the fencing token started a new epoch
	holds    int           // live holds of the lease's group at acquire (Holds)
	decided  time.Duration // how long the acquire took to reach its quorum
	got      time.Time     // when the lease was handed out
	// waiter, for a lease held with hand-overs (place.hold), is the call's
	// waiter, in the lines of the nodes counted (nil otherwise).
	waiter  *Waiter
	counted []bool
	// lined: the lease's call waited in the nodes' lines (a Lock of a
	// lock kind in a line), so a release may have handed its value to a
	// node that refused it (see handedOnly).
	lined bool

	// extending serialises Extend calls (a one-slot semaphore: a channel,
	// so that a wait for it is durable inside a testing/synctest bubble).
	extending chan struct{}

	mu    sync.Mutex // guards the fields below; never held across a call
	until time.Time
	err   error
	done  chan struct{} // made by Done on first use, closed when the lease ends
	timer *time.Timer
	// extendErr is the error of the last Extend or renewal if it failed
	// (nil once one succeeds): an expiry after it says why.
	extendErr error
}

// newLease makes the lease of an acquisition decided by d; its caller sets
// the lease's other fields, then starts it (start).
func newLease(m *Mutex, token, value string, r *round, d decision, fence int64) *Lease {
	l := &Lease{
		m:        m,
		fence:    fence,
		token:    token,
		value:    value,
		acquired: r.calls,
		until:    m.deadline(r.start),
		decided:  d.at.Sub(r.start),
		got:      time.Now(),

		extending: make(chan struct{}, 1),
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.until), l.expire)
	l.mu.Unlock()
	return l
}

// start starts l's renewal every renew of the TTL (none when 0), once its
// fields are set, and returns l.
func (l *Lease) start(renew float64) *Lease {
	if renew > 0 {
		// Never more often than every millisecond (Do's default 1/3 of a
		// TTL of 1-2ms); WithAutoRenew rejects such a fraction.
		go l.renew(max(time.Duration(float64(l.m.cfg.ttl)*renew), time.Millisecond))
	}
	return l
}

// renew extends the lease every interval (±10% jitter) until it ends. After
// a failed Extend it retries with a short backoff; Extend itself refuses once
// the validity has passed, which ends the lease and this loop.
func (l *Lease) renew(interval time.Duration) {
	for {
		jitter := time.Duration(rand.Int64N(int64(interval)/5+1)) - interval/10
		if !l.sleep(interval + jitter) {
			return
		}
		backoff := min(l.m.c.cfg.nodeTimeout, interval/4)
		for l.extend(context.Background(), true) != nil {
			if !l.sleep(backoff) {
				return
			}
		}
	}
}

// sleep waits d and reports whether the lease is still open.
func (l *Lease) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.Done():
		return false
	case <-t.C:
		return true
	}
}

// expire runs when the validity deadline may have passed.
func (l *Lease) expire() {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	if left := time.Until(l.until); left > 0 { // Extend moved the deadline
		l.timer.Reset(left)
		l.mu.Unlock()
		return
	}
	err := l.expiredErr()
	l.endLocked(err)
	l.mu.Unlock()
	l.ended(context.Background(), true, err)
}

// expiredErr is the verdict of a lease whose validity deadline passed
// without an extend moving it; it wraps the last Extend's or renewal's error
// when that failed. l.mu must be held.
func (l *Lease) expiredErr() error {
	if l.extendErr != nil {
		return fmt.Errorf("%w: %q validity ended; the last extend failed: %w", ErrLockLost, l.m.name, l.extendErr)
	}
	return fmt.Errorf("%w: %q validity ended", ErrLockLost, l.m.name)
}

// endLocked ends the lease with err, once, and reports whether this call
// ended it; l.mu must be held. The caller that ended it reports it (ended)
// once l.mu is released.
func (l *Lease) endLocked(err error) bool {
	if l.err != nil {
		return false
	}
	l.err = err
	if l.done != nil {
		close(l.done)
	}
	l.timer.Stop()
	return true
}

// ended reports the end of the lease to the client's Observer.
// err is nil for a release; expired says that the validity deadline passed.
func (l *Lease) ended(ctx context.Context, expired bool, err error) {
	if o := l.m.c.obs; o != nil {
		o.LeaseEnd(ctx, LeaseEndEvent{Lock: l.m.info, Held: time.Since(l.got), Fence: l.fence, Err: err, Expired: expired})
	}
}

// lastExtendErr returns the error of the last Extend or renewal if it
// failed, nil if it succeeded or there was none.
func (l *Lease) lastExtendErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extendErr
}

// Token returns the acquisition's 128-bit random token, hex encoded. The
// value stored on the nodes is the token followed by "?host=...&pid=..."
// (and the owner label), then "&at=" and the wall-clock time the acquiring
// attempt began, in Unix milliseconds (shown by quorumlock status; the
// lock's expiry never reads it).
func (l *Lease) Token() string { return l.token }

// Until returns the validity deadline: under the assumptions in
// docs/algorithm.md, nobody else holds the lock before it. It is the start
// of the last successful acquire or extend plus the TTL minus the drift
// allowance, on the monotonic clock.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Valid reports whether the lease can still be trusted: its validity
// deadline is ahead and it has not been unlocked or found lost. Check it
// before every write the lock protects; it never waits on the network.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == nil && time.Now().Before(l.until)
}

// Done returns a channel that is closed the moment the lease can no longer
// be trusted: its validity deadline passed (a timer), Unlock was called, or
// an Extend found the lock lost. Err then says which.
func (l *Lease) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil { // made on first use: a lease nobody watches costs no channel
		l.done = make(chan struct{})
		if l.err != nil {
			close(l.done)
		}
	}
	return l.done
}

// Err returns nil while Done is open; then an error wrapping ErrReleased
// (Unlock was called) or ErrLockLost (the validity ended, or an Extend found
// too many nodes without the token). A validity that ended after the last
// Extend or renewal failed also wraps that failure's error (a *QuorumError
// naming every node's result).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Unlock ends the lease (Done closes, Err wraps ErrReleased) and releases
// the lock with compare-and-delete on every node that may hold it, on a
// context detached from ctx with the release timeout, so the release goes
// out even when ctx is already cancelled; ctx only bounds how long Unlock
// waits (with one node, the release runs on the calling goroutine unless
// ctx's deadline comes before the release timeout's, so a cancellation
// without a deadline is seen once it returns, within the release timeout).
// It may be called after the validity ended (the compare-and-delete
// removes only this lease's token) and after Client.Close.
//
// It waits out a renewal that is running, and returns nil as soon as a
// quorum of nodes confirmed the deletion: from then on no quorum can find
// the lease's token, so another client can take the lock. The releases on
// the other nodes go on in the background (each after its node's acquire
// call, retried until the node answers, see Client.Close), and this
// client's next acquire of the same lock waits, on each node, for the
// release still running there, so it never meets this lease's key on a node
// that answers. Otherwise its *QuorumError wraps
// ErrLockLost when more than N-quorum nodes no longer held the token
// (expired or taken over), or ErrNotReleased when nodes failed or timed out
// (their releases are retried in the background, see Client.Close), plus
// ctx.Err() if ctx ended first. A second Unlock returns an error wrapping
// ErrReleased.
func (l *Lease) Unlock(ctx context.Context) error {
	ctx, start := l.m.opStart(ctx, OpRelease, false)
	err := l.unlock(ctx)
	if l.m.c.obs != nil {
		l.m.opDone(ctx, OpEvent{Op: OpRelease, Fence: l.fence, Err: err}, start)
	}
	return err
}

// unlock is Unlock.
func (l *Lease) unlock(ctx context.Context) error {
	m := l.m
	l.mu.Lock()
	released := errors.Is(l.err, ErrReleased)
	endedNow := false
	switch {
	case released:
	case l.err == nil:
		endedNow = l.endLocked(m.releasedErr)
	default: // an expired or lost lease is still released
		l.err = m.releasedErr
	}
	l.mu.Unlock()
	if released {
		return fmt.Errorf("%w: %q was already unlocked", ErrReleased, m.name)
	}
	if endedNow {
		l.ended(ctx, false, nil)
	}
	// No Extend starts once the lease has ended (above); wait out one that
	// is running (a renewal racing this Unlock: bounded by its round's
	// deadline), so that it cannot extend a key after its release.
	l.extending <- struct{}{}
	<-l.extending
	r := m.c.release(ctx, m.target(l.value), m.keyTTL(), l.acquired, OpRelease)
	// The releases behind the quorum go on; the next acquire of this lock
	// on this client waits for each (releasing.go).
	m.c.releasing.keep(m.name, r)
	if l.waiter != nil {
		// A node counted for the hold whose release found the value gone
		// (the lease expired there, or renewed past the grant record)
		// did not take the waiter out of its line: its LeaveQueue does,
		// and hands the key on.
		m.leaveQueue(ctx, *l.waiter, r, func(i int) bool {
			return !l.counted[i] || !errors.Is(r.calls[i].err, ErrNodeNotHeld)
		})
	}
	d := r.wait(ctx, &m.quorum, m.c.cfg.nodeTimeout)
	if d.held {
		return nil
	}
	qe := &QuorumError{Op: "unlock", Key: m.name, Quorum: m.quorum.first(), quorum: &m.quorum, Nodes: m.c.results(r, d), errs: []error{ErrNotReleased}}
	if m.quorum.notHeld(qe.Nodes) {
		qe.errs = []error{ErrLockLost}
	}
	return withCtxErr(ctx, qe)
}

// Extend resets the TTL on every node that still holds the token
// (compare-and-pexpire, which never recreates an expired key) among those
// where the acquisition left it: every node for a call that waited in no
// line (TryLock, a shape's hold), those that said yes for a Lock that
// waited in the nodes' lines, those a hold on grants counted
// (docs/handoff.md, rule 10; the others count as not holding it).
// On a quorum it moves the validity deadline to the start of this call plus the
// TTL minus the drift allowance. Concurrent Extends run one at a time.
//
// It refuses without contacting any node once the lease has ended or its
// deadline has passed: the error wraps Err() (ErrReleased or ErrLockLost),
// because extending then could resurrect a lock someone else may already
// hold. When more than N-quorum nodes no longer hold the token, the error
// wraps ErrLockLost and the lease ends at once (Done closes); when the
// quorum failed for other reasons (timeouts, errors, ctx ended) it wraps
// ErrNotExtended and the lease keeps its previous deadline. After
// Client.Close it fails with ErrClosed.
func (l *Lease) Extend(ctx context.Context) error { return l.extend(ctx, false) }

// extend is Extend, made by the lease's renewal or by a caller; it records
// its error for the lease's expiry and reports it to the client's Observer.
func (l *Lease) extend(ctx context.Context, renewal bool) error {
	ctx, start := l.m.opStart(ctx, OpExtend, renewal)
	ended, err := l.doExtend(ctx)
	if !ended {
		l.mu.Lock()
		l.extendErr = err
		l.mu.Unlock()
	}
	if l.m.c.obs != nil {
		l.m.opDone(ctx, OpEvent{Op: OpExtend, Renewal: renewal, Fence: l.fence, Err: err}, start)
	}
	return err
}

// handedOnly reports whether node i's acquire call finished without
// leaving the lease's value on the node (see doExtend); known says that
// the answer is wanted now, before the call may have finished (false
// while it runs).
func (l *Lease) handedOnly(i int, known bool) bool {
	switch {
	case l.m.c.cfg.knobs.ExtendCountsHanded: // test-only switch
		return false
	case l.counted != nil:
		// Held with hand-overs: the value is the failed attempt's, which
		// its rollback deletes where it said yes, and the hold's
		// LeaveQueue where a release handed it.
		return !l.counted[i]
	case !l.lined:
		return false // nothing was handed to it
	}
	cl := l.acquired[i]
	if known && !cl.finished() {
		return false
	}
	return !granted(cl)
}

// doExtend is Extend; it also reports whether it found the lease ended
// before it could extend it.
func (l *Lease) doExtend(ctx context.Context) (bool, error) {
	l.extending <- struct{}{}
	defer func() { <-l.extending }()
	m := l.m
	c := m.c
	if err := c.usable(); err != nil {
		return false, fmt.Errorf("%w %q: %w", ErrNotExtended, m.name, err)
	}
	keyTTL := m.keyTTL()
	// The check and the start of the calls happen under l.mu, which Unlock
	// takes to end the lease: no extend call starts once Unlock has begun.
	// Starting the calls does not wait on the network.
	l.mu.Lock()
	if expired, err := l.checkLocked(); err != nil {
		l.mu.Unlock()
		if expired != nil {
			l.ended(ctx, true, expired)
		}
		return true, err
	}
	r := c.fanout(ctx, op{
		timeout: c.cfg.nodeTimeout,
		no:      ErrNodeNotHeld,
		vote:    true,
		node:    OpExtend,
		lock:    &m.info,
		// A node whose acquire did not leave the lease's value there (it
		// refused, or never answered) can hold that value only as a key
		// a release handed the call's waiter since, which the call's
		// LeaveQueue, maybe still on its way, deletes and hands on
		// (place.leave; docs/handoff.md, rule 10): its yes must not
		// count. A node whose acquire is still running is asked once it
		// has finished (before), and then only if it said yes.
		before: [2][]*call{l.acquired},
		skip:   func(i int) bool { return l.handedOnly(i, true) },
		do: func(ctx context.Context, i int, mb *member) (bool, error) {
			if l.handedOnly(i, false) {
				return false, nil
			}
			return m.kind.extend(ctx, mb, m.name, l.value, keyTTL)
		},
	})
	l.mu.Unlock()
	d := r.wait(ctx, &m.quorum, 0)
	if d.held && ctx.Err() == nil && m.deadline(r.start).After(d.at) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			// Ended while the call ran (validity passed, or Unlock): Done
			// cannot reopen.
			return true, fmt.Errorf("%w: %q ended during Extend: %w", ErrLockLost, m.name, l.err)
		}
		if until := m.deadline(r.start); until.After(l.until) {
			l.until = until
			l.timer.Reset(time.Until(until))
		}
		return false, nil
	}
	qe := &QuorumError{Op: "extend", Key: m.name, Quorum: m.quorum.first(), quorum: &m.quorum, Nodes: c.results(r, d), errs: []error{ErrNotExtended}}
	if m.quorum.notHeld(qe.Nodes) {
		qe.errs = []error{ErrLockLost}
		// Another owner may take those nodes now: end the lease at once.
		l.mu.Lock()
		endedNow := l.endLocked(qe)
		l.mu.Unlock()
		if endedNow {
			l.ended(ctx, false, qe)
		}
	}
	return false, withCtxErr(ctx, qe)
}

// checkLocked returns the error that keeps Extend from contacting the
// nodes: the lease ended, or its deadline passed (which ends it: expired is
// then the lease's error, for the caller to report once l.mu is released).
// l.mu must be held.
func (l *Lease) checkLocked() (expired, err error) {
	if l.err == nil && !time.Now().Before(l.until) {
		expired = l.expiredErr()
		l.endLocked(expired)
	}
	if l.err != nil {
		return expired, fmt.Errorf("%w: %q: %w", ErrNotExtended, l.m.name, l.err)
	}
	return nil, nil
}

// notHeld reports whether the nodes that answered that they do not hold
// the token leave q out of reach: the lease is lost.
func (q *quorum) notHeld(rs []NodeResult) bool {
	return q.lost(len(rs), func(i int) bool { return errors.Is(rs[i].Err, ErrNodeNotHeld) })
}
