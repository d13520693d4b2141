package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
)

// Client coordinates locks over a fixed set of nodes. Create it with New and
// call Close to wait for background cleanup before exiting. A Client is safe
// for concurrent use by multiple goroutines.
type Client struct {
	cfg     clientConfig
	members []*member
	owner   string // URL-encoded host, pid and label stored after the token
	work    tracker

	closed    atomic.Bool   // Close was called: no new acquisitions
	giveUp    chan struct{} // closed when Close gives up on queued releases
	closeOnce sync.Once

	idMu   sync.Mutex
	runIDs map[string]int // server run_id -> index of the member that has it
	dupErr atomic.Pointer[error]

	maxTTL atomic.Int64 // longest TTL + lock-delay of the client's mutexes
}

// member is one node with the client's bookkeeping for it.
type member struct {
	node        Node
	addr        string
	inflight    atomic.Int32
	identified  atomic.Bool
	idMu        sync.Mutex
	identifying chan struct{} // under idMu; closed when the running identification ends
	durable     bool          // exempt from the restart quarantine

	// Restart quarantine state, under mu.
	runID       string
	conns       uint64    // Reconnects() when runID was read
	quarantined time.Time // votes count again from this moment on

	mu       sync.Mutex
	backlog  []pendingRelease
	draining bool
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
// server identity is read before its first vote, and a server listed twice
// under different addresses (127.0.0.1:6379 and localhost:6379) makes every
// later operation fail with ErrInvalidConfig, so that one server never casts
// two votes.
//
// Defaults: quorum N/2+1, node timeout 50ms, release timeout 100ms, drift
// factor 0.01, 16 calls in flight per node, no owner label. Errors wrap
// ErrInvalidConfig and name the bad value: no nodes, a nil node, two nodes
// with the same Addr, or an option out of range. An even number of nodes
// works, but tolerates no more failures than the odd number below it while
// adding a node that can fail: prefer odd N.
func New(nodes []Node, opts ...ClientOption) (*Client, error) {
	cfg := defaultClientConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := validate(len(nodes), cfg, nil); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, giveUp: make(chan struct{}), runIDs: map[string]int{}}
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
		if _, ok := n.(RestartWatcher); cfg.quarantine && !ok {
			return nil, configError("WithRestartQuarantine: node %d (%s, %T) does not implement RestartWatcher", i, addr, n)
		}
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
	for _, o := range opts {
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
// work: calls to stragglers, rollbacks, releases, and queued release retries
// (which run until their node answers). After Close is called, Lock, TryLock
// and Extend fail at once with ErrClosed; Unlock still releases.
//
// When ctx ends first, Close abandons the queued release retries (their
// keys, if any, expire with their TTL), waits at most the node timeout plus
// the release timeout more for the calls already in flight (each is bounded
// by its own deadline), and returns an error wrapping ctx.Err(), whatever
// other goroutines are doing. Close does not close the nodes.
func (c *Client) Close(ctx context.Context) error {
	c.closed.Store(true)
	select {
	case <-c.work.idle():
		return nil
	case <-ctx.Done():
	}
	c.closeOnce.Do(func() { close(c.giveUp) })
	t := time.NewTimer(c.cfg.nodeTimeout + c.cfg.releaseTimeout)
	defer t.Stop()
	select {
	case <-c.work.idle():
	case <-t.C:
	}
	return fmt.Errorf("redlock: close: gave up on queued releases: %w", ctx.Err())
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

// identify reads the server identity of member i before its first vote. A
// server already identified behind another member poisons the client: one
// server must never cast two votes.
//
// One identification per node runs at a time: calls that find one running
// (a cold or slow node can take up to the timeout) wait for its outcome
// instead of piling more INFO calls on the node, and try again themselves
// if it failed.
func (c *Client) identify(ctx context.Context, i int, timeout time.Duration) error {
	m := c.members[i]
	if m.identified.Load() {
		return nil // the common case: no timer, no context
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for !m.identified.Load() {
		m.idMu.Lock()
		running := m.identifying
		if running == nil {
			m.identifying = make(chan struct{})
		}
		m.idMu.Unlock()
		if running == nil {
			return c.identifyOnce(ctx, i)
		}
		select {
		case <-running:
		case <-ctx.Done():
			return fmt.Errorf("identifying the server: %w", ctx.Err())
		}
	}
	return nil
}

// identifyOnce runs the identification that member i's identifying channel
// stands for, and closes that channel when done.
func (c *Client) identifyOnce(ctx context.Context, i int) error {
	m := c.members[i]
	defer func() {
		m.idMu.Lock()
		close(m.identifying)
		m.identifying = nil
		m.idMu.Unlock()
	}()
	conns := c.reconnects(m)
	info, err := m.node.Info(ctx)
	if err != nil {
		return fmt.Errorf("identifying the server: %w", err)
	}
	c.sawServer(m, info, conns)
	c.idMu.Lock()
	defer c.idMu.Unlock()
	if j, dup := c.runIDs[info.RunID]; dup && j != i {
		err := configError("nodes %d (%s) and %d (%s) are the same server (run_id %s): one server must not vote twice", j, c.members[j].addr, i, m.addr, info.RunID)
		c.dupErr.CompareAndSwap(nil, &err)
		return err
	}
	c.runIDs[info.RunID] = i
	m.identified.Store(true)
	return nil
}

// reconnects reads a node's connection count (0 without the capability).
func (c *Client) reconnects(m *member) uint64 {
	if w, ok := m.node.(RestartWatcher); ok {
		return w.Reconnects()
	}
	return 0
}

// sawServer records the server behind m, read when the node's connection
// count was conns, and starts a quarantine if it is a new run (or a young
// first one) and the quarantine is on.
func (c *Client) sawServer(m *member, info ServerInfo, conns uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	known := m.runID != ""
	m.conns = conns
	if info.RunID == m.runID {
		return
	}
	m.runID = info.RunID
	if !c.cfg.quarantine || m.durable {
		return
	}
	q := c.cfg.quarantineFor
	if q == 0 {
		q = time.Duration(c.maxTTL.Load())
	}
	// A new run of a known server may lack keys granted until just now:
	// the old run may have kept granting after we last saw it (a failover
	// to a standby that started after that is young, yet lacks them too),
	// so it waits the whole quarantine. A server met for the first time
	// lacks at most what was granted before it started.
	left := q
	if !known {
		left = q - info.Uptime
	}
	if left > 0 {
		m.quarantined = now.Add(left)
	}
}

// checkQuarantine decides whether a yes vote of member m counts: not while
// its server is in quarantine. When the node opened a new connection since
// its server was last identified, the server is read again first (a restart
// or failover always means a new connection).
func (c *Client) checkQuarantine(ctx context.Context, m *member) error {
	if !c.cfg.quarantine || m.durable || knobs.NoQuarantine.Load() {
		return nil
	}
	conns := c.reconnects(m)
	m.mu.Lock()
	changed := conns != m.conns
	m.mu.Unlock()
	if changed {
		info, err := m.node.Info(ctx)
		if err != nil {
			return fmt.Errorf("%w: checking for a restart: %w", ErrNodeQuarantined, err)
		}
		c.sawServer(m, info, conns)
	}
	m.mu.Lock()
	until := m.quarantined
	m.mu.Unlock()
	if left := time.Until(until); left > 0 {
		return fmt.Errorf("%w for %v more", ErrNodeQuarantined, left.Round(time.Millisecond))
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
