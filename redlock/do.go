package redlock

import (
	"context"
	"errors"
	"fmt"
)

// Do acquires the lock (as Lock does), runs fn while holding it, and
// releases it when fn returns. fn gets the lease for its token and fencing
// token (Lease.Fence); it must not Unlock it.
//
// While fn runs the lease renews itself at the mutex's WithAutoRenew
// fraction (1/3 of the TTL when the mutex has none). fn's context is
// cancelled, with the lease's Err as its cause (context.Cause), the moment
// the lease can no longer be trusted: at the local validity deadline at the
// latest, which comes before the earliest moment the keys can expire on a
// quorum (drift included), or when a renewal finds the lock lost. fn must
// stop writing when its context is done; a protected resource should also
// check a fencing token, because a paused process may notice late.
//
// Do returns Lock's error if the lock was not obtained (fn did not run);
// otherwise fn's error, joined with an error wrapping ErrLockLost when the
// lease ended before fn returned (the work may have overlapped another
// holder's), and with Unlock's error if the release was not confirmed.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context, lease *Lease) error) error {
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
		select {
		case <-lease.Done():
			cancel(lease.Err())
		case <-fctx.Done():
		}
	}()
	ferr := fn(fctx, lease)
	lost := lease.Err() // nil unless the lease ended while fn ran
	cancel(context.Canceled)
	<-watch
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), m.c.cfg.releaseTimeout+m.c.cfg.nodeTimeout)
	defer ucancel()
	uerr := lease.Unlock(uctx)
	if lost != nil {
		lost = fmt.Errorf("redlock: %q: the lease ended while the function ran: %w", m.name, lost)
		if errors.Is(uerr, ErrLockLost) {
			uerr = nil // already said
		}
	}
	return errors.Join(ferr, lost, uerr)
}
