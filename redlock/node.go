package redlock

import (
	"context"
	"errors"
	"time"
)

// Node is one independent Redis master as the coordinator uses it. Package
// redisnode implements it over go-redis (standalone, Cluster, Sentinel);
// package memnode implements it in memory for tests.
//
// Implementations must be safe for concurrent use, must return from every
// call by the context's deadline (whatever the server does: a paused or
// unreachable master must cost no more than the deadline), must not leave
// work running after they return, and must return an error wrapping
// ctx.Err() when they give up because the context ended. An error reply of
// the server (for example a Redis NOPERM or CROSSSLOT) should be returned as
// it is: the coordinator hands it to the caller unchanged.
//
// Fencing and the lock shapes (reentrant, read-write, semaphore) are
// optional capabilities: separate interfaces (FencingNode, ShapeNode) that a
// Node may also implement, so existing implementations keep working.
type Node interface {
	// Addr names the node in errors and stats (host:port); it never
	// contains a password.
	Addr() string
	// Info identifies the server process behind the node. The coordinator
	// reads every node's before a node's first vote, to refuse a server that
	// is listed twice under different addresses, and, with the restart
	// quarantine, after every yes vote.
	Info(ctx context.Context) (ServerInfo, error)
	// Acquire sets key to value with the given TTL if key is absent
	// (SET NX PX), unless a release guard for key and value exists (see
	// Release). It reports true when key holds value afterwards, also when
	// it already did (a retried copy of the same acquire; the TTL is then
	// left as it is), and false when another value holds key or a guard
	// refused the acquire.
	Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
	// Extend resets the TTL of key if it still holds value
	// (compare-and-pexpire); it never creates the key. It reports whether
	// the TTL was reset.
	Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error)
	// Release deletes key if it holds value (compare-and-delete) and
	// reports whether it did. When key does not hold value and guard > 0,
	// it leaves a release guard for guard, so that an Acquire of the same
	// key and value that the server executes later (a straggler sent before
	// the release) is refused instead of leaving an orphan key.
	Release(ctx context.Context, key, value string, guard time.Duration) (bool, error)
}

// FencingNode is a Node that also keeps a fencing counter per lock, the
// optional capability behind WithFencing. The counter must not expire; it
// is lost only with the server's data (see docs/algorithm.md, "Fencing
// tokens").
type FencingNode interface {
	Node
	// AcquireFenced is Acquire that also reads, in the same atomic step,
	// the lock's fencing counter on this server (0 when it has none).
	AcquireFenced(ctx context.Context, key, value string, ttl time.Duration) (acquired bool, fence int64, err error)
	// RaiseFence sets the lock's fencing counter to max(counter, token),
	// only while key still holds value, and reports whether it held it.
	RaiseFence(ctx context.Context, key, value string, token int64) (bool, error)
}

// FenceExpiryNode is a FencingNode whose fencing counters can expire: the
// optional capability behind WithFenceRetention. A FencingNode without it
// keeps its counters for ever.
type FenceExpiryNode interface {
	FencingNode
	// RaiseFenceKeep is RaiseFence that, when key holds value, also sets
	// the counter's time to live to keep, whether or not it raised the
	// counter (keep = 0: no time to live, the counter is kept for ever).
	// When key does not hold value it changes nothing.
	RaiseFenceKeep(ctx context.Context, key, value string, token int64, keep time.Duration) (bool, error)
}

// PeekNode is a Node that can also read who holds a lock: the optional
// capability behind Election.Leader and Election.Observe.
type PeekNode interface {
	Node
	// Peek returns the value key holds ("" when it is absent) and the
	// lock's fencing counter (0 when it has none); it changes nothing. The
	// two reads need not be one atomic step.
	Peek(ctx context.Context, key string) (value string, fence int64, err error)
}

// ShapeNode is a Node that also keeps shared locks: the optional capability
// behind Client.NewReentrant, NewRWMutex and NewSemaphore (see
// docs/shapes.md). Such a lock is a set of holds on the node, each with its
// own expiry; a hold expires, is extended and is released on its own, so one
// holder's release never touches another's. Holds of the same Group share
// the lock, holds of different groups exclude each other.
type ShapeNode interface {
	Node
	// AcquireHold adds h to key's holds with an expiry of ttl if h.Group is
	// the group of every live hold, fewer than h.Limit holds are live (when
	// h.Limit > 0), h.Yield finds no live waiting mark, and no release guard
	// for h exists. It returns the number of live holds of h.Group
	// afterwards, or 0 when refused. An acquire that finds h already held
	// succeeds without changing its expiry (a retried copy). A refused
	// acquire with h.Waiter set records that waiting mark for h.WaitTTL;
	// a successful one removes it.
	AcquireHold(ctx context.Context, key string, h Hold, ttl time.Duration) (int, error)
	// ExtendHold resets the expiry of h (h.Group and h.ID) to ttl if it is
	// still held; it never creates it. It reports whether it was held.
	ExtendHold(ctx context.Context, key string, h Hold, ttl time.Duration) (bool, error)
	// ReleaseHold removes h and reports whether it was held. When it was
	// not and guard > 0, it leaves a release guard for h for guard, so that
	// an AcquireHold of h that the server executes later is refused (as
	// Node.Release does for a mutex).
	ReleaseHold(ctx context.Context, key string, h Hold, guard time.Duration) (bool, error)
}

// Hold is one acquisition of a shared lock on a ShapeNode. Group and ID
// identify it; the other fields only matter to AcquireHold.
type Hold struct {
	// Group: holds of one group share the lock, holds of different groups
	// exclude each other (the readers; one reentrant owner; a semaphore's
	// holders).
	Group string
	// ID is unique to the acquisition (the lease's token and owner
	// metadata); it contains no newline.
	ID string
	// Limit caps the live holds of the lock, 0 for no cap (a writer's 1, a
	// semaphore's K).
	Limit int
	// Waiter, when not empty, names a waiting writer: see AcquireHold.
	Waiter  string
	WaitTTL time.Duration
	// Yield refuses the acquire while any waiting mark is live (every read
	// hold of a read-write lock: only a writer with WithWriterPreference leaves
	// marks).
	Yield bool
}

// QueueNode is a Node that keeps a waiting line per lock and tells waiting
// clients when a lock is released: the optional capability behind
// WithFairQueue, and behind Lock's prompt wake-ups, one per release
// (docs/algorithm.md, "Waiting" and "Fair queue"). Without it Lock polls
// with its backoff alone. The line only ever makes an acquire fail that
// would otherwise succeed, and a release hands a key over only to a value
// a waiter's own acquire asked for, which its client counts only once an
// acquire of its takes the key over (a yes like any other), so it changes
// no safety argument (docs/handoff.md).
type QueueNode interface {
	Node
	// AcquireQueued is the Acquire of waiter w. In one atomic step: a
	// release guard of key and value refuses it (as Acquire's) before
	// anything changes; when key holds the value a release handed w (the
	// grant record names w.ID and that value) it takes the key over: key
	// is set to value for ttl, the record is deleted, w leaves the line,
	// and it reports acquired (a handed value equal to value is a retried
	// copy's: acquired, nothing changed); when nobody is in key's line it acquires exactly as
	// Acquire does (and enters w when another value holds key); otherwise
	// it drops the waiters whose entries expired, enters w when absent
	// (ordered by w.Arrival, then by w.ID; an entry keeps its first
	// arrival), sets w's entry to expire w.TTL from now, and acquires as
	// Acquire does only when it is w's turn: with w.Fair when w is the
	// line's first waiter; without, when w was in line before this call or
	// nobody else is (a newcomer joins the line behind those who wait).
	// Whenever w's entry is in the line afterwards, it records value and
	// ttl as w's (the hand-over's, below), unless w.TTL is a millisecond
	// or less (a fair TryLock's entry: it makes no second attempt). It also reads the lock's fencing
	// counter as AcquireFenced does (0 when absent). When key holds value
	// afterwards, w leaves the line and leaves no trace (no tombstone,
	// fair or not): a later AcquireQueued of w enters it again at its
	// arrival (the client sends none whose copy may still be late: it goes
	// on under a new ID).
	//
	// The hand-over (docs/handoff.md): a Release that deletes key, or a
	// LeaveQueue that leaves key free (below), hands key to the line's
	// first live waiter when its entry has a recorded value: key is set to
	// that value for its recorded ttl (the grant record lives as long), the
	// record is deleted (the waiter
	// keeps its place until it takes key over or leaves, so a waiter slow
	// to come loses nothing to those behind it, and its own release of the
	// handed key hands it nothing back), and watchers are told the
	// waiter's ID (Watch). A key expiring hands nothing over.
	AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, w Waiter) (acquired bool, fence int64, err error)
	// LeaveQueue removes w from key's line (a waiter that gave up). When
	// key holds the value a release handed w, that key is deleted and
	// handed over as after a Release. When w was the line's first waiter
	// and key is free, key is handed to the next one. Either way the
	// line's next waiter, if any, is then reported to watchers as after a
	// release; "" when w was the first and nobody is left (a handed key
	// released with nobody waiting is not reported). A waiter that
	// left this way stays out for w.TTL (a tombstone): an AcquireQueued of
	// w that the node executes later (a copy that was still on the
	// network) does not enter it again; it reports true only when key
	// already holds value (a retried copy) and false otherwise, changing
	// nothing (release guards still come first).
	LeaveQueue(ctx context.Context, key string, w Waiter) error
	// Watch calls fn each time a release on this node removes key's value
	// (Release) while someone is in key's waiting line, with the ID of the
	// line's first live waiter then; when the release handed that waiter
	// the key, the ID is followed by a newline and the value it was handed
	// at (the waiter's call may hold the lock with it: docs/handoff.md).
	// The same each time a LeaveQueue releases a handed key; each time a LeaveQueue of the line's
	// first waiter leaves key free, with the next one's ID ("" when none
	// is left); and each time a release removes one of key's holds
	// (ReleaseHold), with the line's first waiter or "". A notification
	// naming a waiter whose ID has a group (the part before its first ".",
	// as in "g.123") reaches the watches of that group only; the others
	// (an ID without one, "") reach the watches with group "". So a client
	// that gives its waiters' IDs its own group hears only of its own. A
	// release nobody waits for costs no notification, and a key that
	// expires is not reported. Notifications can be lost or late; a node
	// that knows it may have lost some (its connection broke and it
	// listens again) calls fn with a lone newline ("\n"), and the calls
	// that wait for its reports try again at once. fn is called from the
	// node's own goroutine and must not block.
	// Watch returns once the node listens for key, or with an error when
	// it cannot (ctx ended, the server refused: an ACL user without channel
	// permissions). stop ends the watch; it may be called more than once
	// and does not block on the network. Close ends every watch of the
	// node. Lock works without notifications, polling with its backoff
	// alone, and falls back to that when Watch fails (an implementation
	// that cannot watch returns an error) or a notification is lost.
	Watch(ctx context.Context, key, group string, fn func(next string)) (stop func(), err error)
}

// Waiter is one Lock call waiting in a lock's line (QueueNode).
type Waiter struct {
	// ID is unique to the Lock call; it contains no newline. The part
	// before its first ".", if any, is its group (QueueNode.Watch): the
	// client's.
	ID string
	// Arrival orders the line (in milliseconds since 1970 on the nodes;
	// ties are broken by ID): when the Lock call began, on its client's
	// clock.
	Arrival time.Time
	// TTL is how long the entry lives without another AcquireQueued: a
	// waiter that dies leaves the line after it.
	TTL time.Duration
	// Fair: the waiter takes the lock only in its turn (WithFairQueue).
	Fair bool
}

// ServerInfo identifies one run of a server.
type ServerInfo struct {
	// RunID is unique to one run of the server process (Redis's run_id).
	RunID string
	// Uptime is a lower bound of how long that run has held the data it
	// serves, that no step of the server's wall clock can inflate (redisnode
	// reports the main thread's CPU time: a clock stepped forward at boot
	// makes Redis's own uptime_in_seconds lie), or 0 when it may have lost
	// data more recently than that without a new RunID (a replica promoted
	// to master, at an unknown time) or cannot tell. The restart quarantine
	// treats a server met for the first time as having lost keys Uptime
	// ago.
	Uptime time.Duration
	// Settings holds the server's INFO fields that decide whether the
	// lock's assumptions hold (redis_version, maxmemory_policy,
	// aof_enabled, role, connected_slaves, ...; see NodeStateEvent.Findings),
	// keyed as INFO names them. The client judges them when it meets a run
	// of the server for the first time. nil when the node cannot tell; a
	// field it cannot tell is absent.
	Settings map[string]string
}

// ErrNotSent is wrapped by a Node's error when the call certainly did not
// reach the server (for example a refused connection on a client that never
// re-sends commands), so the call had no effect and needs no release.
// Implementations that cannot tell must not use it.
var ErrNotSent = errors.New("redlock: call not sent")
