// Package node puts one independent Redis master behind a small, context-first
// interface named after lock actions. The quorum coordinator in package redlock
// talks to N of them; package faultinject builds them for chaos tests.
//
// Redis is the adapter over a go-redis v9 client. Every method of a Node must
// return by the deadline of its context (plus scheduling noise), whatever the
// server does: a paused or unreachable master must cost the caller no more than
// its per-node deadline.
package node

import (
	"context"
	"errors"
	"time"
)

// Node is one Redis master as seen by the lock coordinator.
//
// Implementations must be safe for concurrent use by multiple goroutines and
// must honour the context's deadline and cancellation on every call, returning
// an error that wraps ctx.Err() when they give up because of it.
type Node interface {
	// Addr identifies the node (host:port). Addresses are unique within one
	// coordinator.
	Addr() string

	// Acquire sets key to value with the given TTL if key does not exist
	// (SET NX PX), unless a Release with a guard for the same key and value
	// already ran on this node. It reports Acquired also when key already
	// holds value (a retried copy of the same acquire), leaving its TTL as
	// it is. The TTL is rounded down to whole milliseconds and must be at
	// least one millisecond.
	Acquire(ctx context.Context, key, value string, ttl time.Duration) (AcquireResult, error)

	// Extend resets the TTL of key to ttl if key still holds value
	// (compare-and-pexpire). It never creates the key. It reports whether the
	// TTL was reset.
	Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error)

	// Release deletes key if it still holds value (compare-and-delete) and
	// reports whether it did. If the key does not hold value and guard > 0, it
	// leaves a release guard for guard: an Acquire of the same key and value
	// that executes on the server later (a straggler sent before the release)
	// is then refused instead of leaving an orphan key.
	Release(ctx context.Context, key, value string, guard time.Duration) (bool, error)

	// Inspect reads the current value of key and its remaining TTL.
	Inspect(ctx context.Context, key string) (Holder, error)

	// Info reports the server's identity for restart detection.
	Info(ctx context.Context) (ServerInfo, error)
}

// AcquireResult is the outcome of Node.Acquire on a node that answered.
type AcquireResult int

const (
	// Taken: the key exists; someone (maybe the caller itself) holds it.
	Taken AcquireResult = iota
	// Acquired: the key was set to the caller's value.
	Acquired
	// Refused: a guarded release for this value ran first on this node, so
	// this acquire is a late straggler and was not applied.
	Refused
)

func (r AcquireResult) String() string {
	switch r {
	case Taken:
		return "taken"
	case Acquired:
		return "acquired"
	case Refused:
		return "refused"
	}
	return "AcquireResult(?)"
}

// Holder is what a node stores for one lock key.
type Holder struct {
	// Exists is false when the key is absent (free or expired).
	Exists bool
	// Value is the stored value: token plus owner metadata.
	Value string
	// TTL is the remaining time to live; zero when the key is absent and
	// negative (-1ns) when the key exists without an expiry.
	TTL time.Duration
}

// ServerInfo identifies one run of a Redis server. A changed RunID, or an
// Uptime smaller than the time since it was last read, means the server
// restarted and may have lost its keys.
type ServerInfo struct {
	Addr    string
	RunID   string
	Uptime  time.Duration
	Version string
}

// ErrOverloaded is returned, without contacting the server, when a node already
// has its maximum number of calls outstanding (for example because it is
// paused and earlier calls are still waiting for it). It bounds the goroutines
// and memory a straggler node can hold.
var ErrOverloaded = errors.New("node: too many calls in flight")

// ErrNotSent is wrapped by errors of calls that certainly did not reach the
// server (the connection was refused on a client that does not retry
// commands), so the caller knows the call had no effect. Implementations that
// cannot tell must not use it.
var ErrNotSent = errors.New("node: call not sent")
