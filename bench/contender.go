package bench

import (
	"context"
	"time"
)

// A Contender is one lock implementation under measurement.
type Contender struct {
	// Name identifies the contender in rows and benchmark names. It holds
	// none of ":{}*?[]" (it is part of every key the contender writes).
	Name string
	// OneNode marks a contender that locks a single Redis server: it runs
	// only with N=1 (the floor, bsm/redislock), and not under contention
	// (it does not wait for a held lock).
	OneNode bool
	// Settings says how the contender is configured, for the report.
	Settings string
	// Open builds a locker over the target's masters. It may dial.
	Open func(t Target) (Locker, error)
}

// A Target is what one locker runs against.
type Target struct {
	// Masters are the N Redis masters.
	Masters []Master
	// Key is the lock name. Every key the locker writes contains it, which
	// is how leftover keys are found; under contention every locker of a
	// contender gets the same Key.
	Key string
	// TTL is the lock's time to live on each node.
	TTL time.Duration
	// Dial, when not nil, holds one dial function per master (a nil entry:
	// the client's own dialer). A condition that delays or faults a node
	// wraps its connections this way; the function does TLS itself when
	// the master's URL asks for it.
	Dial []DialFunc
}

// dial returns the dial function of master i, or nil for the client's own.
func (t Target) dial(i int) DialFunc {
	if t.Dial == nil {
		return nil
	}
	return t.Dial[i]
}

// A Locker takes and releases one lock. Its methods are called from one
// goroutine, Lock and Unlock alternately, starting with Lock.
type Locker interface {
	// Lock acquires the lock, waiting or retrying as the library does by
	// default.
	Lock(ctx context.Context) error
	// Unlock releases the lock taken by the last Lock.
	Unlock(ctx context.Context) error
	// Close releases the locker's resources (clients, background work).
	Close() error
}

// retryCounter is a Locker that counts, over its Lock calls that acquired,
// the attempts that failed after the first (quorumlock's, from its
// Observer); the contention table shows them per acquisition.
type retryCounter interface {
	failedRetries() int64
}

// Cycle runs one Lock and, when it succeeded, the Unlock.
func Cycle(ctx context.Context, l Locker) error {
	if err := l.Lock(ctx); err != nil {
		return err
	}
	return l.Unlock(ctx)
}

// Contenders returns the contenders of the side-by-side run, in their
// report order: the floor, bsm/redislock (N=1 only), quorumlock plain, with
// fencing, with auto-renewal and with the fair queue, redsync with its default settings and
// with WithFailFast, and rueidislock.
func Contenders() []Contender {
	return []Contender{
		Floor(),
		BSMRedislock(),
		Quorumlock(),
		QuorumlockFencing(),
		QuorumlockRenew(),
		QuorumlockFair(),
		Redsync(),
		RedsyncFailFast(),
		Rueidislock(),
	}
}

// runs reports whether c runs with n masters.
func (c Contender) runs(n int) bool { return !c.OneNode || n == 1 }
