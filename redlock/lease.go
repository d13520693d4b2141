package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lease is one held acquisition of a Mutex. It is safe for concurrent use;
// its methods serialise on the lease.
type Lease struct {
	m        *Mutex
	owner    Owner
	value    string
	acquired []*call // each node's acquire call, possibly still running
	onTime   []bool  // nodes that had answered the acquire by its decision

	mu       sync.Mutex
	until    time.Time
	released bool
	outcomes []NodeOutcome
}

// Name returns the lock's name.
func (l *Lease) Name() string { return l.m.name }

// Token returns the acquisition's 128-bit random token, hex encoded.
func (l *Lease) Token() string { return l.owner.Token }

// Owner returns the owner metadata stored with the token.
func (l *Lease) Owner() Owner { return l.owner }

// Until returns the validity deadline on the client's clock: the lock is
// guaranteed (under the assumptions in docs/safety.md) not to be held by
// anyone else before it. It is the start of the last successful acquire or
// extend plus TTL minus the drift allowance; Extend moves it.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Valid reports whether the validity deadline is still ahead and the lease
// has not been released.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.released && l.m.cfg.Clock.Now().Before(l.until)
}

// TTL returns the time left until Until (negative once passed).
func (l *Lease) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until.Sub(l.m.cfg.Clock.Now())
}

// Outcomes returns each node's outcome of the lease's last operation
// (acquire, extend or unlock), in node order.
func (l *Lease) Outcomes() []NodeOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]NodeOutcome(nil), l.outcomes...)
}

// Unlock releases the lock with compare-and-delete on every node that may
// hold it, on a context detached from ctx with the release timeout, so the
// release goes out even when ctx is already cancelled; ctx only bounds how
// long Unlock waits. It returns once a quorum confirmed the deletion (nil),
// and every node that had answered the acquire in time has answered too (at
// most the release timeout longer, so that a lock taken right after Unlock
// does not meet this lease's keys on healthy nodes; a node that was already a
// straggler at acquire time is not waited for), or once that can no longer
// happen: then the error wraps ErrLockLost (the
// lock had expired or been taken over on too many nodes). Releases on slow
// nodes finish in the background (see Client.Close). If ctx ends before the
// outcome is known, the error wraps ErrNotReleased and ctx.Err(). A second
// Unlock returns an error wrapping ErrLockLost.
func (l *Lease) Unlock(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.m
	if l.released {
		return fmt.Errorf("%w: %q already released", ErrLockLost, m.name)
	}
	l.released = true
	r := m.c.release(ctx, m.cfg, m.name, l.value, l.acquired)
	d := r.wait(ctx, m.quorum, m.cfg.NodeTimeout)
	if ctx.Err() == nil {
		r.settle(ctx, &d, m.cfg.ReleaseTimeout, l.onTime)
	}
	l.outcomes = d.outcomes
	if d.yes >= m.quorum {
		return nil
	}
	// Lost only if so many nodes no longer held the token that a quorum
	// cannot have held it; failures and timeouts leave it undecided.
	qe := &QuorumError{Op: "unlock", Key: m.name, Quorum: m.quorum, Succeeded: d.yes, Nodes: d.outcomes, errs: []error{ErrNotReleased}}
	if rejected(d.outcomes) > len(d.outcomes)-m.quorum {
		qe.errs = []error{ErrLockLost}
	}
	if err := ctx.Err(); err != nil {
		qe.errs = append(qe.errs, err)
	}
	return qe
}

// Extend resets the TTL on every node that still holds the token
// (compare-and-pexpire, which never recreates an expired key) and recomputes
// the validity as TTL - elapsed - drift from the start of this call.
//
// It refuses, without contacting any node, once the local validity has
// passed or the lease was released: the error wraps ErrLockLost, because
// extending then could resurrect a lock someone else may already hold. When
// too many nodes no longer hold the token for a quorum to be possible, the
// error wraps ErrLockLost and the lease stops being valid at once; when the quorum failed for other reasons (timeouts,
// errors, ctx ended), it wraps ErrNotExtended and the lease keeps its previous
// validity.
func (l *Lease) Extend(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.m
	cfg := m.cfg
	if l.released {
		return fmt.Errorf("%w: %q was released", ErrLockLost, m.name)
	}
	if now := cfg.Clock.Now(); !now.Before(l.until) {
		return fmt.Errorf("%w: %q validity ended %v ago", ErrLockLost, m.name, now.Sub(l.until))
	}
	r := m.c.fanout(ctx, cfg.NodeTimeout, nil, func(ctx context.Context, _ int, mb *member, _ *call) (Result, error) {
		ok, err := mb.node.Extend(ctx, m.name, l.value, cfg.TTL)
		switch {
		case err != nil:
			return Failed, err
		case !ok:
			return Rejected, ErrNodeNotHeld
		}
		return Succeeded, nil
	}, nil)
	d := r.wait(ctx, m.quorum, 0)
	l.outcomes = d.outcomes
	if d.yes >= m.quorum && ctx.Err() == nil {
		validity := cfg.TTL - d.at.Sub(r.start) - cfg.Drift()
		if validity > 0 {
			l.until = r.start.Add(cfg.TTL - cfg.Drift())
			return nil
		}
	}
	qe := &QuorumError{Op: "extend", Key: m.name, Quorum: m.quorum, Succeeded: d.yes, Nodes: d.outcomes}
	if rejected(d.outcomes) > len(d.outcomes)-m.quorum {
		qe.errs = []error{ErrLockLost}
		// Too many nodes lost the token: another owner may take them now,
		// so the lease stops being valid at once.
		l.until = r.start
	} else {
		qe.errs = []error{ErrNotExtended}
	}
	if err := ctx.Err(); err != nil {
		qe.errs = append(qe.errs, err)
	}
	return qe
}

// rejected counts the nodes that answered no (token not held).
func rejected(outs []NodeOutcome) int {
	n := 0
	for _, o := range outs {
		if o.Result == Rejected {
			n++
		}
	}
	return n
}
