package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client coordinates locks over a fixed set of nodes. Create it with New and
// call Close to wait for background cleanup before exiting. A Client is safe
// for concurrent use by multiple goroutines.
type Client struct {
	cfg     clientConfig
	members []*member
	owner   string // URL-encoded host, pid and label stored after the token
	work    tracker

	closed     atomic.Bool   // Close was called: no new acquisitions
	closing    chan struct{} // closed when Close is called: retry at once
	giveUp     chan struct{} // closed when Close gives up on queued releases
	closeOnce  sync.Once
	giveUpOnce sync.Once

	idSem  chan struct{} // one identification pass at a time (identity.go)
	idMu   sync.Mutex
	runIDs map[string]int // server run_id -> index of the member that reported it
	dupErr atomic.Pointer[error]

	maxTTL atomic.Int64 // longest TTL + lock-delay of the client's mutexes
}

// member is one node with the client's bookkeeping for it.
type member struct {
	node       Node
	addr       string
	inflight   atomic.Int32
	identified atomic.Bool // member of the identified set (identity.go)
	lagging    atomic.Bool // its last call failed or timed out (Unlock does not wait for it)
	idFailed   atomic.Bool // its last identity read failed
	probeMu    sync.Mutex
	probing    chan struct{} // under probeMu; closed when the running probe ends
	durable    bool          // exempt from the restart quarantine

	// Restart quarantine state, under mu.
	runID       string
	quarantined time.Time // votes count again from this moment on

	mu        sync.Mutex
	backlog   []pendingRelease
	draining  bool
	abandoned int // releases dropped by Close (or the backlog cap) unconfirmed
}

// tryTake takes one of the node's in-flight slots; the count never exceeds
// limit, not even for a moment (Stats reads it).
func (m *member) tryTake(limit int) bool {
	for {
		n := m.inflight.Load()
		if n >= int32(limit) {
			return false
		}
		if m.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (m *member) give() { m.inflight.Add(-1) }

// New returns a Client over nodes. It does not contact them: each node's
// server identity is read before its first vote (together with every other
// node's, see docs/algorithm.md, "One vote per server"), and a server listed
// twice under different addresses (127.0.0.1:6379 and localhost:6379) makes
// the operation that finds it and every later one fail with
// ErrInvalidConfig, so that one server never casts two votes.
//
// Defaults: quorum N/2+1, node timeout 50ms, release timeout 100ms, drift
// factor 0.01, 16 calls in flight per node, no owner label. Errors wrap
// ErrInvalidConfig and name the bad value: no nodes, a nil node, two nodes
// with the same Addr, an option out of range, or exactly 2 nodes without
// WithQuorum(2) (both are the quorum: one node down stops every lock, so it
// must be asked for). An even number of nodes
// works, but tolerates no more failures than the odd number below it while
// adding a node that can fail: prefer odd N.
func New(nodes []Node, opts ...ClientOption) (*Client, error) {
	cfg := defaultClientConfig()
	for i, o := range opts {
		if o == nil {
			return nil, configError("client option %d of %d is nil", i, len(opts))
		}
		o(&cfg)
	}
	if err := validate(len(nodes), cfg, nil); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, closing: make(chan struct{}), giveUp: make(chan struct{}), idSem: make(chan struct{}, 1), runIDs: map[string]int{}}
	seen := map[string]int{}
	for i, n := range nodes {
		if isNil(n) {
			return nil, configError("node %d is nil", i)
		}
		addr := n.Addr()
		if j, dup := seen[addr]; dup {
			return nil, configError("duplicate node address %q (nodes %d and %d)", addr, j, i)
		}
		seen[addr] = i
		c.members = append(c.members, &member{node: n, addr: addr})
	}
	for _, d := range cfg.durable {
		j, ok := seen[d]
		if !ok {
			return nil, configError("WithRestartQuarantine: durable node %q is not one of the nodes", d)
		}
		c.members[j].durable = true
	}
	q := url.Values{}
	if host, err := os.Hostname(); err == nil {
		q.Set("host", host)
	}
	q.Set("pid", strconv.Itoa(os.Getpid()))
	if cfg.ownerLabel != "" {
		q.Set("label", cfg.ownerLabel)
	}
	c.owner = "?" + q.Encode()
	return c, nil
}

// isNil reports whether n is nil or a typed nil pointer (a nil *T in an
// interface), which would panic on its first method call.
func isNil(n Node) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// NewMutex returns a mutex for the lock called name, which is the Redis key
// of the lock on every node (with Redis Cluster nodes, the name's hash slot,
// or its {hash tag}, picks the shard). It does not contact the nodes.
//
// Defaults: TTL 10s, no minimum validity, retry backoff 10ms-250ms, retries
// until the context ends. Errors wrap ErrInvalidConfig and name the bad
// value: an empty name, a name with '{' or '}' but no valid hash tag, or an
// option out of range or inconsistent with the client's (a TTL not above the
// node timeout, for example).
func (c *Client) NewMutex(name string, opts ...LockOption) (*Mutex, error) {
	return c.newMutex("NewMutex", name, nil, opts)
}

// newMutex builds the lock of a constructor (named in errors): a mutex
// when hold is nil, else a shared lock whose acquisitions are holds like
// hold (shapes.go).
func (c *Client) newMutex(ctor, name string, hold *Hold, opts []LockOption) (*Mutex, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	l := defaultLockConfig()
	for i, o := range opts {
		if o == nil {
			return nil, configError("%s %q: lock option %d of %d is nil", ctor, name, i, len(opts))
		}
		o(&l)
	}
	if err := validate(len(c.members), c.cfg, &l); err != nil {
		return nil, err
	}
	if err := c.checkShape(ctor, hold, l); err != nil {
		return nil, err
	}
	for keyTTL := int64(l.ttl + l.lockDelay); ; {
		cur := c.maxTTL.Load()
		if cur >= keyTTL || c.maxTTL.CompareAndSwap(cur, keyTTL) {
			break
		}
	}
	if l.fencing {
		for i, m := range c.members {
			if _, ok := m.node.(FencingNode); !ok {
				return nil, configError("WithFencing: node %d (%s, %T) does not implement FencingNode", i, m.addr, m.node)
			}
		}
	}
	return &Mutex{c: c, name: name, cfg: l, quorum: c.cfg.quorumFor(len(c.members)), drift: c.cfg.drift(l.ttl), hold: hold}, nil
}

// Stats is a snapshot of a client's per-node work, in node order.
type Stats struct {
	// InFlight counts this client's calls outstanding on each node; it never
	// exceeds the WithMaxInFlight cap.
	InFlight []int
	// Backlog counts the releases waiting on each node for a retry.
	Backlog []int
}

// Stats returns the client's per-node work, for monitoring and tests.
func (c *Client) Stats() Stats {
	s := Stats{InFlight: make([]int, len(c.members)), Backlog: make([]int, len(c.members))}
	for i, m := range c.members {
		s.InFlight[i] = int(m.inflight.Load())
		m.mu.Lock()
		s.Backlog[i] = len(m.backlog)
		m.mu.Unlock()
	}
	return s
}

// Close stops the client from taking new locks and waits for its background
// work: calls to stragglers, rollbacks, releases, and queued release retries.
// After Close is called, Lock, TryLock and Extend fail at once with
// ErrClosed; Unlock still releases.
//
// Close is bounded even when ctx never ends. Once it is called, queued
// releases are retried at once and then every min(node timeout, 100ms).
// Close waits until the work is done or ctx ends, or, when ctx has no
// deadline, for at most the node timeout plus three release timeouts (350ms
// by default); give it a context with a longer deadline to wait longer for a
// node that may come back (a paused master). Then it abandons what is still
// queued (those keys, if any, expire with their TTL) and waits at most the
// node timeout plus the release timeout more for the calls in flight (each
// is bounded by its own deadline), whatever other goroutines are doing: a
// context.Background() Close returns within 500ms by default.
//
// It returns nil when every release it waited for was confirmed or needed
// no more (the node refused the connection: nothing runs there); otherwise
// an error wrapping ErrNotReleased that counts the abandoned releases per
// node, and ctx.Err() when ctx ended first. Close does not close the nodes.
// It is safe to call more than once and concurrently with other methods.
func (c *Client) Close(ctx context.Context) error {
	c.closed.Store(true)
	c.closeOnce.Do(func() { close(c.closing) })
	before := c.abandonedNow()
	var bound <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := time.NewTimer(c.cfg.nodeTimeout + 3*c.cfg.releaseTimeout)
		defer t.Stop()
		bound = t.C
	}
	select {
	case <-c.work.idle():
		return c.abandonedErr(ctx, before)
	case <-ctx.Done():
	case <-bound:
	}
	c.giveUpOnce.Do(func() { close(c.giveUp) })
	t := time.NewTimer(c.cfg.nodeTimeout + c.cfg.releaseTimeout)
	defer t.Stop()
	select {
	case <-c.work.idle():
	case <-t.C:
	}
	return c.abandonedErr(ctx, before)
}

// abandonedNow returns each node's count of abandoned releases.
func (c *Client) abandonedNow() []int {
	out := make([]int, len(c.members))
	for i, m := range c.members {
		m.mu.Lock()
		out[i] = m.abandoned
		m.mu.Unlock()
	}
	return out
}

// abandonedErr returns Close's error: the releases abandoned since before
// (per node), and ctx.Err() when ctx has ended; nil when there are none and
// ctx is live.
func (c *Client) abandonedErr(ctx context.Context, before []int) error {
	var parts []string
	for i, n := range c.abandonedNow() {
		if d := n - before[i]; d > 0 {
			parts = append(parts, fmt.Sprintf("%d on %s", d, c.members[i].addr))
		}
	}
	var errs []error
	if len(parts) > 0 {
		errs = append(errs, fmt.Errorf("%w: close abandoned queued releases (%s); their keys, if any, expire with their TTL", ErrNotReleased, strings.Join(parts, ", ")))
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("redlock: close: %w", err))
	}
	return errors.Join(errs...)
}

// usable returns the error that stops new work: ErrClosed, or the
// ErrInvalidConfig of a server found twice.
func (c *Client) usable() error {
	if p := c.dupErr.Load(); p != nil {
		return *p
	}
	if c.closed.Load() {
		return ErrClosed
	}
	return nil
}

// newValue returns a fresh 128-bit token from crypto/rand, hex encoded, and
// the value stored on the nodes: the token followed by the owner metadata.
func (c *Client) newValue() (token, value string) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: Go 1.24+ crashes the program instead
	token = hex.EncodeToString(b[:])
	return token, token + c.owner
}

// tracker counts background goroutines. Unlike a sync.WaitGroup it may be
// waited on while new work is added (Close racing with a Lock loop).
type tracker struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed whenever n drops to 0
}

func (t *tracker) add() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		t.zero = make(chan struct{})
	}
	t.n++
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 {
		close(t.zero)
	}
}

// idle returns a channel closed when no background work is running.
func (t *tracker) idle() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return t.zero
}
