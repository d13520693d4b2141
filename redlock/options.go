package redlock

import (
	"time"

	"github.com/quorumlock/quorumlock/clock"
)

// Defaults. Each option's doc names the default it overrides.
const (
	DefaultTTL            = 10 * time.Second
	DefaultDriftFactor    = 0.01
	DefaultNodeTimeout    = 50 * time.Millisecond
	DefaultReleaseTimeout = 100 * time.Millisecond
	DefaultRetryMin       = 10 * time.Millisecond
	DefaultRetryMax       = 250 * time.Millisecond
	DefaultMaxInFlight    = 16
	// DriftConstant is added to TTL*DriftFactor to form the drift allowance,
	// covering the millisecond granularity of Redis expiry.
	DriftConstant = 2 * time.Millisecond
)

// Config holds every setting of a Client or Mutex. Build it with options;
// Validate checks the fields against each other and against the number of
// nodes.
type Config struct {
	TTL            time.Duration
	DriftFactor    float64
	NodeTimeout    time.Duration
	ReleaseTimeout time.Duration
	// Quorum is the number of nodes that must agree; 0 means N/2+1.
	Quorum      int
	MinValidity time.Duration
	RetryMin    time.Duration
	RetryMax    time.Duration
	// MaxAttempts bounds Lock's attempts; 0 means until the context ends.
	MaxAttempts int
	MaxInFlight int
	Clock       clock.Clock
	OwnerLabel  string
	OwnerInfo   bool
}

func defaultConfig() Config {
	return Config{
		TTL:            DefaultTTL,
		DriftFactor:    DefaultDriftFactor,
		NodeTimeout:    DefaultNodeTimeout,
		ReleaseTimeout: DefaultReleaseTimeout,
		RetryMin:       DefaultRetryMin,
		RetryMax:       DefaultRetryMax,
		MaxInFlight:    DefaultMaxInFlight,
		Clock:          clock.Real{},
		OwnerInfo:      true,
	}
}

// Option sets one field of a Config. Options passed to New set the client's
// defaults; options passed to Client.NewMutex override them for one mutex.
type Option func(*Config)

// WithTTL sets the lock's time to live on each node. Default: DefaultTTL (10s).
// Must be positive and larger than the node and release timeouts.
func WithTTL(ttl time.Duration) Option { return func(c *Config) { c.TTL = ttl } }

// WithDriftFactor sets the clock drift allowance as a fraction of the TTL:
// drift = TTL*factor + DriftConstant, subtracted from the validity. It must
// cover the worst real clock-rate error between this process and the nodes.
// Default: DefaultDriftFactor (0.01). Must be in [0, 0.5).
func WithDriftFactor(f float64) Option { return func(c *Config) { c.DriftFactor = f } }

// WithNodeTimeout sets the deadline of each acquire and extend call on each
// node. Default: DefaultNodeTimeout (50ms), in the 5-50ms range the Redis
// docs suggest for a 10s TTL. Must be positive and below the TTL.
func WithNodeTimeout(d time.Duration) Option { return func(c *Config) { c.NodeTimeout = d } }

// WithReleaseTimeout sets the deadline of each release call (Unlock and the
// rollback of a failed acquire), which run on a context detached from the
// caller's so that a cancelled caller still cleans up. Default:
// DefaultReleaseTimeout (100ms). Must be positive and below the TTL.
func WithReleaseTimeout(d time.Duration) Option { return func(c *Config) { c.ReleaseTimeout = d } }

// WithQuorum overrides the number of nodes that must agree. Default: N/2+1.
// Must be in (N/2, N]: anything lower lets two holders coexist.
func WithQuorum(q int) Option { return func(c *Config) { c.Quorum = q } }

// WithMinValidity makes an acquisition fail (ErrNotObtained wrapping
// ErrValidityTooShort, with rollback) when less than d of validity remains
// once the quorum has answered. Default: 0 (any positive validity). Must be
// non-negative and below TTL minus the drift allowance.
func WithMinValidity(d time.Duration) Option { return func(c *Config) { c.MinValidity = d } }

// WithRetryBackoff sets Lock's delay between attempts: attempt k waits a
// random duration in [d/2, d] with d = min(max, min*2^k) (exponential
// backoff with jitter, so competing clients do not retry in lockstep).
// Default: DefaultRetryMin (10ms), DefaultRetryMax (250ms). Both must be
// non-negative and min <= max; 0, 0 retries without any delay.
func WithRetryBackoff(min, max time.Duration) Option {
	return func(c *Config) { c.RetryMin, c.RetryMax = min, max }
}

// WithMaxAttempts bounds the attempts Lock makes. Default: 0, meaning Lock
// retries until its context ends. Must be non-negative.
func WithMaxAttempts(n int) Option { return func(c *Config) { c.MaxAttempts = n } }

// WithMaxInFlight caps this client's calls outstanding on any one node. A
// node at the cap counts as failed for a round instead of queueing more work,
// so a paused node cannot grow goroutines or memory without bound. Default:
// DefaultMaxInFlight (16). Must be positive. Only the value given to New is
// used (the counters are per client).
func WithMaxInFlight(n int) Option { return func(c *Config) { c.MaxInFlight = n } }

// WithClock sets the clock used to measure validity and to wait between
// attempts. Default: clock.Real{} (monotonic). A client option: NewMutex
// rejects it.
func WithClock(cl clock.Clock) Option { return func(c *Config) { c.Clock = cl } }

// WithOwnerLabel stores a caller label (for example a service name) in the
// lock's value, visible to Inspect. Default: "".
func WithOwnerLabel(label string) Option { return func(c *Config) { c.OwnerLabel = label } }

// WithOwnerInfo says whether the hostname and pid are stored in the lock's
// value. Default: true.
func WithOwnerInfo(on bool) Option { return func(c *Config) { c.OwnerInfo = on } }

// Drift returns the drift allowance TTL*DriftFactor + DriftConstant.
func (c Config) Drift() time.Duration {
	return time.Duration(float64(c.TTL)*c.DriftFactor) + DriftConstant
}

// QuorumFor returns the quorum for n nodes: Quorum if set, else n/2+1.
func (c Config) QuorumFor(n int) int {
	if c.Quorum != 0 {
		return c.Quorum
	}
	return n/2 + 1
}

// Validate checks the fields against each other for a client of n nodes. Its
// errors wrap ErrInvalidConfig and name the bad value.
func (c Config) Validate(n int) error {
	switch {
	case n <= 0:
		return configError("no nodes")
	case c.TTL <= 0:
		return configError("TTL %v must be positive", c.TTL)
	case c.TTL < time.Millisecond:
		return configError("TTL %v is below Redis's 1ms resolution", c.TTL)
	case c.DriftFactor < 0 || c.DriftFactor >= 0.5 || c.DriftFactor != c.DriftFactor:
		return configError("drift factor %v must be in [0, 0.5)", c.DriftFactor)
	case c.NodeTimeout <= 0:
		return configError("node timeout %v must be positive", c.NodeTimeout)
	case c.NodeTimeout >= c.TTL:
		return configError("node timeout %v must be below the TTL %v", c.NodeTimeout, c.TTL)
	case c.ReleaseTimeout <= 0:
		return configError("release timeout %v must be positive", c.ReleaseTimeout)
	case c.ReleaseTimeout >= c.TTL:
		return configError("release timeout %v must be below the TTL %v", c.ReleaseTimeout, c.TTL)
	case c.Quorum != 0 && (c.Quorum <= n/2 || c.Quorum > n):
		return configError("quorum %d must be in (%d/2, %d] for %d nodes", c.Quorum, n, n, n)
	case c.Quorum < 0:
		return configError("quorum %d must not be negative", c.Quorum)
	case c.MinValidity < 0:
		return configError("minimum validity %v must not be negative", c.MinValidity)
	case c.MinValidity >= c.TTL-c.Drift():
		return configError("minimum validity %v must be below TTL %v minus drift %v", c.MinValidity, c.TTL, c.Drift())
	case c.RetryMin < 0:
		return configError("retry backoff minimum %v must not be negative", c.RetryMin)
	case c.RetryMax < 0:
		return configError("retry backoff maximum %v must not be negative", c.RetryMax)
	case c.RetryMin > c.RetryMax:
		return configError("retry backoff minimum %v is above maximum %v", c.RetryMin, c.RetryMax)
	case c.MaxAttempts < 0:
		return configError("max attempts %d must not be negative", c.MaxAttempts)
	case c.MaxInFlight <= 0:
		return configError("max in flight %d must be positive", c.MaxInFlight)
	case c.Clock == nil:
		return configError("nil clock")
	}
	return nil
}
