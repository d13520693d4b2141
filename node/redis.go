package node

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of the Redis adapter.
const (
	// DefaultCallTimeout bounds every call of the adapter when the caller's
	// context has a later deadline or none. The coordinator normally passes a
	// much shorter per-node deadline.
	DefaultCallTimeout = 500 * time.Millisecond
	// DefaultMaxInFlight bounds the calls outstanding on one node, including
	// calls the adapter stopped waiting for because their context ended but
	// whose client has not returned yet.
	DefaultMaxInFlight = 64
	// DefaultDialTimeout is the dial timeout of clients built by Dial.
	DefaultDialTimeout = 250 * time.Millisecond
)

// Redis is a Node backed by a go-redis v9 client. It is safe for concurrent
// use by multiple goroutines.
type Redis struct {
	client      redis.UniversalClient
	addr        string
	callTimeout time.Duration
	// honoursCtx is true when the client applies context deadlines to socket
	// I/O (Options.ContextTimeoutEnabled); otherwise every call runs in its own
	// goroutine and the adapter stops waiting at the deadline.
	honoursCtx bool
	// noRetries is true when the client never re-sends a command, so a
	// refused dial means the call had no effect (ErrNotSent).
	noRetries bool
	slots     chan struct{}
	owned     bool
}

var _ Node = (*Redis)(nil)

// Option configures a Redis adapter.
type Option func(*config)

type config struct {
	addr        string
	callTimeout time.Duration
	maxInFlight int
	clientOpts  []func(*redis.Options)
}

// WithAddr sets the identity reported by Addr. Default: the address the
// client was built with (Dial's addr, or the client's Options().Addr).
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithCallTimeout bounds every call; the effective deadline is the earlier of
// this and the context's. Default: DefaultCallTimeout. Must be positive.
func WithCallTimeout(d time.Duration) Option { return func(c *config) { c.callTimeout = d } }

// WithMaxInFlight caps the calls outstanding on this node; a call over the cap
// fails at once with ErrOverloaded. Default: DefaultMaxInFlight. Must be
// positive.
func WithMaxInFlight(n int) Option { return func(c *config) { c.maxInFlight = n } }

// WithClientOptions lets Dial's caller adjust the go-redis options (password,
// TLS, DB, ...) after the lock-friendly defaults are set. Ignored by NewRedis.
func WithClientOptions(f func(*redis.Options)) Option {
	return func(c *config) { c.clientOpts = append(c.clientOpts, f) }
}

func buildConfig(opts []Option) (config, error) {
	c := config{callTimeout: DefaultCallTimeout, maxInFlight: DefaultMaxInFlight}
	for _, o := range opts {
		o(&c)
	}
	if c.callTimeout <= 0 {
		return c, fmt.Errorf("node: call timeout %v must be positive", c.callTimeout)
	}
	if c.maxInFlight <= 0 {
		return c, fmt.Errorf("node: max in flight %d must be positive", c.maxInFlight)
	}
	return c, nil
}

// LockClientOptions returns go-redis options fit for a lock client of one
// master at addr: context deadlines applied to socket I/O, no command retries
// (a retry could re-send an acquire whose first copy is still queued), one
// dial attempt, small timeouts.
func LockClientOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           DefaultDialTimeout,
		ReadTimeout:           DefaultCallTimeout,
		WriteTimeout:          DefaultCallTimeout,
		PoolTimeout:           DefaultCallTimeout,
		DisableIdentity:       true,
		Protocol:              2,
	}
}

// Dial builds a Redis adapter with its own client for the master at addr,
// configured by LockClientOptions. Close releases the client. It does not
// contact the server.
func Dial(addr string, opts ...Option) (*Redis, error) {
	if addr == "" {
		return nil, errors.New("node: empty address")
	}
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	ro := LockClientOptions(addr)
	for _, f := range c.clientOpts {
		f(ro)
	}
	r := newRedis(redis.NewClient(ro), addr, c)
	r.owned = true
	return r, nil
}

// NewRedis wraps a client the caller built. The caller keeps ownership: Close
// does not close it. Whatever the client's settings, every call returns by its
// deadline: when the client does not apply context deadlines to socket I/O
// (go-redis's default), the call runs in its own goroutine and the adapter
// stops waiting at the deadline; at most WithMaxInFlight such calls are
// outstanding at once.
func NewRedis(client redis.UniversalClient, opts ...Option) (*Redis, error) {
	if client == nil {
		return nil, errors.New("node: nil client")
	}
	c, err := buildConfig(opts)
	if err != nil {
		return nil, err
	}
	addr := c.addr
	if addr == "" {
		if cl, ok := client.(*redis.Client); ok {
			addr = cl.Options().Addr
		}
	}
	if addr == "" {
		return nil, errors.New("node: cannot tell the client's address; pass WithAddr")
	}
	return newRedis(client, addr, c), nil
}

func newRedis(client redis.UniversalClient, addr string, c config) *Redis {
	if c.addr != "" {
		addr = c.addr
	}
	honours, noRetries := false, false
	if cl, ok := client.(*redis.Client); ok {
		honours = cl.Options().ContextTimeoutEnabled
		// go-redis normalises MaxRetries: -1 (none) becomes 0, 0 (default) becomes 3.
		noRetries = cl.Options().MaxRetries <= 0
	}
	return &Redis{
		client:      client,
		addr:        addr,
		callTimeout: c.callTimeout,
		honoursCtx:  honours,
		noRetries:   noRetries,
		slots:       make(chan struct{}, c.maxInFlight),
	}
}

// Addr returns the node's identity.
func (r *Redis) Addr() string { return r.addr }

// Client returns the underlying go-redis client.
func (r *Redis) Client() redis.UniversalClient { return r.client }

// Close closes the client if Dial built it; a client passed to NewRedis is
// left open.
func (r *Redis) Close() error {
	if r.owned {
		return r.client.Close()
	}
	return nil
}

// InFlight reports how many calls are outstanding on this node.
func (r *Redis) InFlight() int { return len(r.slots) }

// call runs fn bounded by the call timeout and ctx. It returns an error
// wrapping ctx.Err() when the deadline or cancellation ended the wait.
func (r *Redis) call(ctx context.Context, fn func(context.Context) error) error {
	select {
	case r.slots <- struct{}{}:
	default:
		return ErrOverloaded
	}
	ctx, cancel := context.WithTimeout(ctx, r.callTimeout)
	if r.honoursCtx {
		defer cancel()
		defer func() { <-r.slots }()
		return r.classify(withCtxErr(ctx, fn(ctx)))
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-r.slots }()
		defer cancel()
		done <- fn(ctx)
	}()
	select {
	case err := <-done:
		return r.classify(withCtxErr(ctx, err))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// classify marks a refused dial as ErrNotSent when the client does not
// retry commands (with retries, an earlier copy may have been sent before the
// connection broke).
func (r *Redis) classify(err error) error {
	var op *net.OpError
	if err != nil && r.noRetries && errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return err
}

// withCtxErr makes sure an error caused by the context ending wraps ctx.Err(),
// whatever go-redis made of it (a net timeout, for instance).
func withCtxErr(ctx context.Context, err error) error {
	if err == nil {
		return err
	}
	cerr := ctx.Err()
	if cerr == nil {
		// go-redis sets the socket deadline to the context deadline, so the
		// socket can time out a moment before the context reports it.
		var ne net.Error
		if dl, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() && time.Until(dl) < 5*time.Millisecond {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w (%v)", cerr, err)
}

// GuardKey names the release-guard key that Release leaves for key and value.
func GuardKey(key, value string) string {
	sum := sha256.Sum256([]byte(value))
	return key + ":release-guard:" + hex.EncodeToString(sum[:12])
}

func ttlMillis(ttl time.Duration) (int64, error) {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return 0, fmt.Errorf("node: ttl %v is below one millisecond", ttl)
	}
	return ms, nil
}

// Acquire implements Node.
func (r *Redis) Acquire(ctx context.Context, key, value string, ttl time.Duration) (AcquireResult, error) {
	ms, err := ttlMillis(ttl)
	if err != nil {
		return Taken, err
	}
	var n int64
	err = r.call(ctx, func(ctx context.Context) error {
		var err error
		n, err = acquireScript.Run(ctx, r.client, []string{key, GuardKey(key, value)}, value, ms).Int64()
		return err
	})
	if err != nil {
		return Taken, err
	}
	switch n {
	case 1:
		return Acquired, nil
	case -1:
		return Refused, nil
	}
	return Taken, nil
}

// Extend implements Node.
func (r *Redis) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	ms, err := ttlMillis(ttl)
	if err != nil {
		return false, err
	}
	var n int64
	err = r.call(ctx, func(ctx context.Context) error {
		var err error
		n, err = extendScript.Run(ctx, r.client, []string{key}, value, ms).Int64()
		return err
	})
	return err == nil && n == 1, err
}

// Release implements Node.
func (r *Redis) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	var gms int64
	if guard > 0 {
		gms = max(guard.Milliseconds(), 1)
	}
	var n int64
	err := r.call(ctx, func(ctx context.Context) error {
		var err error
		n, err = releaseScript.Run(ctx, r.client, []string{key, GuardKey(key, value)}, value, gms).Int64()
		return err
	})
	return err == nil && n == 1, err
}

// Inspect implements Node.
func (r *Redis) Inspect(ctx context.Context, key string) (Holder, error) {
	var res []any
	err := r.call(ctx, func(ctx context.Context) error {
		var err error
		res, err = inspectScript.Run(ctx, r.client, []string{key}).Slice()
		return err
	})
	if err != nil {
		return Holder{}, err
	}
	if len(res) != 2 {
		return Holder{}, fmt.Errorf("node: inspect.lua returned %d values, want 2", len(res))
	}
	pttl, _ := res[1].(int64)
	value, ok := res[0].(string)
	if !ok {
		return Holder{}, nil
	}
	h := Holder{Exists: true, Value: value}
	switch {
	case pttl >= 0:
		h.TTL = time.Duration(pttl) * time.Millisecond
	case pttl == -1:
		h.TTL = -1
	}
	return h, nil
}

// Info implements Node: it reads run_id, uptime_in_seconds and redis_version
// from INFO server.
func (r *Redis) Info(ctx context.Context) (ServerInfo, error) {
	var text string
	err := r.call(ctx, func(ctx context.Context) error {
		var err error
		text, err = r.client.Info(ctx, "server").Result()
		return err
	})
	if err != nil {
		return ServerInfo{}, err
	}
	return parseServerInfo(r.addr, text)
}

func parseServerInfo(addr, text string) (ServerInfo, error) {
	si := ServerInfo{Addr: addr}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			si.RunID = v
		case "redis_version":
			si.Version = v
		case "uptime_in_seconds":
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return si, fmt.Errorf("node: bad uptime_in_seconds %q from %s: %w", v, addr, err)
			}
			si.Uptime = time.Duration(s) * time.Second
		}
	}
	if si.RunID == "" {
		return si, fmt.Errorf("node: INFO server from %s has no run_id", addr)
	}
	return si, nil
}

// LoadScripts loads every Lua script of the adapter into the server's script
// cache (SCRIPT LOAD). Calls do not need it, since EVALSHA falls back to EVAL
// on NOSCRIPT, but it surfaces a script the server rejects at start-up.
func (r *Redis) LoadScripts(ctx context.Context) error {
	for _, s := range scripts {
		err := r.call(ctx, func(ctx context.Context) error { return s.script.Load(ctx, r.client).Err() })
		if err != nil {
			return fmt.Errorf("node: loading %s into %s: %w", s.name, r.addr, err)
		}
	}
	return nil
}

// DiscardClientLog replaces go-redis's process-wide logger with one that
// drops everything. go-redis logs every failed dial to stderr; with a quorum
// lock a dead master is routine, and its failures are already reported per
// node in the lock's errors. It affects every go-redis client in the process.
func DiscardClientLog() { redis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
