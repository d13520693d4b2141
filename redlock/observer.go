package redlock

import (
	"context"
	"errors"
	"time"
)

// Observer receives a client's events: what its operations took and how they
// ended, every node's answer, the end of every lease, fencing epochs,
// quarantines and the release backlog. Install it with WithObserver; the
// modules observe/prometheus and observe/otel are Observers, and WithLogger
// installs one that writes log/slog records.
//
// The client calls an Observer synchronously, from the goroutine where the
// event happens (the caller's, a node call's, a lease's timer or renewal, a
// backlog retry), possibly from many goroutines at once: its methods must be
// safe for concurrent use, cheap, and must never block (no network call, no
// lock held across one); a slow Observer slows the lock itself. They must not
// call back into the lock (Lease methods included) and must not keep the
// events' Err fields' nodes beyond the call if they modify them.
//
// Embed NopObserver to implement only some of the methods: methods added to
// Observer later then do nothing in your type.
type Observer interface {
	// OpStart is called when a lock operation begins: Lock, TryLock, the
	// wait of Do and of the lock shapes and Campaign (OpAcquire), Extend or
	// a renewal (OpExtend), Unlock or Resign (OpRelease). It returns the
	// context the operation runs under: ctx itself, or a context derived
	// from it (a span's, so that a node's own tracing, such as go-redis's
	// redisotel hooks, records its commands as the operation's children).
	OpStart(ctx context.Context, e OpEvent) context.Context
	// OpDone is called when the operation OpStart announced ends, with the
	// context OpStart returned, and e's Outcome, Took and Err filled in.
	OpDone(ctx context.Context, e OpEvent)
	// Attempt is called after each attempt of an acquisition (one round
	// over the nodes, with its rollback when it failed).
	Attempt(ctx context.Context, e AttemptEvent)
	// NodeCall is called when a call on one node ends: each node's vote in
	// an acquire or extend, a release, a fencing write-back, a queued
	// release's retry, a waiter leaving a node's line, Election.Leader's
	// read (NodeOp lists them). A node that needed no call is not reported.
	NodeCall(ctx context.Context, e NodeEvent)
	// LeaseEnd is called once per lease, when it ends: released, its
	// validity over, or found lost.
	LeaseEnd(ctx context.Context, e LeaseEndEvent)
	// Fence is called when a fencing token is handed out (WithFencing,
	// Election terms).
	Fence(ctx context.Context, e FenceEvent)
	// Quarantine is called when a node's restart quarantine starts
	// (WithRestartQuarantine).
	Quarantine(ctx context.Context, e QuarantineEvent)
	// Backlog is called when a node's queue of releases awaiting a retry
	// changes (see Client.Close).
	Backlog(ctx context.Context, e BacklogEvent)
	// ServerCheck is called when the client meets a run of a node's
	// server for the first time (its first contact, and after each
	// restart or failover), with what its settings mean for the lock.
	ServerCheck(ctx context.Context, e ServerCheckEvent)
}

// NopObserver is an Observer that does nothing. Embed it in an Observer of
// your own to implement only the methods you need.
type NopObserver struct{}

func (NopObserver) OpStart(ctx context.Context, _ OpEvent) context.Context { return ctx }
func (NopObserver) OpDone(context.Context, OpEvent)                        {}
func (NopObserver) Attempt(context.Context, AttemptEvent)                  {}
func (NopObserver) NodeCall(context.Context, NodeEvent)                    {}
func (NopObserver) LeaseEnd(context.Context, LeaseEndEvent)                {}
func (NopObserver) Fence(context.Context, FenceEvent)                      {}
func (NopObserver) Quarantine(context.Context, QuarantineEvent)            {}
func (NopObserver) Backlog(context.Context, BacklogEvent)                  {}
func (NopObserver) ServerCheck(context.Context, ServerCheckEvent)          {}

// LockInfo names the lock an event is about.
type LockInfo struct {
	// Name is the lock's name. There may be very many: put it on spans and
	// in logs, not on metric labels (map it to a class of your own first).
	Name string
	// Shape is the kind of lock.
	Shape Shape
	// Fenced: the lock hands out fencing tokens (WithFencing, Election).
	Fenced bool
}

// Shape is the kind of a lock, one of a few values (a metric label).
type Shape string

// The shapes.
const (
	ShapeMutex     Shape = "mutex"     // NewMutex
	ShapeReentrant Shape = "reentrant" // NewReentrant
	ShapeRead      Shape = "read"      // an RWMutex's read leases
	ShapeWrite     Shape = "write"     // an RWMutex's write lease
	ShapeSemaphore Shape = "semaphore" // NewSemaphore
	ShapeElection  Shape = "election"  // NewElection
)

// Op is a lock operation.
type Op string

// The operations.
const (
	OpAcquire Op = "acquire" // Lock, TryLock, Do's wait, Campaign
	OpExtend  Op = "extend"  // Extend, and the renewals of WithAutoRenew, Do and Election
	OpRelease Op = "release" // Unlock, Resign, Do's release
)

// Outcome is how an operation or an attempt ended, one of a few values (a
// metric label).
type Outcome string

// The outcomes.
const (
	// OutcomeOK: acquired, extended, released.
	OutcomeOK Outcome = "ok"
	// OutcomeContended: another owner held the lock on at least one node
	// and no quorum was reached.
	OutcomeContended Outcome = "contended"
	// OutcomeNoQuorum: too few nodes answered yes, none of them because
	// another owner held the lock (they failed, timed out, were busy or
	// quarantined).
	OutcomeNoQuorum Outcome = "no_quorum"
	// OutcomeTooLate: a quorum was reached with too little validity left
	// (ErrValidityTooShort), or its fencing write-back failed.
	OutcomeTooLate Outcome = "too_late"
	// OutcomeLost: more than N-quorum nodes no longer held the token
	// (ErrLockLost).
	OutcomeLost Outcome = "lost"
	// OutcomeEnded: Extend or Unlock of a lease that had already ended.
	OutcomeEnded Outcome = "ended"
	// OutcomeCanceled: the caller's context ended first.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeClosed: the client was closed (ErrClosed).
	OutcomeClosed Outcome = "closed"
	// OutcomeDenied: a node denied access (ErrNodeDenied).
	OutcomeDenied Outcome = "denied"
	// OutcomeInvalid: one server was found behind two nodes
	// (ErrInvalidConfig).
	OutcomeInvalid Outcome = "invalid"
)

// OpEvent is a lock operation (Observer.OpStart, Observer.OpDone).
type OpEvent struct {
	Op   Op
	Lock LockInfo
	// Renewal: an extend made by the lease's own renewal (WithAutoRenew,
	// Do, Election), not by a call of Extend.
	Renewal bool

	// The fields below are set for OpDone only.

	// Outcome is how the operation ended.
	Outcome Outcome
	// Took is the time since OpStart. For OpAcquire it is the whole wait:
	// every attempt and the backoff between them.
	Took time.Duration
	// Attempts is the number of attempts an OpAcquire made.
	Attempts int
	// Fence is the fencing token of a lease acquired with fencing, else 0.
	Fence int64
	// Err is the operation's error (nil for OutcomeOK): a *QuorumError
	// names every node's result.
	Err error
}

// AttemptEvent is one attempt of an acquisition (Observer.Attempt).
type AttemptEvent struct {
	Lock    LockInfo
	Outcome Outcome
	// Took is the attempt's duration, its fencing write-back and (when it
	// failed) the wait for the rollback on the nodes that had said yes
	// included.
	Took time.Duration
	// Yes is the number of yes votes by the decision, Quorum the number
	// needed.
	Yes, Quorum int
	// RolledBack: the attempt failed and what it took was released.
	RolledBack bool
	// Err is the attempt's error (nil when it acquired the lock).
	Err error
}

// NodeOp is what a call on one node did, one of a few values (a metric
// label).
type NodeOp string

// The node calls.
const (
	NodeAcquire  NodeOp = "acquire"  // a vote in an acquisition
	NodeExtend   NodeOp = "extend"   // a vote in an Extend or renewal
	NodeFence    NodeOp = "fence"    // the fencing token's write-back
	NodeRelease  NodeOp = "release"  // Unlock's release
	NodeRollback NodeOp = "rollback" // the release of a failed attempt
	NodeRetry    NodeOp = "retry"    // a queued release, retried
	NodePeek     NodeOp = "peek"     // Election.Leader's read of one node
	NodeLeave    NodeOp = "leave"    // a waiter leaving a node's line
)

// Vote is one node's answer, or why there was none, one of a few values (a
// metric label).
type Vote string

// The answers.
const (
	VoteYes         Vote = "yes"
	VoteTaken       Vote = "taken"       // another owner holds the lock, or a release guard refused (ErrNodeTaken)
	VoteNotHeld     Vote = "not_held"    // the token is not there (ErrNodeNotHeld)
	VoteQuarantined Vote = "quarantined" // the yes vote did not count (ErrNodeQuarantined)
	VoteBusy        Vote = "busy"        // the in-flight cap kept the call from being sent (ErrNodeBusy)
	VoteTimeout     Vote = "timeout"     // the call's deadline passed
	VoteRefused     Vote = "refused"     // the call was certainly not sent: the connection was refused (ErrNotSent)
	VoteDenied      Vote = "denied"      // the server denied access (ErrNodeDenied)
	VoteCanceled    Vote = "canceled"    // the caller's context ended first
	VoteError       Vote = "error"       // any other error (a Redis error reply, a reset connection)
)

// NodeEvent is one call on one node (Observer.NodeCall).
type NodeEvent struct {
	Lock LockInfo
	Op   NodeOp
	// Node is the node's Addr, Index its position in the client's nodes.
	Node  string
	Index int
	Vote  Vote
	// Took is the call's duration (the node's first contact, which reads
	// its server identity, included).
	Took time.Duration
	// Err is the node's error (nil for VoteYes).
	Err error
}

// LeaseEnd is how a lease ended, one of a few values (a metric label).
type LeaseEnd string

// The ends of a lease.
const (
	// LeaseReleased: Unlock (or Resign, or the end of Do's function).
	LeaseReleased LeaseEnd = "released"
	// LeaseExpired: its validity deadline passed without a renewal or
	// Extend moving it (renewals failed, or there were none).
	LeaseExpired LeaseEnd = "expired"
	// LeaseLost: an Extend or renewal found more than N-quorum nodes
	// without its token.
	LeaseLost LeaseEnd = "lost"
)

// LeaseEndEvent is the end of a lease (Observer.LeaseEnd).
type LeaseEndEvent struct {
	Lock LockInfo
	End  LeaseEnd
	// Held is the time from the acquisition to the end.
	Held time.Duration
	// Fence is the lease's fencing token (0 without fencing).
	Fence int64
	// Err is the lease's Err(): for LeaseExpired after failed renewals it
	// wraps the last renewal's *QuorumError.
	Err error
}

// FenceEvent is a fencing token handed out (Observer.Fence).
type FenceEvent struct {
	Lock  LockInfo
	Token int64
	// Epoch: fewer than a quorum of the counters read existed (a new lock,
	// counters lost in a restart or removed after WithFenceRetention), so
	// the token started a new epoch from the clock (docs/algorithm.md,
	// "Fencing tokens").
	Epoch bool
	// Present is the number of counters found among the Read nodes read.
	Present, Read int
}

// QuarantineEvent is the start of a node's restart quarantine
// (Observer.Quarantine).
type QuarantineEvent struct {
	Node  string
	Index int
	// RunID is the server run that is quarantined.
	RunID string
	// Restart: a new run of a server the client knew (a restart or a
	// failover); otherwise a server met for the first time younger than
	// the quarantine.
	Restart bool
	// For is how long its yes votes will not count.
	For time.Duration
}

// ServerCheckEvent is what a client found in a node's server settings when
// it met a run of the server for the first time (Observer.ServerCheck):
// the checks of quorumlock doctor that the node's ServerInfo.Settings can
// tell (docs/operations.md). Findings lists what puts the lock's
// assumptions at risk; it is empty when the settings are sound or the node
// reports none. A finding that the client's restart quarantine covers (a
// master without AOF, or with replicas a failover could promote) is left
// out when WithRestartQuarantine is on and the node is not one it exempts
// as durable.
type ServerCheckEvent struct {
	Node  string
	Index int
	// RunID is the server run checked.
	RunID    string
	Findings []ServerFinding
}

// ServerFinding is one finding of a ServerCheckEvent.
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

// BacklogChange is what happened to a node's release backlog, one of a few
// values (a metric label).
type BacklogChange string

// The changes.
const (
	BacklogQueued    BacklogChange = "queued"    // a release that failed was queued for retry (or merged into a queued one of the same key and value)
	BacklogDone      BacklogChange = "done"      // a retry got an answer (or a refused connection): the entry left the queue
	BacklogDropped   BacklogChange = "dropped"   // a retry the server refused (denied, an error reply): its key expires with its TTL
	BacklogAbandoned BacklogChange = "abandoned" // Close gave up on it: its key expires with its TTL
)

// BacklogEvent is a change of one node's release backlog
// (Observer.Backlog).
type BacklogEvent struct {
	Lock   LockInfo
	Node   string
	Index  int
	Change BacklogChange
	// Len is the node's backlog length after the change (its pending
	// releases, one per lock key and value; the queue has no cap), Delta
	// the change of it: +1 (queued), -1 (an entry left it), 0 (a release
	// merged into a queued one of the same key and value, or one refused
	// without entering: abandoned after Close gave up). Sum Delta over
	// clients for a total.
	Len, Delta int
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

func (os observers) Attempt(ctx context.Context, e AttemptEvent) {
	for _, o := range os {
		o.Attempt(ctx, e)
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

func (os observers) Fence(ctx context.Context, e FenceEvent) {
	for _, o := range os {
		o.Fence(ctx, e)
	}
}

func (os observers) Quarantine(ctx context.Context, e QuarantineEvent) {
	for _, o := range os {
		o.Quarantine(ctx, e)
	}
}

func (os observers) Backlog(ctx context.Context, e BacklogEvent) {
	for _, o := range os {
		o.Backlog(ctx, e)
	}
}

func (os observers) ServerCheck(ctx context.Context, e ServerCheckEvent) {
	for _, o := range os {
		o.ServerCheck(ctx, e)
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

// outcomeOf classifies an operation's or attempt's error.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled // a QuorumError wraps only the caller's context's error
	case errors.Is(err, ErrClosed):
		return OutcomeClosed
	case errors.Is(err, ErrInvalidConfig):
		return OutcomeInvalid
	case errors.Is(err, ErrLockLost):
		return OutcomeLost
	case errors.Is(err, ErrValidityTooShort):
		return OutcomeTooLate
	}
	var qe *QuorumError
	if !errors.As(err, &qe) {
		return OutcomeNoQuorum
	}
	out := OutcomeNoQuorum
	for _, r := range qe.Nodes {
		switch {
		case errors.Is(r.Err, ErrNodeDenied):
			return OutcomeDenied
		case errors.Is(r.Err, ErrNodeTaken):
			out = OutcomeContended
		}
	}
	if qe.reached {
		return OutcomeTooLate
	}
	return out
}

// voteOf classifies one node's result.
func voteOf(err error) Vote {
	switch {
	case err == nil:
		return VoteYes
	case errors.Is(err, ErrNodeTaken):
		return VoteTaken
	case errors.Is(err, ErrNodeNotHeld):
		return VoteNotHeld
	case errors.Is(err, ErrNodeQuarantined):
		return VoteQuarantined
	case errors.Is(err, ErrNodeBusy):
		return VoteBusy
	case errors.Is(err, ErrNodeDenied):
		return VoteDenied
	case errors.Is(err, context.DeadlineExceeded):
		return VoteTimeout
	case errors.Is(err, context.Canceled):
		return VoteCanceled
	case errors.Is(err, ErrNotSent):
		return VoteRefused
	}
	return VoteError
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
	if e.Outcome == "" {
		e.Outcome = outcomeOf(e.Err)
	}
	o.OpDone(ctx, e)
}
