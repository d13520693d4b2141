package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do acquires the lock (as Lock does), runs fn while holding it, and
// releases it when fn returns. fn gets the lease for its token and fencing
// token (Lease.Fence); it must not Unlock it.
//
// While fn runs the lease renews itself at the mutex's WithAutoRenew
// fraction (1/3 of the TTL when the mutex has none). fn's context is cancelled, with an error wrapping
// ErrLockLost as its cause (context.Cause), as soon as the lease comes
// within the cancel margin (WithCancelMargin, default a tenth of the TTL) of
// its validity deadline without a renewal having moved it, or the moment the
// lease can no longer be trusted (a renewal found the lock lost). The
// deadline itself comes before the earliest moment the keys can expire on a
// quorum (drift included); the margin is there so that a process starved of
// CPU, whose timers fire late, still stops fn before anyone else can hold
// the lock (docs/algorithm.md, "Leases that end in time"). fn must stop
// writing when its context is done; a protected resource should also check a
// fencing token, because a paused process may notice late.
//
// On every exit of fn, a panic included, Do stops the renewal and releases
// the lease (bounded by the release and node timeouts, whatever ctx does)
// before it returns or the panic goes on.
//
// Do returns Lock's error if the lock was not obtained (fn did not run);
// otherwise fn's error, joined with an error wrapping ErrLockLost when fn's
// context was cancelled because the lease ended or came within the margin
// (the work may have overlapped another holder's), and with Unlock's error
// if the release was not confirmed.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context, lease *Lease) error) (err error) {
	renew := m.cfg.renew
	if renew == 0 {
		renew = defaultRenew
	}
	lease, err := m.lock(ctx, renew)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		m.watchMargin(fctx, cancel, lease)
	}()
	returned := false
	defer func() {
		if !returned && m.c.cfg.knobs.NoPanicRelease {
			return // test-only: a panic leaves the lease held and renewed
		}
		lost := lease.Err() // nil unless the lease ended while fn ran
		if cause := context.Cause(fctx); lost == nil && errors.Is(cause, ErrLockLost) {
			lost = cause // came within the margin
		}
		cancel(context.Canceled)
		<-watch
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.releaseTimeout+m.c.cfg.nodeTimeout)
		defer ucancel()
		uerr := lease.Unlock(uctx)
		if !returned {
			return // panicking: the panic goes on once the lease is released
		}
		if lost != nil {
			lost = fmt.Errorf("redlock: %q: the lease ended while the function ran: %w", m.name, lost)
			if errors.Is(uerr, ErrLockLost) {
				uerr = nil // already said
			}
		}
		err = errors.Join(err, lost, uerr)
	}()
	err = fn(fctx, lease)
	returned = true
	return err
}

// watchMargin cancels fctx when the lease ends, or when it comes within the
// mutex's cancel margin of its validity deadline (renewals move the
// deadline, and the timer follows it); it returns when fctx is done.
func (m *Mutex) watchMargin(fctx context.Context, cancel context.CancelCauseFunc, lease *Lease) {
	margin := m.cancelMargin()
	t := time.NewTimer(time.Until(lease.Until().Add(-margin)))
	defer t.Stop()
	for {
		select {
		case <-lease.Done():
			cancel(lease.Err())
			return
		case <-fctx.Done():
			return
		case <-t.C:
			left := time.Until(lease.Until().Add(-margin))
			if left > 0 { // renewed: follow the new deadline
				t.Reset(left)
				continue
			}
			if last := lease.lastExtendErr(); last != nil {
				cancel(fmt.Errorf("%w: %q: within the cancel margin (%v) of its validity deadline, not renewed: %w", ErrLockLost, m.name, margin, last))
				return
			}
			cancel(fmt.Errorf("%w: %q: within the cancel margin (%v) of its validity deadline, not renewed", ErrLockLost, m.name, margin))
			return
		}
	}
}

// cancelMargin returns the mutex's WithCancelMargin, or its default: a
// tenth of the TTL.
func (m *Mutex) cancelMargin() time.Duration {
	if m.cfg.marginSet {
		return m.cfg.cancelMargin
	}
	return m.cfg.ttl / 10
}
