package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/redlock"
)

// request is handed by a scheduler to the next client that acquires.
type request struct {
	hold    time.Duration // stay in the critical section this long
	pause   time.Duration // stall past the lease's validity by this much
	overrun time.Duration // work past the lease's validity by this much
	held    chan struct{} // closed once the client holds the lease
}

// client is the workload of client k: Lock -> critical section -> validity
// check -> write -> Unlock (with Scenario.Renew: the critical section runs
// under Mutex.Do), until ctx ends. Reaching the acquisition bound calls stop.
func (r *run) client(ctx context.Context, stop context.CancelFunc, k int, l locker) {
	acquired := 0
	var lastErr error
	defer func() {
		if acquired == 0 && lastErr != nil {
			r.logf("chaos: %s: client %d acquired nothing; its last Lock error: %v", r.sc.Name, k, lastErr)
		}
	}()
	for ctx.Err() == nil {
		if r.sc.Renew {
			var held *redlock.Lease
			err := l.mu.Do(ctx, func(fctx context.Context, lease *redlock.Lease) error {
				acquired++
				held = lease
				r.section(fctx, k, lease, history.Event{}, l, stop)
				return nil
			})
			if held == nil {
				lastErr = err // Lock failed: ctx ended
				continue
			}
			// Do has released the lease (history.DoReleases).
			r.hist.Add(history.Event{Client: k, Kind: history.DoReturned, At: r.clock.Now(), Token: held.Token(),
				Valid: held.Valid(), Until: r.clock.Of(held.Until())})
			if errors.Is(err, redlock.ErrLockLost) {
				r.hist.Add(history.Event{Client: k, Kind: history.LockLost, At: r.clock.Now(), Token: held.Token(), Err: err.Error()})
			}
			continue
		}
		if r.change != nil {
			l = r.change.refresh(ctx, k, l, lastErr)
		}
		lease, acq, err := l.lock(ctx)
		if err != nil {
			lastErr = err
			continue // Lock retries until ctx ends, or stops on a stale configuration (Reconfig)
		}
		lastErr = nil
		acquired++
		r.section(ctx, k, lease, acq, l, stop)
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err = lease.Unlock(uctx)
		cancel()
		if errors.Is(err, redlock.ErrLockLost) {
			r.hist.Add(history.Event{Client: k, Kind: history.LockLost, At: r.clock.Now(), Token: lease.Token(), Err: err.Error()})
		}
	}
}

// section is client k's critical section on lease, up to the Unlock event:
// it records the acquisition (with acq's shape fields), takes a scheduler's
// request if one waits, works (a reentrant owner re-enters once), checks
// the lease and writes (exclusive leases only).
func (r *run) section(ctx context.Context, k int, lease *redlock.Lease, acq history.Event, l locker, stop context.CancelFunc) {
	tok := lease.Token()
	acq.Client, acq.Kind, acq.At, acq.Token, acq.Until = k, history.Acquired, r.clock.Now(), tok, r.clock.Of(lease.Until())
	acq.Fence, _ = lease.Fence()
	acq.Holds = lease.Holds()
	r.hist.Add(acq)
	if r.acqSeen.Add(1) >= r.maxAcq {
		stop()
	}
	rival := r.acquired()
	var req *request
	select {
	case req = <-r.reqs:
	default:
	}
	switch {
	case req != nil && req.held != nil && req.pause > 0:
		// The fault goes in now, while the holder stalls (below).
		close(req.held)
	case req != nil && req.held != nil:
		close(req.held)
		r.linger(lease, req.hold, rival)
	case req != nil && req.overrun > 0:
		time.Sleep(time.Until(lease.Until()) + req.overrun) // work that overruns the validity
	case r.sc.Hold > 0:
		time.Sleep(r.sc.Hold) // the critical section's work
	}
	if acq.Owner != "" {
		r.reenter(ctx, k, l)
	}
	// Read and semaphore leases share the lock: only exclusive ones write.
	switch {
	case !writes(acq):
	case lease.Valid():
		if req != nil && req.pause > 0 {
			r.hist.Add(history.Event{Client: k, Kind: history.Paused, At: r.clock.Now(), Token: tok})
			time.Sleep(time.Until(lease.Until()) + req.pause) // the process is stopped
		}
		fence, _ := lease.Fence() // 0 without fencing: the register then judges by time
		if !r.sc.Fencing {
			fence = 0 // an election's terms are tokens; its scenario judges by time
		}
		r.reg.Write(k, tok, fence, r.clock.Of(lease.Until()), fmt.Sprintf("client%d:%s", k, tok))
	default:
		r.hist.Add(history.Event{Client: k, Kind: history.LockLost, At: r.clock.Now(), Token: tok, Err: "validity ended before the write"})
	}
	r.hist.Add(history.Event{Client: k, Kind: history.Unlock, At: r.clock.Now(), Token: tok, Until: r.clock.Of(lease.Until())})
}

// reenter takes client k's reentrant lock again while it holds it (the
// owner re-enters at once unless a fault refuses it), records the inner
// lease, and releases it.
func (r *run) reenter(ctx context.Context, k int, l locker) {
	rctx, cancel := context.WithTimeout(ctx, r.sc.TTL)
	inner, err := l.mu.TryLock(rctx)
	cancel()
	if err != nil {
		return
	}
	tok := inner.Token()
	r.hist.Add(history.Event{Client: k, Kind: history.Acquired, At: r.clock.Now(), Token: tok, Until: r.clock.Of(inner.Until()),
		Owner: l.owner, Holds: inner.Holds()})
	r.hist.Add(history.Event{Client: k, Kind: history.Unlock, At: r.clock.Now(), Token: tok, Until: r.clock.Of(inner.Until())})
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = inner.Unlock(uctx)
}

// acquired signals the acquisition just made to a lingering holder and
// returns the channel that the next acquisition (necessarily another
// client's while this one holds) closes.
func (r *run) acquired() <-chan struct{} {
	r.acqMu.Lock()
	defer r.acqMu.Unlock()
	close(r.acqNext)
	r.acqNext = make(chan struct{})
	return r.acqNext
}

// linger keeps a holder targeted by a fault in its critical section for
// hold, but never past its lease's validity, and no longer once another
// client has acquired: the overlap a fault allows then exists, and the
// holder goes on to its validity check and write. Waiting on the rival
// rather than for a fixed time makes the forced violation independent of
// how long the fault takes to inject on a loaded machine, and costs a safe
// scenario nothing (no rival acquires there).
func (r *run) linger(lease *redlock.Lease, hold time.Duration, rival <-chan struct{}) {
	d := min(hold, time.Until(lease.Until()))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-rival:
	}
}

// warmUp is client k's one cycle before the workload (Scenario.WarmUp):
// Lock, the critical section and its write, Unlock.
func (r *run) warmUp(ctx context.Context, k int, l locker) error {
	lctx, cancel := context.WithTimeout(ctx, 10*r.sc.TTL+10*time.Second)
	defer cancel()
	lease, acq, err := l.lock(lctx)
	if err != nil {
		return fmt.Errorf("client %d's warm-up lock: %w", k, err)
	}
	r.section(ctx, k, lease, acq, l, func() {})
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = lease.Unlock(uctx)
	return nil
}
