package redlock

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
)

// driftConstant is added to TTL*DriftFactor to form the drift allowance,
// covering the millisecond granularity of Redis expiry.
const driftConstant = 2 * time.Millisecond

// clientConfig holds the settings shared by every lock of a Client.
type clientConfig struct {
	knobs          knobs.Set   // test-only switches, read once by New
	quorum         int         // 0 means N/2+1, unless quorumGiven
	quorumGiven    bool        // WithQuorum was given (the last of WithQuorum and WithQuorumOf)
	sets           []quorumSet // WithQuorumOf, in order
	nodeTimeout    time.Duration
	releaseTimeout time.Duration
	driftFactor    float64
	maxInFlight    int
	ownerLabel     string
	quarantine     bool
	quarantineFor  time.Duration // 0: the longest TTL (+ lock-delay) of the client's mutexes
	durable        []string      // Addrs exempt from the quarantine
	observers      []Observer    // WithObserver, in order
	logger         *slog.Logger  // WithLogger
	nilObserver    bool          // WithObserver(nil) or WithLogger(nil): refused by validate
}

// lockConfig holds the settings of one Mutex.
type lockConfig struct {
	ttl         time.Duration
	minValidity time.Duration
	retryMin    time.Duration
	retryMax    time.Duration
	maxWait     time.Duration // 0: until the context ends
	lockDelay   time.Duration
	renew       float64 // fraction of the TTL between renewals; 0: off
	fencing     bool
	// fenceKeep is how long a fencing counter is kept after its last
	// write-back when keepSet (WithFenceRetention), 0 for ever; see
	// fenceRetention for the default.
	fenceKeep   time.Duration
	keepSet     bool
	preferWrite bool // WithWriterPreference (NewRWMutex only)
	fair        bool // WithFairQueue (NewMutex only)
	// cancelMargin is how long before the validity deadline Do cancels
	// its function's context (WithCancelMargin; a tenth of the TTL unless
	// marginSet).
	cancelMargin time.Duration
	marginSet    bool
}

func defaultClientConfig() clientConfig {
	return clientConfig{
		nodeTimeout:    50 * time.Millisecond,
		releaseTimeout: 100 * time.Millisecond,
		driftFactor:    0.01,
		maxInFlight:    16,
	}
}

func defaultLockConfig() lockConfig {
	return lockConfig{
		ttl:      10 * time.Second,
		retryMin: 10 * time.Millisecond,
		retryMax: 250 * time.Millisecond,
	}
}

// ClientOption configures a Client (New).
type ClientOption func(*clientConfig)

// LockOption configures one lock (Client.NewMutex).
type LockOption func(*lockConfig)

// WithQuorum sets the number of nodes that must agree. Default: N/2+1. Must
// be in (N/2, N]: anything lower lets two holders coexist.
//
// New refuses exactly two nodes unless WithQuorum(2) is given: the quorum of
// 2 nodes is both of them, so one node down stops every lock, which is no
// better than one node and fails twice as often. WithQuorum(2) says that
// this is intended.
//
// It replaces any WithQuorumOf given before it (and WithQuorumOf replaces
// it): the last of them decides.
func WithQuorum(q int) ClientOption {
	return func(c *clientConfig) { c.quorum, c.quorumGiven, c.sets = q, true, nil }
}

// WithQuorumOf makes every decision need need yes votes among the nodes at
// these indexes (into New's nodes), besides those of every other
// WithQuorumOf: a client in joint mode, changing its masters from one set
// to another, needs a quorum of the old set and a quorum of the new
// (package reconfig gives both; docs/reconfig.md, "Joint mode"). A node in
// both sets counts for both. Default: not given, one quorum (WithQuorum)
// of all nodes. Given, it replaces that quorum (a WithQuorum given before
// it is dropped; one given after it drops the sets): it may be given at
// most twice, each need must be in (size/2, size] for its set, and every
// node must be in a set. Errors (from New) wrap
// ErrInvalidConfig and name the set and the bad value. NewElection's
// campaigns, leaders and terms and NewSemaphore's bound (for each set) use
// the same sets.
func WithQuorumOf(need int, nodes ...int) ClientOption {
	nodes = slices.Clone(nodes)
	return func(c *clientConfig) {
		c.quorum, c.quorumGiven, c.sets = 0, false, append(c.sets, quorumSet{need: need, nodes: nodes})
	}
}

// WithNodeTimeout sets the deadline of each acquire and extend call on each
// node. Default: 50ms (the Redis docs suggest 5-50ms for a 10s TTL). Must be
// positive and leave validity: below every lock's TTL less the drift
// allowance (WithDriftFactor); the lock's constructor (NewMutex, ...)
// refuses a lock it leaves none, naming both values.
func WithNodeTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.nodeTimeout = d }
}

// WithReleaseTimeout sets the deadline of each release call (Unlock and the
// rollback of a failed acquire), which runs on a context detached from the
// caller's so that a cancelled caller still cleans up. Default: 100ms. Must
// be positive and below every lock's TTL.
func WithReleaseTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.releaseTimeout = d }
}

// WithDriftFactor sets the clock drift allowance as a fraction of the TTL:
// drift = TTL*f + 2ms is subtracted from every validity (and a lock delay d
// is written as d/(1-f), see WithLockDelay). It must cover the worst real
// clock-rate error between this process and the nodes. Default: 0.01. Must
// be in [0, 0.5).
func WithDriftFactor(f float64) ClientOption { return func(c *clientConfig) { c.driftFactor = f } }

// WithMaxInFlight caps this client's calls outstanding on any one node
// (acquires, extends, releases and their retries together). A node at the
// cap counts as failed for a round (ErrNodeBusy) instead of queueing more
// work, so a paused node cannot grow goroutines or memory without bound.
// Default: 16. Must be positive.
func WithMaxInFlight(n int) ClientOption { return func(c *clientConfig) { c.maxInFlight = n } }

// WithOwnerLabel stores a label (for example a service name) in every lock
// value next to the token, the hostname and the process id, for operators
// reading the keys. Default: "".
func WithOwnerLabel(label string) ClientOption {
	return func(c *clientConfig) { c.ownerLabel = label }
}

// WithRestartQuarantine refuses the yes votes of a server that may have
// lost keys a lease relies on: a server whose run (run_id) the client has
// known for less than d, or that was younger than d when the client first
// met it, stays in quarantine until d has passed. A master that restarts
// without its keys (no persistence, or a promoted replica that lacked them)
// would otherwise let a second client in while the first still holds the
// lock; after d every key it lost has expired anyway. Every yes vote is
// judged by the server's own Info, read right after the vote (one more round
// trip per yes vote), so a restart is caught whichever client saw what
// before and whichever connection survived it (docs/algorithm.md, "Restart
// quarantine"). A quarantined node's vote still takes the key, which is
// released like any other; the node's result says ErrNodeQuarantined. Nodes
// whose Addr is in durable (masters with appendfsync always, which keep
// their keys) are exempt. d = 0 selects the longest TTL plus lock-delay of
// the client's mutexes. A positive d must cover how long every lock's keys
// live (its TTL plus its lock delay, stretched as WithLockDelay says): a
// shorter quarantine protects nothing, and the lock's constructor (NewMutex,
// NewElection, NewRWMutex, ...) refuses such a lock with ErrInvalidConfig,
// naming both values. Default: off.
func WithRestartQuarantine(d time.Duration, durable ...string) ClientOption {
	return func(c *clientConfig) {
		c.quarantine, c.quarantineFor, c.durable = true, d, durable
	}
}

// WithTTL sets the lock's time to live on each node. Default: 10s. Must be at
// least 1ms, above the client's release timeout and above its node timeout
// plus the drift allowance (WithNodeTimeout), and,
// with its lock delay, at most the client's restart quarantine when one is
// set (WithRestartQuarantine).
func WithTTL(ttl time.Duration) LockOption { return func(l *lockConfig) { l.ttl = ttl } }

// WithMinValidity makes an acquisition fail (ErrNotObtained wrapping
// ErrValidityTooShort, with rollback) when less than d of validity remains
// once the quorum has answered. Default: 0 (any positive validity). Must be
// non-negative and below the TTL minus the drift allowance.
func WithMinValidity(d time.Duration) LockOption {
	return func(l *lockConfig) { l.minValidity = d }
}

// WithRetryBackoff sets Lock's delay between attempts: after failed attempt
// k it waits a random duration in [d/2, d] with d = min(max, min*2^k), so
// competing clients do not retry in lockstep. On nodes that report
// releases (QueueNode.Watch) a waiting call also wakes when the holder releases
// (docs/algorithm.md, "Waiting"): a woken call without a place in the
// nodes' line (a shape's hold) then tries after a random delay under four
// times its last attempt's duration, so that the calls of several clients
// woken by one release do not split the vote (a release wakes only the
// line's first waiter). A call that holds on the keys releases hand it (a mutex without
// fencing, on nodes that keep a line and report releases, without a
// restart quarantine on a non-durable node: docs/handoff.md) hears its
// turn and does not poll: after an attempt that a quorum refused for a
// held lock it sleeps [d/2, d] with d = min(max, TTL/4) (at least min),
// unless WithMaxWait's bound comes first.
// Default: 10ms, 250ms. Both must
// be non-negative with min <= max, and min must be positive unless max is 0
// (0, 0 retries without any delay).
func WithRetryBackoff(min, max time.Duration) LockOption {
	return func(l *lockConfig) { l.retryMin, l.retryMax = min, max }
}

// WithMaxWait bounds how long Lock, and Do before it runs its function,
// wait for the lock: no attempt starts once d has passed since the call
// began, and the call then fails with the last attempt's error (wrapping
// ErrNotObtained). It bounds the wait only: Do's function runs under the
// caller's context, however long the wait took, so a caller can give the
// wait and the work different bounds (Lock alone can take a context with a
// deadline instead). Default: 0, meaning until the context ends. Must be
// non-negative.
func WithMaxWait(d time.Duration) LockOption { return func(l *lockConfig) { l.maxWait = d } }

// WithLockDelay keeps the lock from being taken again for d after a lease
// ends without Unlock (it expired, was lost, or its process died), so that
// writes still in flight from the old holder land before a new holder
// starts (Consul's lock-delay, Chubby's). The nodes enforce it: the keys are
// written with a time to live of TTL + d/(1-f), f the drift factor (see
// WithDriftFactor), so that a node whose clock runs fast by f still keeps
// them d past the lease's validity, which is computed from the TTL alone; on
// an exact clock the lock is then unavailable for up to d/(1-f) (1% more
// than d by default). Unlock deletes them at once. Default: 0 (off). Must be
// non-negative.
func WithLockDelay(d time.Duration) LockOption { return func(l *lockConfig) { l.lockDelay = d } }

// WithAutoRenew makes every lease of the mutex renew itself (Extend) each
// time fraction of the TTL has passed since its last acquire or extend, with
// ±10% jitter. A renewal recomputes the validity like an acquire, never runs
// once Unlock has begun, never resurrects an expired lease (Extend refuses
// after the deadline), and after a failure retries only while the current
// validity lasts: when it runs out, Done closes. Renewal goroutines end with
// the lease. fraction 0 selects 1/3. Default: off. Must be in [0, 1).
func WithAutoRenew(fraction float64) LockOption {
	return func(l *lockConfig) {
		l.renew = fraction
		if fraction == 0 {
			l.renew = defaultRenew
		}
	}
}

// WithCancelMargin sets how long before a lease's validity deadline Mutex.Do
// cancels its function's context when no renewal has moved the deadline. The
// deadline already lies before the earliest moment the keys can expire on a
// quorum (drift included); the margin covers the time between the deadline
// and the function noticing: a process starved of CPU runs its timers late
// (docs/algorithm.md measures it). Default: a tenth of the TTL. Must be at
// least 0 and below the TTL minus the drift allowance.
func WithCancelMargin(d time.Duration) LockOption {
	return func(l *lockConfig) { l.cancelMargin, l.marginSet = d, true }
}

// defaultRenew is the renewal fraction of WithAutoRenew(0) and of Do.
const defaultRenew = 1.0 / 3

// WithFencing gives every lease a fencing token (Lease.Fence) that is
// strictly greater than the token of every lease of the same lock granted
// before it, across different quorums: the acquire reads each node's counter
// in the same atomic step, the token is the maximum plus one, and before the
// lease is returned the token is written back (compare-and-raise, only where
// our key still holds) to a quorum, which every later quorum intersects. It
// costs one more round trip per acquisition. When fewer than a quorum of
// the counters read exist (a new lock, or masters that restarted without
// persistence and lost them) the token starts a new epoch from the clock
// (microseconds since 1970), so a token never repeats after counters are
// lost, provided the clients' clocks agree to better than the time between
// two such losses. A counter a restart brings back from the disk (an older
// RDB snapshot, an AOF that lost its tail) carries the server run that
// wrote it and reads as lost, so the token starts a new epoch then too
// (docs/algorithm.md, "Fencing tokens, monotonic across quorums"). Every
// node must implement FencingNode (NewMutex says which does not). Default:
// off.
func WithFencing() LockOption { return func(l *lockConfig) { l.fencing = true } }

// WithFenceRetention sets how long a fenced lock's counter (the key
// "{name}:fence" on each Redis node) is kept after the last acquisition
// wrote it back: d after it, the node deletes it, so the counters of lock
// names that are no longer used do not pile up. d = 0 keeps them for ever.
//
// It is safe because of the epoch rule (WithFencing, docs/algorithm.md
// "Fence counter cleanup"): a lock whose counters are gone starts a new
// epoch from the clock, and its last token was written back at least d
// before, so the new token is higher as long as no client's clock is d or
// more behind another's (and no node's clock jumps forward by d). A lock in
// use keeps its counters: every acquisition renews them for d. Clients of one
// lock should use the same d (the shortest in use is the one that counts).
// Nodes that do not implement FenceExpiryNode keep their counters for ever.
// It needs WithFencing; d must be 0 or at least the TTL plus the lock delay
// (a counter outlives the lease that wrote it), at most 100 years. Default:
// 24h, or the TTL plus the lock delay when that is longer.
func WithFenceRetention(d time.Duration) LockOption {
	return func(l *lockConfig) { l.fenceKeep, l.keepSet = d, true }
}

// defaultFenceRetention is WithFenceRetention's default (or the TTL plus
// the lock delay, when longer).
const defaultFenceRetention = 24 * time.Hour

// fenceRetention is how long l's fencing counters are kept after a
// write-back, 0 for ever.
func (l lockConfig) fenceRetention(c clientConfig) time.Duration {
	if l.keepSet {
		return l.fenceKeep
	}
	return max(defaultFenceRetention, l.keyTTL(c))
}

// keyTTL is the time to live l's keys are written with: the TTL plus the
// lock delay stretched by the drift factor f, d/(1-f), so that a node whose
// clock runs fast by f still keeps them d past the validity's end (the
// validity itself is computed from the TTL alone).
func (l lockConfig) keyTTL(c clientConfig) time.Duration {
	d := l.lockDelay
	switch {
	case c.knobs.NoLockDelay: // test-only switch (internal/knobs)
		return l.ttl
	case d > 0 && !c.knobs.NoLockDelayStretch: // test-only switch: the delay as given
		d = time.Duration(math.Ceil(float64(d) / (1 - c.driftFactor)))
	}
	return l.ttl + d
}

func (c clientConfig) quorumFor(n int) int {
	if c.quorum != 0 {
		return c.quorum
	}
	return n/2 + 1
}

func (c clientConfig) drift(ttl time.Duration) time.Duration {
	if c.knobs.NoDrift {
		return 0
	}
	return time.Duration(float64(ttl)*c.driftFactor) + driftConstant
}

// validate checks the client's fields against each other for n nodes, and,
// when l is not nil, a lock's fields against them. Errors wrap
// ErrInvalidConfig and name the bad value.
func validate(n int, c clientConfig, l *lockConfig) error {
	switch {
	case n <= 0:
		return configError("no nodes")
	case c.quorumGiven && (c.quorum <= n/2 || c.quorum > n):
		return configError("quorum %d must be in (%d/2, %d] for %d nodes", c.quorum, n, n, n)
	case n == 2 && !c.quorumGiven && len(c.sets) == 0:
		return configError("2 nodes tolerate no failure (the quorum is both): use 3 or more, or WithQuorum(2) to accept that")
	case c.nodeTimeout <= 0:
		return configError("node timeout %v must be positive", c.nodeTimeout)
	case c.releaseTimeout <= 0:
		return configError("release timeout %v must be positive", c.releaseTimeout)
	case c.driftFactor < 0 || c.driftFactor >= 0.5 || c.driftFactor != c.driftFactor:
		return configError("drift factor %v must be in [0, 0.5)", c.driftFactor)
	case c.maxInFlight <= 0:
		return configError("max in flight %d must be positive", c.maxInFlight)
	case c.quarantineFor < 0:
		return configError("restart quarantine %v must not be negative", c.quarantineFor)
	case c.nilObserver:
		return configError("WithObserver or WithLogger: nil (leave the option out for none)")
	}
	if l == nil {
		return nil
	}
	switch {
	case l.ttl < time.Millisecond:
		return configError("TTL %v must be at least 1ms (Redis's resolution)", l.ttl)
	case c.nodeTimeout >= l.ttl:
		return configError("node timeout %v must be below the TTL %v", c.nodeTimeout, l.ttl)
	case c.releaseTimeout >= l.ttl:
		return configError("release timeout %v must be below the TTL %v", c.releaseTimeout, l.ttl)
	case l.minValidity < 0:
		return configError("minimum validity %v must not be negative", l.minValidity)
	case l.minValidity >= l.ttl-c.drift(l.ttl):
		return configError("minimum validity %v must be below TTL %v minus drift %v", l.minValidity, l.ttl, c.drift(l.ttl))
	case c.nodeTimeout >= l.ttl-c.drift(l.ttl):
		return configError("node timeout %v leaves no validity of the TTL %v (less drift %v): an acquire whose quorum answers at the node timeout could never be used", c.nodeTimeout, l.ttl, c.drift(l.ttl))
	case l.retryMin < 0 || l.retryMax < 0:
		return configError("retry backoff %v..%v must not be negative", l.retryMin, l.retryMax)
	case l.retryMin > l.retryMax:
		return configError("retry backoff minimum %v is above maximum %v", l.retryMin, l.retryMax)
	case l.retryMin == 0 && l.retryMax > 0:
		return configError("retry backoff minimum 0 with maximum %v never backs off (min*2^k stays 0): use a positive minimum, or 0, 0 for no delay", l.retryMax)
	case l.maxWait < 0:
		return configError("max wait %v must not be negative", l.maxWait)
	case l.lockDelay < 0:
		return configError("lock delay %v must not be negative", l.lockDelay)
	case l.ttl > maxKeyTTL || l.lockDelay > maxKeyTTL-l.ttl:
		return configError("TTL %v plus lock delay %v must not exceed %v", l.ttl, l.lockDelay, maxKeyTTL)
	case c.quarantine && c.quarantineFor > 0 && c.quarantineFor < l.keyTTL(c):
		return configError("restart quarantine %v is shorter than the lock's keys live (TTL %v plus lock delay %v: %v): a node restarted without them would vote while they still hold elsewhere; use at least %v, or 0 for the longest in use", c.quarantineFor, l.ttl, l.lockDelay, l.keyTTL(c), l.keyTTL(c))
	case l.renew < 0 || l.renew >= 1 || l.renew != l.renew:
		return configError("auto-renew fraction %v must be in [0, 1)", l.renew)
	case l.renew > 0 && time.Duration(float64(l.ttl)*l.renew) < time.Millisecond:
		return configError("auto-renew fraction %v of TTL %v renews every %v, below 1ms (Redis's resolution)", l.renew, l.ttl, time.Duration(float64(l.ttl)*l.renew))
	case l.marginSet && (l.cancelMargin < 0 || l.cancelMargin >= l.ttl-c.drift(l.ttl)):
		return configError("cancel margin %v must be in [0, TTL %v minus drift %v)", l.cancelMargin, l.ttl, c.drift(l.ttl))
	case l.keepSet && !l.fencing:
		return configError("fence retention %v applies to fenced locks only (WithFencing)", l.fenceKeep)
	case l.fenceKeep < 0 || l.fenceKeep > maxKeyTTL:
		return configError("fence retention %v must be in [0, %v]", l.fenceKeep, maxKeyTTL)
	case l.fenceKeep > 0 && l.fenceKeep < l.keyTTL(c):
		return configError("fence retention %v must be 0 (for ever) or at least the TTL %v plus the lock delay %v (its keys live %v): a counter must outlive the lease that wrote it", l.fenceKeep, l.ttl, l.lockDelay, l.keyTTL(c))
	}
	return nil
}

// maxKeyTTL bounds a lock key's TTL plus lock-delay: far beyond any real
// lock, and far from overflowing a time.Duration or Redis's milliseconds.
const maxKeyTTL = wire.MaxKeyTTL

// checkName rejects lock names that cannot keep every key of one lock in one
// Redis Cluster hash slot (a name containing '{' or '}' must carry a valid
// hash tag, a non-empty {...}, which then picks the slot), and names that
// are another lock's derived keys (internal/wire): a name with a hash tag
// that ends in ":fence", ":waiting", ":queue", ":queue:ttl", ":queue:val",
// ":grant" or contains ":release-guard:", for it would read, extend or
// delete another lock's fencing counter, waiting marks, waiting line (its
// expiries, its values), grant record or release guards; and a name that
// is a hash tag and nothing else ("{x}"), whose derived keys are those of
// the lock "x" (wire.BareTag): a waiter of one would stand in the other's
// line, and a release of one would hand its key to the other's waiter.
// The name is quoted in the error, cut to 64 bytes. bareTags
// (knobs.BareTagNames, test-only) lets the last kind through.
func checkName(name string, bareTags bool) error {
	if name == "" {
		return configError("empty lock name")
	}
	if !strings.ContainsAny(name, "{}") {
		return nil
	}
	if !wire.HasTag(name) {
		return configError("lock name %s has '{' or '}' but no valid hash tag (a non-empty {...}); Redis Cluster could not keep its keys in one slot", shownName(name))
	}
	if inner, ok := wire.BareTag(name); ok && !bareTags {
		return configError("lock name %s is a hash tag and nothing else: its waiting line, fencing counter and other derived keys would be those of the lock %s; name it %s (the same hash slot)", shownName(name), shownName(inner), shownName(inner))
	}
	switch _, k := wire.Parse(name); k {
	case wire.LockKey, wire.Term: // a term record is a lock key of its own
	case wire.Guard:
		return configError("lock name %s contains %q with a hash tag: that is the form of a lock's release guards, reserved", shownName(name), k.Mark())
	default:
		return configError("lock name %s ends in %q with a hash tag: that is the key where a lock keeps its %s, reserved", shownName(name), k.Mark(), k)
	}
	return nil
}

// shownName quotes a lock name for an error, cut to 64 bytes.
func shownName(name string) string {
	const limit = 64
	if len(name) <= limit {
		return strconv.Quote(name)
	}
	return strconv.Quote(name[:limit]) + fmt.Sprintf("... (%d bytes)", len(name))
}
