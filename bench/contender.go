package bench

import (
	"context"
	"time"
)

// A Contender is one lock implementation under measurement.
type Contender struct {
	// Name identifies the contender in rows and benchmark names. It holds
	// no ':' (it is part of every key the contender writes).
	Name string
	// OneNode marks a contender that locks a single Redis server: it runs
	// only with N=1 (the floor, bsm/redislock).
	OneNode bool
	// Settings says how the contender is configured, for the report.
	Settings string
	// Open builds a locker over the target's masters. It may dial.
	Open func(t Target) (Locker, error)
}

// A Target is what one locker runs against.
type Target struct {
	// Addrs are the N Redis masters (host:port).
	Addrs []string
	// Key is the lock name, unique to this locker: every key the locker
	// writes contains it, which is how leftover keys are found.
	Key string
	// TTL is the lock's time to live on each node.
	TTL time.Duration
	// Dial, when not nil, opens every connection to a node (the latency
	// condition wraps connections this way).
	Dial DialFunc
}

// A Locker runs lock+unlock cycles of one lock. Its methods are called from
// one goroutine.
type Locker interface {
	// Cycle acquires the lock (waiting or retrying as the library does by
	// default) and releases it.
	Cycle(ctx context.Context) error
	// Close releases the locker's resources (clients, background work).
	Close() error
}

// Contenders returns the contenders of the side-by-side run, in their
// report order: the floor, bsm/redislock (N=1 only), quorumlock plain, with
// fencing and with auto-renewal, redsync with its default settings, and
// rueidislock.
func Contenders() []Contender {
	return []Contender{
		Floor(),
		BSMRedislock(),
		Quorumlock(),
		QuorumlockFencing(),
		QuorumlockRenew(),
		Redsync(),
		Rueidislock(),
	}
}

// runs reports whether c runs with n masters.
func (c Contender) runs(n int) bool { return !c.OneNode || n == 1 }
