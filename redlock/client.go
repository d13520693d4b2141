package redlock

import (
	"fmt"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
)

// Client coordinates locks over a fixed set of nodes. Create it with New and
// call Close to wait for background cleanup before exiting. A Client is safe
// for concurrent use by multiple goroutines. The goroutines that make its
// node calls serve the next round too: each ends after 50 ms without work,
// or when Close is called.
type Client struct {
	cfg     clientConfig
	q       quorum // the votes a decision needs (quorum.go)
	members []*member
	owner   string // URL-encoded host, pid and label stored after the token
	work    tracker

	closed     atomic.Bool   // Close was called: no new acquisitions
	closing    chan struct{} // closed when Close is called: retry at once
	giveUp     chan struct{} // closed when Close gives up on queued releases
	closeOnce  sync.Once
	giveUpOnce sync.Once

	identities // one vote per server (identity.go)

	maxTTL atomic.Int64 // longest key TTL (TTL + lock delay) of the client's mutexes

	obs Observer // WithObserver and WithLogger; nil without them (observer.go)

	watches   watches   // Lock's wake-ups (wait.go)
	group     string    // the group of the client's waiter IDs (fair.go)
	releasing releasing // Unlock's releases still running (releasing.go)

	timers timerPool // round.go
	tasks  chan task // idle workers take node calls from it (round.go)
}

// member is one node with the client's bookkeeping for it.
type member struct {
	node     Node
	fencing  FencingNode // node's capabilities (nil without them), resolved once in New
	keeper   FenceExpiryNode
	peek     PeekNode
	shape    ShapeNode
	queue    QueueNode
	addr     string
	inflight atomic.Int32
	// watchDenied: the node refused to watch (ErrNodeDenied: an ACL user
	// without channel permissions); Lock polls it without asking again.
	watchDenied atomic.Bool
	// lineDenied: the node refused a plain waiter's acquire in its line
	// (ErrNodeDenied: an ACL user without the line's commands); a plain
	// lock's calls take it with Acquire, as TryLock does.
	lineDenied atomic.Bool
	// deniedLogged: the client's logger was told that the node denied
	// access, while its server run was deniedRun (under mu; logger.go).
	deniedLogged bool
	deniedRun    string

	memberIdentity   // identity.go
	memberQuarantine // quarantine.go, under mu

	mu        sync.Mutex
	backlog   backlog // releases awaiting a retry (release.go)
	draining  bool
	abandoned int // releases given up unconfirmed: abandoned by Close, or refused on a retry
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
	cfg.knobs = knobs.Load()
	for i, o := range opts {
		if o == nil {
			return nil, configError("client option %d of %d is nil", i, len(opts))
		}
		o(&cfg)
	}
	if err := validate(len(nodes), cfg, nil); err != nil {
		return nil, err
	}
	q, err := cfg.buildQuorum(len(nodes), cfg.knobs.JointOneSet)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, q: q, closing: make(chan struct{}), giveUp: make(chan struct{}), identities: newIdentities(), obs: observerFor(cfg),
		tasks: make(chan task), group: newGroup()}
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
		mb := &member{node: n, addr: addr}
		mb.fencing, _ = n.(FencingNode)
		mb.keeper, _ = n.(FenceExpiryNode)
		mb.peek, _ = n.(PeekNode)
		mb.shape, _ = n.(ShapeNode)
		mb.queue, _ = n.(QueueNode)
		c.members = append(c.members, mb)
	}
	for _, d := range cfg.durable {
		j, ok := seen[d]
		if !ok {
			return nil, configError("WithRestartQuarantine: durable node %q is not one of the nodes", d)
		}
		c.members[j].durable = true
	}
	host, _ := os.Hostname()
	c.owner = wire.OwnerSuffix(host, os.Getpid(), cfg.ownerLabel)
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
// value: an empty name, a name with '{' or '}' but no valid hash tag, a
// name that is another lock's derived key on a Redis node (a hash tag and
// an ending ":fence", ":waiting", ":queue", ":queue:ttl", or
// ":release-guard:" in it), a name that is a hash tag and nothing else
// ("{x}", whose derived keys are those of "x": name it "x"), or an
// option out of range or inconsistent with the client's (a TTL not above the
// node timeout, for example).
func (c *Client) NewMutex(name string, opts ...LockOption) (*Mutex, error) {
	return c.newMutex("NewMutex", name, nil, opts)
}

// newMutex builds the lock of a constructor (named in errors): a mutex
// (fenced with WithFencing) when hold is nil, else a shared lock whose
// acquisitions are holds like hold (shapes.go). The lock's kind (kind.go) is
// chosen here, once.
func (c *Client) newMutex(ctor, name string, hold *Hold, opts []LockOption) (*Mutex, error) {
	if err := checkName(name, c.cfg.knobs.BareTagNames); err != nil {
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
	k, err := c.kindFor(ctor, hold, l)
	if err != nil {
		return nil, err
	}
	for keyTTL := int64(l.keyTTL(c.cfg)); ; {
		cur := c.maxTTL.Load()
		if cur >= keyTTL || c.maxTTL.CompareAndSwap(cur, keyTTL) {
			break
		}
	}
	info := LockInfo{Name: name, Shape: shapeMutex, Fenced: l.fencing}
	if hold != nil {
		info.Shape = shapeOf(ctor, *hold)
	}
	return &Mutex{c: c, name: name, cfg: l, quorum: c.q, drift: c.cfg.drift(l.ttl), kind: k, info: info,
		releasedErr: fmt.Errorf("%w: %q", ErrReleased, name)}, nil
}

// shapeOf names the shape of a shared lock's hold (constructor ctor).
func shapeOf(ctor string, hold Hold) string {
	switch {
	case ctor == "NewReentrant":
		return shapeReentrant
	case ctor == "NewSemaphore":
		return shapeSemaphore
	case hold.Group == readerGroup:
		return shapeRead
	}
	return shapeWrite
}

// Stats is a snapshot of a client's per-node work, in node order.
type Stats struct {
	// InFlight counts this client's calls outstanding on each node; it never
	// exceeds the WithMaxInFlight cap.
	InFlight []int
	// Backlog counts the releases waiting on each node for a retry: one
	// per lock key and value (a release of a value already waiting is
	// merged into it).
	Backlog []int
}

// Stats returns the client's per-node work, for monitoring and tests.
func (c *Client) Stats() Stats {
	s := Stats{InFlight: make([]int, len(c.members)), Backlog: make([]int, len(c.members))}
	for i, m := range c.members {
		s.InFlight[i] = int(m.inflight.Load())
		m.mu.Lock()
		s.Backlog[i] = m.backlog.len()
		m.mu.Unlock()
	}
	return s
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
// the value stored on the nodes: the token followed by the owner metadata
// and the attempt's start ("?host=...&pid=...&at=<Unix ms>").
func (c *Client) newValue() (token, value string) {
	token = wire.NewToken()
	// at: when this attempt began, in Unix milliseconds (quorumlock status
	// shows it as "since"); the wall clock, for people, never for expiry.
	return token, wire.Value(token, c.owner, time.Now())
}
