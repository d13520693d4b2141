package redlock

import (
	"context"
	"errors"
	"time"
)

// A lock kind is what differs between a mutex, a fenced mutex and a shared
// lock's hold (reentrant, read-write, semaphore): the node calls that
// acquire, extend and release one acquisition, and the node capability
// they need. It is chosen once, when the lock is made (Client.newMutex),
// after every node has been checked for the capability; everything else
// (fan-out, deadlines, quorum, validity, rollback with release guards,
// release backlog, restart quarantine, renewal, Lease) is the same for all
// kinds. The fencing write-back is the fenced kind's own (Mutex.raiseFence).
type kind interface {
	// capability names the interface every node must implement, or ""
	// when Node is enough.
	capability() string
	// capable reports whether mb's node implements it.
	capable(mb *member) bool
	// inLine reports whether the kind's Lock calls wait in the nodes'
	// waiting line (QueueNode; each has a place), and whether their turn
	// binds them (WithFairQueue).
	inLine() (line, fair bool)
	// acquire asks mb for the lock for value; w is the call's Waiter in
	// the line (nil without a place: a TryLock, a shared lock's hold).
	acquire(ctx context.Context, mb *member, key, value string, ttl time.Duration, w *Waiter) (grant, error)
	// extend resets the expiry of value's acquisition on mb.
	extend(ctx context.Context, mb *member, key, value string, ttl time.Duration) (bool, error)
	// release removes value's acquisition from mb, leaving a release guard
	// for guard when it was not there (guard > 0).
	release(ctx context.Context, mb *member, key, value string, guard time.Duration) (bool, error)
}

// grant is one node's answer to an acquire.
type grant struct {
	ok    bool
	holds int   // live holds of the acquisition's group (1 for a mutex)
	fence int64 // the node's fencing counter (fenced mutex; 0 when absent)
}

// mutexKind: SET NX PX on a Node.
type mutexKind struct{}

func (mutexKind) capability() string        { return "" }
func (mutexKind) capable(*member) bool      { return true }
func (mutexKind) inLine() (line, fair bool) { return true, false }

// acquire: a waiting call on a node that keeps a line waits in it.
func (mutexKind) acquire(ctx context.Context, mb *member, key, value string, ttl time.Duration, w *Waiter) (grant, error) {
	if g, ok, err := lineAcquire(ctx, mb, key, value, ttl, w); ok {
		return g, err
	}
	ok, err := mb.node.Acquire(ctx, key, value, ttl)
	return grant{ok: ok, holds: 1}, err
}

// lineAcquire is a plain or fenced mutex's acquire of waiter w in mb's line;
// ok is false when the call must be a plain acquire instead: no waiter (a
// TryLock), a node without a line, or one that denied the line's commands
// (an ACL user with the minimal ACL of docs/nodes.md: the script fails
// before it writes anything but a free key it takes, so the plain acquire
// that follows finds that key held by its value, a retried copy).
func lineAcquire(ctx context.Context, mb *member, key, value string, ttl time.Duration, w *Waiter) (g grant, ok bool, err error) {
	if w == nil || mb.queue == nil || mb.lineDenied.Load() {
		return grant{}, false, nil
	}
	g, err = queuedAcquire(ctx, mb, key, value, ttl, w)
	if errors.Is(err, ErrNodeDenied) && !errors.Is(err, ErrNotSent) {
		// Denied inside the script (a denied EVALSHA, a wrong password:
		// not sent, and a plain acquire would be denied as well).
		mb.lineDenied.Store(true)
		return grant{}, false, nil
	}
	return g, true, err
}

// queuedAcquire is a waiter's acquire (QueueNode): it reads the fencing
// counter too.
func queuedAcquire(ctx context.Context, mb *member, key, value string, ttl time.Duration, w *Waiter) (grant, error) {
	ok, fence, err := mb.queue.AcquireQueued(ctx, key, value, ttl, *w)
	return grant{ok: ok, holds: 1, fence: fence}, err
}

func (mutexKind) extend(ctx context.Context, mb *member, key, value string, ttl time.Duration) (bool, error) {
	return mb.node.Extend(ctx, key, value, ttl)
}

func (mutexKind) release(ctx context.Context, mb *member, key, value string, guard time.Duration) (bool, error) {
	return mb.node.Release(ctx, key, value, guard)
}

// fencedKind: a mutex whose acquire also reads the fencing counter
// (WithFencing; FencingNode).
type fencedKind struct{ mutexKind }

func (fencedKind) capability() string      { return "FencingNode" }
func (fencedKind) capable(mb *member) bool { return mb.fencing != nil }

func (fencedKind) acquire(ctx context.Context, mb *member, key, value string, ttl time.Duration, w *Waiter) (grant, error) {
	if g, ok, err := lineAcquire(ctx, mb, key, value, ttl, w); ok {
		return g, err
	}
	ok, fence, err := mb.fencing.AcquireFenced(ctx, key, value, ttl)
	return grant{ok: ok, holds: 1, fence: fence}, err
}

// fairKind: a mutex, fenced or not, whose acquire waits its turn in the
// nodes' fair queue (WithFairQueue; QueueNode). AcquireQueued reads the
// fencing counter in the same step, so the fenced kind needs nothing more
// here; its write-back is the fenced kind's.
type fairKind struct{ base kind } // mutexKind or fencedKind

func (fairKind) capability() string { return "QueueNode" }
func (k fairKind) capable(mb *member) bool {
	return mb.queue != nil && k.base.capable(mb)
}
func (fairKind) inLine() (line, fair bool) { return true, true }

func (fairKind) acquire(ctx context.Context, mb *member, key, value string, ttl time.Duration, w *Waiter) (grant, error) {
	return queuedAcquire(ctx, mb, key, value, ttl, w)
}

func (k fairKind) extend(ctx context.Context, mb *member, key, value string, ttl time.Duration) (bool, error) {
	return k.base.extend(ctx, mb, key, value, ttl)
}

func (k fairKind) release(ctx context.Context, mb *member, key, value string, guard time.Duration) (bool, error) {
	return k.base.release(ctx, mb, key, value, guard)
}

// holdKind: a hold in a shared lock (ShapeNode); hold is the lock's hold
// without its ID, which each acquisition's value fills in.
type holdKind struct{ hold Hold }

func (*holdKind) capability() string        { return "ShapeNode" }
func (*holdKind) capable(mb *member) bool   { return mb.shape != nil }
func (*holdKind) inLine() (line, fair bool) { return false, false }

func (k *holdKind) holdFor(value string) Hold {
	h := k.hold
	h.ID = value
	return h
}

func (k *holdKind) acquire(ctx context.Context, mb *member, key, value string, ttl time.Duration, _ *Waiter) (grant, error) {
	n, err := mb.shape.AcquireHold(ctx, key, k.holdFor(value), ttl)
	return grant{ok: n > 0, holds: n}, err
}

func (k *holdKind) extend(ctx context.Context, mb *member, key, value string, ttl time.Duration) (bool, error) {
	return mb.shape.ExtendHold(ctx, key, k.holdFor(value), ttl)
}

func (k *holdKind) release(ctx context.Context, mb *member, key, value string, guard time.Duration) (bool, error) {
	return mb.shape.ReleaseHold(ctx, key, k.holdFor(value), guard)
}

// checkKind refuses a lock whose kind needs a capability one of the nodes
// lacks, naming the node (ctor names the constructor or option).
func (c *Client) checkKind(ctor string, k kind) error {
	for i, m := range c.members {
		if !k.capable(m) {
			return configError("%s: node %d (%s, %T) does not implement %s", ctor, i, m.addr, m.node, k.capability())
		}
	}
	return nil
}
