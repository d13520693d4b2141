package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/quorumlock/quorumlock/internal/obslabel"
)

// Observer receives a client's events: its operations (OpStart, OpDone),
// every call on a node (NodeCall), the end of every lease (LeaseEnd), and
// what the client learns about a node (NodeState: a run of its server met,
// with its restart quarantine and the check of its settings, or a change of
// its release backlog). Install it with WithObserver; the modules
// observe/redlockprometheus and observe/redlockotel are Observers, and
// WithLogger installs one that writes log/slog records.
//
// Events carry errors, not classifications: an event's Err is nil when the
// operation, call or lease went as asked, and otherwise wraps this package's
// sentinels, which errors.Is tells apart (ErrNodeTaken, ErrNodeBusy,
// ErrNoReply, ErrNodeDenied, ErrNodeQuarantined, ErrNotSent, ErrLockLost,
// context.Canceled and context.DeadlineExceeded, ...; see each event).
//
// The client calls an Observer synchronously, from the goroutine where the
// event happens (the caller's, a node call's, a lease's timer or renewal, a
// backlog retry), possibly from many goroutines at once: its methods must be
// safe for concurrent use, cheap, and must never block (no network call, no
// lock held across one); a slow Observer slows the lock itself. They must not
// call back into the lock (Lease methods included) and must not modify the
// events' Err values.
//
// Embed NopObserver to implement only some of the methods: methods added to
// Observer later then do nothing in your type.
type Observer interface {
	// OpStart is called when a lock operation begins: Lock, TryLock, the
	// wait of Do and Campaign (OpAcquire), Extend or a renewal (OpExtend),
	// Unlock or Resign (OpRelease). It returns the context the operation
	// runs under: ctx itself, or a context derived from it (a span's, so
	// that a node's own tracing, such as go-redis's redisotel hooks, records
	// its commands as the operation's children).
	OpStart(ctx context.Context, e OpEvent) context.Context
	// OpDone is called when the operation OpStart announced ends, with the
	// context OpStart returned, and e's Took, Attempts, Fence, FenceEpoch
	// and Err filled in.
	OpDone(ctx context.Context, e OpEvent)
	// NodeCall is called when a call on one node ends: each node's vote in
	// an acquire or extend, a release, a rollback, a fencing write-back, a
	// queued release's retry, a waiter leaving a node's line,
	// Election.Leader's read (Op says which). A node that needed no call is
	// not reported.
	NodeCall(ctx context.Context, e NodeEvent)
	// LeaseEnd is called once per lease, when it ends: released, its
	// validity over, or found lost.
	LeaseEnd(ctx context.Context, e LeaseEndEvent)
	// NodeState is called when the client meets a run of a node's server
	// for the first time (its first contact, and after each restart or
	// failover), and when a node's queue of releases awaiting a retry
	// changes (see Client.Close).
	NodeState(ctx context.Context, e NodeStateEvent)
}

// NopObserver is an Observer that does nothing. Embed it in an Observer of
// your own to implement only the methods you need. It is safe for
// concurrent use.
type NopObserver struct{}

// OpStart returns ctx.
func (NopObserver) OpStart(ctx context.Context, _ OpEvent) context.Context { return ctx }

// OpDone does nothing.
func (NopObserver) OpDone(context.Context, OpEvent) {}

// NodeCall does nothing.
func (NopObserver) NodeCall(context.Context, NodeEvent) {}

// LeaseEnd does nothing.
func (NopObserver) LeaseEnd(context.Context, LeaseEndEvent) {}

// NodeState does nothing.
func (NopObserver) NodeState(context.Context, NodeStateEvent) {}

// LockInfo names the lock an event is about.
type LockInfo struct {
	// Name is the lock's name. There may be very many: put it on spans and
	// in logs, not on metric labels (map it to a class of your own first).
	Name string
	// Shape is the kind of lock, one of a few values (a metric label):
	// "mutex" (NewMutex), "reentrant" (NewReentrant), "read" and "write"
	// (NewRWMutex's two mutexes), "semaphore" (NewSemaphore), "election"
	// (NewElection).
	Shape string
	// Fenced: the lock hands out fencing tokens (WithFencing, Election).
	Fenced bool
}

// The shapes (LockInfo.Shape).
const (
	shapeMutex     = "mutex"
	shapeReentrant = "reentrant"
	shapeRead      = "read"
	shapeWrite     = "write"
	shapeSemaphore = "semaphore"
	shapeElection  = "election"
)

// Op is what a lock operation (OpEvent) or a call on one node (NodeEvent)
// does, one of a few values (a metric label). An operation is OpAcquire,
// OpExtend or OpRelease; a node call is any of them.
type Op string

// The operations and node calls.
const (
	OpAcquire  Op = "acquire"  // Lock, TryLock, Do's wait, Campaign; on a node, its vote
	OpExtend   Op = "extend"   // Extend, and the renewals of WithAutoRenew, Do and Election; on a node, its vote
	OpRelease  Op = "release"  // Unlock, Resign, Do's release; on a node, its release
	OpFence    Op = "fence"    // node call: the fencing token's write-back
	OpRollback Op = "rollback" // node call: the release of a failed attempt
	OpRetry    Op = "retry"    // node call: a queued release, retried
	OpPeek     Op = "peek"     // node call: Election.Leader's read of one node
	OpLeave    Op = "leave"    // node call: a waiter leaving a node's line
)

// OpEvent is a lock operation (Observer.OpStart, Observer.OpDone).
type OpEvent struct {
	Op   Op
	Lock LockInfo
	// Renewal: an extend made by the lease's own renewal (WithAutoRenew,
	// Do, Election), not by a call of Extend.
	Renewal bool

	// The fields below are set for OpDone only.

	// Took is the time since OpStart. For OpAcquire it is the whole wait:
	// every attempt and the backoff between them.
	Took time.Duration
	// Attempts is the number of attempts an OpAcquire made (one round over
	// the nodes each, with its rollback when it failed). A Lock that held
	// with the keys a release handed it made no round after its last
	// failed one (docs/handoff.md).
	Attempts int
	// Fence is the fencing token of a lease acquired with fencing, else 0.
	Fence int64
	// FenceEpoch: an OpAcquire's Fence started a new epoch from the clock,
	// because fewer than a quorum of the fencing counters read existed (a
	// new lock, counters lost in a restart or removed after
	// WithFenceRetention; docs/algorithm.md, "Fencing tokens").
	FenceEpoch bool
	// Err is the operation's error, nil when it acquired, extended or
	// released: the error the caller got. When the nodes decided it, it is
	// a *QuorumError, which names every node's result (ErrNodeTaken in one
	// of them: the lock was contended) and wraps ErrNotObtained,
	// ErrNotExtended, ErrNotReleased or ErrLockLost, and
	// ErrValidityTooShort when a quorum came too late. Otherwise it wraps
	// ErrReleased (an Extend or Unlock of a lease already unlocked),
	// ErrLockLost (of a lease already expired or lost), ErrClosed or
	// ErrInvalidConfig. It wraps context.Canceled or
	// context.DeadlineExceeded only when the caller's context ended.
	Err error
}

// NodeEvent is one call on one node (Observer.NodeCall).
type NodeEvent struct {
	Lock LockInfo
	Op   Op
	// Node is the node's Addr, Index its position in the client's nodes.
	Node  string
	Index int
	// Took is the call's duration (the node's first contact, which reads
	// its server identity, included).
	Took time.Duration
	// Err is nil when the node said yes (acquired, extended, released,
	// raised, read, left). Otherwise: ErrNodeTaken (another owner holds the
	// lock, or a release guard refused), ErrNodeNotHeld (the token is not
	// there), ErrNodeQuarantined (the yes vote did not count), ErrNodeBusy
	// (the in-flight cap kept the call from being sent), ErrNodeDenied
	// (the server denied access), ErrNotSent (the connection was refused),
	// an error wrapping context.DeadlineExceeded (the call's deadline
	// passed) or context.Canceled (the caller's context ended), or the
	// node's own error (a Redis error reply, a reset connection).
	Err error
}

// LeaseEndEvent is the end of a lease (Observer.LeaseEnd).
type LeaseEndEvent struct {
	Lock LockInfo
	// Held is the time from the acquisition to the end.
	Held time.Duration
	// Fence is the lease's fencing token (0 without fencing).
	Fence int64
	// Err is nil when the lease was released (Unlock, Resign, the end of
	// Do's function); otherwise the lease's Err(), which wraps ErrLockLost:
	// its validity deadline passed without a renewal or Extend moving it
	// (Expired; after failed renewals it also wraps the last renewal's
	// *QuorumError), or an Extend or renewal found more than N-quorum
	// nodes without its token.
	Err error
	// Expired: the lease ended because its validity deadline passed.
	Expired bool
}

// NodeStateEvent is a change of what a client knows about one node
// (Observer.NodeState): it met a run of the node's server for the first
// time (RunID is set), or the node's release backlog changed (RunID is
// empty; Lock, Backlog, Delta and Err say how).
type NodeStateEvent struct {
	// Node is the node's Addr, Index its position in the client's nodes.
	Node  string
	Index int

	// RunID is the server run met (ServerInfo.RunID); empty for a backlog
	// change.
	RunID string
	// Restart: the run is a new one of a server the client knew (a restart
	// or a failover); otherwise the client met the server for the first
	// time.
	Restart bool
	// Quarantine is how long the run's yes votes will not count
	// (WithRestartQuarantine: a new run, or a first one younger than the
	// quarantine); 0 for none.
	Quarantine time.Duration
	// Findings is what the client found in the run's settings
	// (ServerInfo.Settings): the checks of quorumlock doctor that they can
	// tell (docs/operations.md), listing what puts the lock's assumptions
	// at risk; empty when the settings are sound or the node reports none.
	// A finding that the client's restart quarantine covers (a master
	// without AOF, or with replicas a failover could promote) is left out
	// when WithRestartQuarantine is on and the node is not one it exempts
	// as durable.
	Findings []ServerFinding

	// Lock is the lock of the release that changed the backlog.
	Lock LockInfo
	// Backlog is the node's backlog length after the change (its pending
	// releases, one per lock key and value; the queue has no cap), Delta
	// the change of it: +1 (a release that failed was queued for retry),
	// -1 (an entry left it), 0 (a release merged into a queued one of the
	// same key and value, or one refused without entering after Close gave
	// up). Sum Delta over clients for a total.
	Backlog, Delta int
	// Err is nil when the release was queued, merged, or left the backlog
	// answered (or its connection refused: nothing runs there any more).
	// Otherwise the release was given up unconfirmed and its key expires
	// with its TTL: an error wrapping ErrClosed when Close gave up on it,
	// or the node's refusal of a retry (ErrNodeDenied, an error reply).
	Err error
}

// ServerFinding is one finding of a server check (NodeStateEvent.Findings).
type ServerFinding struct {
	// Level is "bad" (an assumption fails: keys with a TTL can be evicted,
	// the node is a replica, the server runs no Lua, its disk refuses
	// writes) or "warn" (it fails in some event: a crash without
	// appendfsync always, a failover).
	Level string
	// Check names the setting: "version", "maxmemory-policy",
	// "persistence", "disk", "role", "cluster".
	Check string
	// Text says what was found and what to do, in one line.
	Text string
}

// WithObserver has the client report its events to o (see Observer), in
// addition to the observers of earlier WithObserver options and of
// WithLogger, in the order given. Default: none (no event is built and
// nothing is allocated for it). o must not be nil.
func WithObserver(o Observer) ClientOption {
	return func(c *clientConfig) {
		if o == nil {
			c.nilObserver = true
			return
		}
		c.observers = append(c.observers, o)
	}
}

// observers is several Observers as one, in order.
type observers []Observer

func (os observers) OpStart(ctx context.Context, e OpEvent) context.Context {
	for _, o := range os {
		ctx = o.OpStart(ctx, e)
	}
	return ctx
}

func (os observers) OpDone(ctx context.Context, e OpEvent) {
	for _, o := range os {
		o.OpDone(ctx, e)
	}
}

func (os observers) NodeCall(ctx context.Context, e NodeEvent) {
	for _, o := range os {
		o.NodeCall(ctx, e)
	}
}

func (os observers) LeaseEnd(ctx context.Context, e LeaseEndEvent) {
	for _, o := range os {
		o.LeaseEnd(ctx, e)
	}
}

func (os observers) NodeState(ctx context.Context, e NodeStateEvent) {
	for _, o := range os {
		o.NodeState(ctx, e)
	}
}

// observer returns the client's Observer for cfg: nil when there is none.
func observerFor(cfg clientConfig) Observer {
	var all []Observer
	if cfg.logger != nil {
		all = append(all, &slogObserver{log: cfg.logger})
	}
	all = append(all, cfg.observers...)
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	return observers(all)
}

// outcomeOf labels an operation's error (OpEvent.Err) for logs and
// metrics: "ok", "canceled" (the caller's context ended), "closed",
// "invalid" (ErrInvalidConfig), "ended" (an Extend or Unlock of a lease
// already unlocked), "lost", "too_late" (ErrValidityTooShort), "denied" (a
// node denied access), "contended" (another owner held the lock on a node)
// or "no_quorum" (too few nodes said yes for other reasons: they failed,
// timed out, were busy or quarantined). The observe modules use it through
// internal/obslabel.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled" // a QuorumError wraps only the caller's context's error
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrInvalidConfig):
		return "invalid"
	case errors.Is(err, ErrReleased):
		return "ended"
	case errors.Is(err, ErrLockLost):
		return "lost"
	case errors.Is(err, ErrValidityTooShort):
		return "too_late"
	}
	out := "no_quorum"
	var qe *QuorumError
	if errors.As(err, &qe) {
		for _, r := range qe.Nodes {
			switch {
			case errors.Is(r.Err, ErrNodeDenied):
				return "denied"
			case errors.Is(r.Err, ErrNodeTaken):
				out = "contended"
			}
		}
	}
	return out
}

// voteOf labels one node's result (NodeEvent.Err, NodeResult.Err): "yes",
// "taken", "not_held", "quarantined", "busy", "denied", "timeout",
// "canceled", "refused" (ErrNotSent) or "error" (anything else).
func voteOf(err error) string {
	switch {
	case err == nil:
		return "yes"
	case errors.Is(err, ErrNodeTaken):
		return "taken"
	case errors.Is(err, ErrNodeNotHeld):
		return "not_held"
	case errors.Is(err, ErrNodeQuarantined):
		return "quarantined"
	case errors.Is(err, ErrNodeBusy):
		return "busy"
	case errors.Is(err, ErrNodeDenied):
		return "denied"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrNotSent):
		return "refused"
	}
	return "error"
}

// leaseEndOf labels a lease's end: "released", "expired" or "lost".
func leaseEndOf(e LeaseEndEvent) string {
	switch {
	case e.Err == nil:
		return "released"
	case e.Expired:
		return "expired"
	}
	return "lost"
}

// backlogChangeOf labels a backlog change (a NodeStateEvent without
// RunID): "queued" (or merged), "done", "dropped" (the node refused a
// retry) or "abandoned" (Close gave up).
func backlogChangeOf(e NodeStateEvent) string {
	switch {
	case errors.Is(e.Err, ErrClosed):
		return "abandoned"
	case e.Err != nil:
		return "dropped"
	case e.Delta >= 0:
		return "queued"
	}
	return "done"
}

func init() {
	obslabel.Outcome = outcomeOf
	obslabel.Vote = voteOf
	obslabel.LeaseEnd = func(err error, expired bool) string { return leaseEndOf(LeaseEndEvent{Err: err, Expired: expired}) }
	obslabel.BacklogChange = func(err error, delta int) string { return backlogChangeOf(NodeStateEvent{Err: err, Delta: delta}) }
}

// opStart reports the start of op on m's lock and returns the context to
// run it under, and its start time (zero without an observer).
func (m *Mutex) opStart(ctx context.Context, op Op, renewal bool) (context.Context, time.Time) {
	o := m.c.obs
	if o == nil {
		return ctx, time.Time{}
	}
	return o.OpStart(ctx, OpEvent{Op: op, Lock: m.info, Renewal: renewal}), time.Now()
}

// opDone reports the end of an operation opStart began at start.
func (m *Mutex) opDone(ctx context.Context, e OpEvent, start time.Time) {
	o := m.c.obs
	if o == nil {
		return
	}
	e.Lock = m.info
	e.Took = time.Since(start)
	o.OpDone(ctx, e)
}
