package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/quorumlock/node"
)

// Mutex is a named lock over the client's nodes. Create it with
// Client.NewMutex. A Mutex holds no state between calls: several goroutines
// may call Lock on the same Mutex and compete like separate processes.
type Mutex struct {
	c      *Client
	name   string
	cfg    Config
	quorum int
}

// Name returns the lock's name (its Redis key).
func (m *Mutex) Name() string { return m.name }

// Config returns the mutex's effective configuration.
func (m *Mutex) Config() Config { return m.cfg }

// TryLock makes one attempt to acquire the lock.
//
// It sends SET NX PX with a fresh 128-bit token to every node at once, each
// call bounded by the node timeout, and returns as soon as a quorum has said
// yes or can no longer say yes. On success the lease's validity is TTL minus
// the time elapsed until the quorum-th reply minus the drift allowance,
// measured on the client's monotonic clock. On failure the attempt is rolled
// back on every node that may hold the key, on a detached context, and the
// error wraps ErrNotObtained (and ErrValidityTooShort when the quorum came too
// late, and ctx.Err() when ctx ended); errors.As gives a *QuorumError with
// every node's outcome.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.attempt(ctx)
}

// Lock acquires the lock, retrying with exponential backoff and jitter (see
// WithRetryBackoff) until it succeeds, ctx ends, or WithMaxAttempts attempts
// have failed. Without a deadline on ctx and without WithMaxAttempts it can
// block forever. When ctx ends, the error wraps ErrNotObtained and ctx.Err().
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) {
	for attempt := 0; ; attempt++ {
		lease, err := m.attempt(ctx)
		if err == nil {
			return lease, nil
		}
		if ctx.Err() != nil {
			return nil, err // attempt already wrapped ctx.Err()
		}
		if m.cfg.MaxAttempts > 0 && attempt+1 >= m.cfg.MaxAttempts {
			return nil, err
		}
		select {
		case <-m.cfg.Clock.After(m.backoff(attempt)):
		case <-ctx.Done():
			var qe *QuorumError
			if errors.As(err, &qe) {
				qe.errs = append(qe.errs, ctx.Err())
				return nil, qe
			}
			return nil, err
		}
	}
}

// backoff returns the delay after failed attempt k: uniform in [d/2, d] with
// d = min(RetryMax, RetryMin*2^k).
func (m *Mutex) backoff(k int) time.Duration {
	d := m.cfg.RetryMin
	for i := 0; i < k && d < m.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, m.cfg.RetryMax)
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

func (m *Mutex) owner() Owner {
	o := Owner{Token: newToken(), Label: m.cfg.OwnerLabel}
	if m.cfg.OwnerInfo {
		o.Host, o.PID = m.c.host, m.c.pid
	}
	return o
}

func (m *Mutex) attempt(ctx context.Context) (*Lease, error) {
	cfg := m.cfg
	owner := m.owner()
	value := owner.value()
	r := m.c.fanout(ctx, cfg.NodeTimeout, nil, func(ctx context.Context, _ int, mb *member, cl *call) (Result, error) {
		res, err := mb.node.Acquire(ctx, m.name, value, cfg.TTL)
		switch {
		case err != nil:
			return Failed, err
		case res == node.Acquired:
			return Succeeded, nil
		case res == node.Refused:
			return Rejected, ErrNodeRefused
		}
		return Rejected, ErrNodeTaken
	}, nil)
	d := r.wait(ctx, m.quorum, 0)
	qe := &QuorumError{Op: "lock", Key: m.name, Quorum: m.quorum, Succeeded: d.yes, Nodes: d.outcomes, errs: []error{ErrNotObtained}}
	if d.yes >= m.quorum && ctx.Err() == nil {
		elapsed := d.at.Sub(r.start)
		validity := cfg.TTL - elapsed - cfg.Drift()
		if validity > cfg.MinValidity && validity > 0 {
			return &Lease{
				m:        m,
				owner:    owner,
				value:    value,
				acquired: r.calls,
				onTime:   d.answered,
				until:    r.start.Add(cfg.TTL - cfg.Drift()),
				outcomes: d.outcomes,
			}, nil
		}
		qe.Validity = validity
		qe.errs = append(qe.errs, ErrValidityTooShort)
	}
	m.rollback(ctx, value, r, d)
	// Checked after the rollback, which may outlast the caller's deadline.
	if err := ctx.Err(); err != nil {
		qe.errs = append(qe.errs, err)
	}
	// Report replies that arrived while rolling back, so that the error
	// names every node that was taken, not only those that decided it.
	for i, cl := range r.calls {
		if !d.answered[i] {
			select {
			case <-cl.done:
				qe.Nodes[i] = cl.out
				if cl.out.Result == Succeeded {
					qe.Succeeded++
				}
			default:
			}
		}
	}
	return nil, qe
}

// rollback releases a failed attempt on every node that may hold it. It
// waits for the releases on nodes that had answered (so the caller sees a
// clean state when the error returns) and leaves the releases on nodes still
// pending to finish in the background, sequenced after their acquire.
func (m *Mutex) rollback(ctx context.Context, value string, acq *round, d decision) {
	rel := m.c.release(ctx, m.cfg, m.name, value, acq.calls)
	for i, cl := range rel.calls {
		if d.answered[i] {
			<-cl.done // bounded by the release timeout
		}
	}
}
