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
	onTime   []bool        // nodes that said yes by the decision of the acquire or of an Extend (under mu)
	fence    int64         // fencing token (WithFencing), 0 without
	holds    int           // live holds of the lease's group at acquire (Holds)
	decided  time.Duration // how long the acquire took to reach its quorum

	// extending serialises Extend calls (a one-slot semaphore: a channel,
	// so that a wait for it is durable inside a testing/synctest bubble).
	extending chan struct{}

	mu    sync.Mutex // guards the fields below; never held across a call
	until time.Time
	err   error
	done  chan struct{}
	timer *time.Timer
}

func newLease(m *Mutex, token, value string, r *round, d decision, renew float64, fence int64) *Lease {
	l := &Lease{
		m:        m,
		fence:    fence,
		token:    token,
		value:    value,
		acquired: r.calls,
		onTime:   make([]bool, len(r.calls)),
		until:    m.deadline(r.start),
		decided:  d.at.Sub(r.start),
		done:     make(chan struct{}),

		extending: make(chan struct{}, 1),
	}
	for i := range r.calls {
		l.onTime[i] = r.yesBy(d, i)
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.until), l.expire)
	l.mu.Unlock()
	if renew > 0 {
		// Never more often than every millisecond (Do's default 1/3 of a
		// TTL of 1-2ms); WithAutoRenew rejects such a fraction.
		go l.renew(max(time.Duration(float64(m.cfg.ttl)*renew), time.Millisecond))
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
		for l.Extend(context.Background()) != nil {
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
	case <-l.done:
		return false
	case <-t.C:
		return true
	}
}

// expire runs when the validity deadline may have passed.
func (l *Lease) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if left := time.Until(l.until); left > 0 { // Extend moved the deadline
		l.timer.Reset(left)
		return
	}
	l.endLocked(l.expiredErr())
}

// expiredErr is the verdict of a lease whose validity deadline passed
// without an extend moving it.
func (l *Lease) expiredErr() error {
	return fmt.Errorf("%w: %q validity ended", ErrLockLost, l.m.name)
}

// endLocked ends the lease with err (once); l.mu must be held.
func (l *Lease) endLocked(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	close(l.done)
	l.timer.Stop()
}

// Token returns the acquisition's 128-bit random token, hex encoded. The
// value stored on the nodes is the token followed by "?host=...&pid=..."
// (and the owner label).
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
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while Done is open; then an error wrapping ErrReleased
// (Unlock was called) or ErrLockLost (the validity ended, or an Extend found
// too many nodes without the token).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Unlock ends the lease (Done closes, Err wraps ErrReleased) and releases
// the lock with compare-and-delete on every node that may hold it, on a
// context detached from ctx with the release timeout, so the release goes
// out even when ctx is already cancelled; ctx only bounds how long Unlock
// waits. It may be called after the validity ended (the compare-and-delete
// removes only this lease's token) and after Client.Close.
//
// It waits out a renewal that is running, and returns nil once a quorum
// confirmed the deletion and the nodes that have answered the lease (its
// acquire or an Extend) have confirmed too (at most the release timeout
// longer, so that a lock taken right after Unlock does not meet this lease's
// keys on healthy nodes), plus, for at most twice the acquire's decision
// time, nodes whose acquire is still running and whose last call did not
// fail (a node that is a straggler is not waited for). Otherwise its *QuorumError wraps
// ErrLockLost when more than N-quorum nodes no longer held the token
// (expired or taken over), or ErrNotReleased when nodes failed or timed out
// (their releases are retried in the background, see Client.Close), plus
// ctx.Err() if ctx ended first. A second Unlock returns an error wrapping
// ErrReleased.
func (l *Lease) Unlock(ctx context.Context) error {
	m := l.m
	l.mu.Lock()
	released := errors.Is(l.err, ErrReleased)
	switch {
	case released:
	case l.err == nil:
		l.endLocked(fmt.Errorf("%w: %q", ErrReleased, m.name))
	default: // an expired or lost lease is still released
		l.err = fmt.Errorf("%w: %q", ErrReleased, m.name)
	}
	l.mu.Unlock()
	if released {
		return fmt.Errorf("%w: %q was already unlocked", ErrReleased, m.name)
	}
	// No Extend starts once the lease has ended (above); wait out one that
	// is running (a renewal racing this Unlock: bounded by its round's
	// deadline), so that what it learnt about the nodes is in onTime.
	l.extending <- struct{}{}
	answered, pending := l.healthy()
	<-l.extending
	r := m.c.release(ctx, m.target(l.value), m.keyTTL(), l.acquired)
	d := r.wait(ctx, m.quorum, m.c.cfg.nodeTimeout)
	if ctx.Err() == nil {
		r.settle(ctx, &d, m.c.cfg.releaseTimeout, answered)
	}
	if ctx.Err() == nil {
		// Just behind the quorum, or just hung: wait as long as two
		// acquire decisions took, no more.
		r.settle(ctx, &d, min(m.c.cfg.releaseTimeout, 2*l.decided+time.Millisecond), pending)
	}
	if d.yes >= m.quorum {
		return nil
	}
	qe := &QuorumError{Op: "unlock", Key: m.name, Quorum: m.quorum, Nodes: m.c.results(r, d), errs: []error{ErrNotReleased}}
	if notHeld(qe.Nodes) > len(qe.Nodes)-m.quorum {
		qe.errs = []error{ErrLockLost}
	}
	return withCtxErr(ctx, qe)
}

// healthy returns the nodes Unlock waits for after a quorum confirmed:
// answered, those that said yes to the acquire by its decision, or since,
// or to an Extend (waited for up to the release timeout); pending, those
// whose acquire is still running on a node whose last call did not fail
// (just behind the quorum, as when Unlock follows Lock at once, or just
// hung: waited for briefly). A node whose acquire failed, or that is lagging
// (its last call failed or timed out), is left to the background.
func (l *Lease) healthy() (answered, pending []bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	answered = make([]bool, len(l.onTime))
	pending = make([]bool, len(l.onTime))
	for i, on := range l.onTime {
		cl := l.acquired[i]
		if isClosed(cl.done) {
			answered[i] = on || cl.err == nil
		} else {
			pending[i] = !l.m.c.members[i].lagging.Load()
		}
	}
	return answered, pending
}

// Extend resets the TTL on every node that still holds the token
// (compare-and-pexpire, which never recreates an expired key) and, on a
// quorum, moves the validity deadline to the start of this call plus the
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
func (l *Lease) Extend(ctx context.Context) error {
	l.extending <- struct{}{}
	defer func() { <-l.extending }()
	m := l.m
	c := m.c
	if err := c.usable(); err != nil {
		return fmt.Errorf("%w %q: %w", ErrNotExtended, m.name, err)
	}
	keyTTL := m.keyTTL()
	// The check and the start of the calls happen under l.mu, which Unlock
	// takes to end the lease: no extend call starts once Unlock has begun.
	// Starting the calls does not wait on the network.
	l.mu.Lock()
	if err := l.checkLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	r := c.fanout(ctx, op{
		timeout: c.cfg.nodeTimeout,
		no:      ErrNodeNotHeld,
		vote:    true,
		do: func(ctx context.Context, _ int, mb *member) (bool, error) {
			return m.kind.extend(ctx, mb, m.name, l.value, keyTTL)
		},
	})
	l.mu.Unlock()
	d := r.wait(ctx, m.quorum, 0)
	if d.yes >= m.quorum && ctx.Err() == nil && m.deadline(r.start).After(d.at) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err != nil {
			// Ended while the call ran (validity passed, or Unlock): Done
			// cannot reopen.
			return fmt.Errorf("%w: %q ended during Extend: %w", ErrLockLost, m.name, l.err)
		}
		for i := range l.onTime {
			l.onTime[i] = l.onTime[i] || r.yesBy(d, i)
		}
		if until := m.deadline(r.start); until.After(l.until) {
			l.until = until
			l.timer.Reset(time.Until(until))
		}
		return nil
	}
	qe := &QuorumError{Op: "extend", Key: m.name, Quorum: m.quorum, Nodes: c.results(r, d), errs: []error{ErrNotExtended}}
	if notHeld(qe.Nodes) > len(qe.Nodes)-m.quorum {
		qe.errs = []error{ErrLockLost}
		// Another owner may take those nodes now: end the lease at once.
		l.mu.Lock()
		l.endLocked(qe)
		l.mu.Unlock()
	}
	return withCtxErr(ctx, qe)
}

// checkLocked returns the error that keeps Extend from contacting the
// nodes: the lease ended, or its deadline passed (which ends it). l.mu must
// be held.
func (l *Lease) checkLocked() error {
	if l.err == nil && !time.Now().Before(l.until) {
		l.endLocked(l.expiredErr())
	}
	if l.err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotExtended, l.m.name, l.err)
	}
	return nil
}

// notHeld counts the nodes that answered that they do not hold the token.
func notHeld(rs []NodeResult) int {
	n := 0
	for _, r := range rs {
		if errors.Is(r.Err, ErrNodeNotHeld) {
			n++
		}
	}
	return n
}
