// Package redlock implements the RedLock algorithm: a lock held on a quorum
// of N independent Redis masters, with validity measured on a monotonic clock.
//
// A Client fans every operation out to all nodes concurrently, gives each
// node call its own deadline, and decides as soon as a quorum has answered
// yes, or as soon as a quorum can no longer be reached; it never waits for a
// straggler it does not need. A failed acquisition is rolled back on every
// node that may hold the key, on a context detached from the caller's, and a
// release is sequenced after the same node's in-flight acquire, backed by a
// server-side release guard, so that a late acquire cannot leave an orphan
// key. See docs/algorithm.md for the algorithm and its safety argument.
//
// Client, Mutex and Lease are safe for concurrent use by multiple goroutines.
package redlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/node"
)

// Client coordinates locks over a fixed set of nodes. Create it with New;
// call Close to wait for background cleanup before exiting.
type Client struct {
	cfg     Config
	members []*member
	host    string
	pid     int
	wg      tracker

	closeOnce sync.Once
	closing   chan struct{} // closed when Close gives up on queued releases
}

type member struct {
	node     node.Node
	addr     string
	inflight atomic.Int32

	mu       sync.Mutex
	backlog  []pendingRelease
	draining bool
}

// pendingRelease is a release that timed out on a live but slow or paused
// node, kept to be retried once the node answers again.
type pendingRelease struct {
	key, value string
	guard      time.Duration
	until      time.Time // real time after which the retry is abandoned
}

func (m *member) tryTake(limit int) bool {
	if m.inflight.Add(1) > int32(limit) {
		m.inflight.Add(-1)
		return false
	}
	return true
}

func (m *member) give() { m.inflight.Add(-1) }

// New returns a Client over nodes. The options set the defaults of every
// Mutex made from it. It does not contact the nodes.
//
// Errors wrap ErrInvalidConfig and name the bad value: no nodes, a nil node,
// duplicate addresses, or any field rejected by Config.Validate. An even
// number of nodes works, but tolerates no more failures than the odd number
// below it (4 nodes need 3, tolerating 1 failure, like 3 nodes) while adding
// a node that can fail: prefer odd N.
func New(nodes []node.Node, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.Validate(len(nodes)); err != nil {
		return nil, err
	}
	seen := map[string]int{}
	c := &Client{cfg: cfg, pid: os.Getpid(), closing: make(chan struct{})}
	c.host, _ = os.Hostname()
	for i, n := range nodes {
		if n == nil {
			return nil, configError("node %d is nil", i)
		}
		addr := n.Addr()
		if j, dup := seen[addr]; dup {
			return nil, configError("duplicate node address %q (nodes %d and %d)", addr, j, i)
		}
		seen[addr] = i
		c.members = append(c.members, &member{node: n, addr: addr})
	}
	return c, nil
}

// Nodes returns the addresses of the client's nodes, in order.
func (c *Client) Nodes() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.addr
	}
	return out
}

// Quorum returns the number of nodes an operation needs.
func (c *Client) Quorum() int { return c.cfg.QuorumFor(len(c.members)) }

// InFlight returns, per node, how many of this client's calls are
// outstanding (for monitoring and tests).
func (c *Client) InFlight() []int {
	out := make([]int, len(c.members))
	for i, m := range c.members {
		out[i] = int(m.inflight.Load())
	}
	return out
}

// Close waits until the client's background work (calls to stragglers,
// rollbacks, releases, queued release retries) has finished. Node calls are
// bounded by their own deadlines; queued retries of releases on unreachable
// nodes run until the node answers or one TTL has passed. When ctx ends
// first, Close abandons the queued retries (their keys, if any, expire with
// their TTL), waits for the calls in flight (at most about NodeTimeout +
// ReleaseTimeout) and returns an error wrapping ctx.Err(); after that the
// client no longer retries releases. Close does not close the nodes. A client
// whose Close returned nil stays usable.
func (c *Client) Close(ctx context.Context) error {
	select {
	case <-c.wg.idle():
		return nil
	case <-ctx.Done():
		c.closeOnce.Do(func() { close(c.closing) })
		<-c.wg.idle()
		return fmt.Errorf("redlock: close: gave up on queued releases: %w", ctx.Err())
	}
}

// tracker counts background goroutines. Unlike a sync.WaitGroup it may be
// waited on while new work is added (Close racing with a Lock loop).
type tracker struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed whenever n is 0
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

// idle returns a channel closed when no background work is running (or at
// the moment it next stops running).
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

// NewMutex returns a mutex for the lock called name (the Redis key). opts
// override the client's options for this mutex. Errors wrap
// ErrInvalidConfig: an empty name or an invalid combination of options.
func (c *Client) NewMutex(name string, opts ...Option) (*Mutex, error) {
	if name == "" {
		return nil, configError("empty lock name")
	}
	cfg := c.cfg
	cfg.Clock = nil // to tell whether a mutex option set one
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.Clock != nil {
		return nil, configError("WithClock is a client option (validity is measured on the client's clock): pass it to New, not NewMutex")
	}
	cfg.Clock = c.cfg.Clock
	if err := cfg.Validate(len(c.members)); err != nil {
		return nil, err
	}
	return &Mutex{c: c, name: name, cfg: cfg, quorum: cfg.QuorumFor(len(c.members))}, nil
}

// call is one operation on one node; out and sent are final once done is
// closed.
type call struct {
	done chan struct{}
	out  NodeOutcome
	sent bool // a request may have reached the node
}

// round is one operation fanned out to every node.
type round struct {
	c       *Client
	start   time.Time
	timeout time.Duration
	calls   []*call
	replies chan int
}

// nodeFunc performs one node's part of an operation. It returns Succeeded,
// Rejected (with a per-node sentinel) or Failed (with the cause).
type nodeFunc func(ctx context.Context, i int, m *member, cl *call) (Result, error)

// fanout starts fn on every node concurrently, each bounded by timeout and
// by ctx. A node already at the in-flight cap fails at once with ErrNodeBusy.
// before, when not nil, gives for each node a call that must finish first.
// onBusy, when not nil, is called for a node skipped because of the cap.
func (c *Client) fanout(ctx context.Context, timeout time.Duration, before []*call, fn nodeFunc, onBusy func(i int, m *member)) *round {
	r := &round{
		c:       c,
		start:   c.cfg.Clock.Now(),
		timeout: timeout,
		calls:   make([]*call, len(c.members)),
		replies: make(chan int, len(c.members)),
	}
	for i, m := range c.members {
		cl := &call{done: make(chan struct{}), out: NodeOutcome{Node: m.addr}}
		cl.out.Result = Pending
		r.calls[i] = cl
		var prior *call
		if before != nil {
			prior = before[i]
		}
		c.wg.add()
		go func() {
			defer c.wg.done()
			if prior != nil {
				<-prior.done // bounded by the prior call's own deadline
			}
			res, err := Failed, error(ErrNodeBusy)
			if m.tryTake(c.cfg.MaxInFlight) {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				cl.sent = true
				res, err = fn(cctx, i, m, cl)
				cancel()
				m.give()
			} else if onBusy != nil {
				onBusy(i, m)
			}
			cl.out.Result = res
			cl.out.Latency = c.cfg.Clock.Since(r.start)
			if err != nil {
				cl.out.Err = &NodeError{Node: m.addr, Err: err}
			}
			close(cl.done)
			r.replies <- i
		}()
	}
	return r
}

// decision is what a round had when it was decided.
type decision struct {
	yes, no int
	// at is the clock reading when the quorum-th yes arrived (zero if never).
	at time.Time
	// answered[i] says node i had replied by then.
	answered []bool
	outcomes []NodeOutcome
}

// wait collects replies until need nodes said yes, or until so many said no
// or failed that need can no longer be reached, or every call's deadline
// (plus a grace period for nodes that ignore their context) has passed. ctx
// only ends the wait early; the calls carry their own deadlines.
func (r *round) wait(ctx context.Context, need int, extra time.Duration) decision {
	n := len(r.calls)
	d := decision{answered: make([]bool, n)}
	grace := time.NewTimer(r.timeout + extra + 20*time.Millisecond)
	defer grace.Stop()
loop:
	for d.yes < need && d.no <= n-need {
		select {
		case i := <-r.replies:
			d.answered[i] = true
			if r.calls[i].out.Result == Succeeded {
				d.yes++
				if d.yes == need {
					d.at = r.c.cfg.Clock.Now()
				}
			} else {
				d.no++
			}
		case <-grace.C:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	d.outcomes = make([]NodeOutcome, n)
	for i, cl := range r.calls {
		if d.answered[i] {
			d.outcomes[i] = cl.out
			continue
		}
		d.outcomes[i] = NodeOutcome{Node: cl.out.Node, Result: Pending, Err: &NodeError{Node: cl.out.Node, Err: ErrNoReply}}
	}
	return d
}

// settle keeps collecting replies after a decision from the nodes in
// expected (nodes that were on time in an earlier round), for at most limit.
// Healthy nodes just behind the quorum are thus included, while a known
// straggler is not waited for. Unlock uses it so that a lock taken right
// after Unlock does not find this lease's keys still in place on healthy
// nodes.
func (r *round) settle(ctx context.Context, d *decision, limit time.Duration, expected []bool) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		pending := false
		for i, a := range d.answered {
			pending = pending || (!a && expected[i])
		}
		if !pending {
			return
		}
		select {
		case i := <-r.replies:
			d.answered[i] = true
			d.outcomes[i] = r.calls[i].out
			if r.calls[i].out.Result == Succeeded {
				d.yes++
			} else {
				d.no++
			}
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// release deletes key=value on every node that may hold it: nodes whose
// acquire succeeded, failed or has not answered. On each node it waits for
// that node's acquire call to finish first; where the acquire's effect is
// unknown (it failed or timed out, so the server may still apply it later)
// it leaves a release guard for the TTL so that a late acquire is refused.
// Nodes whose acquire answered "taken" or "refused", or was never sent (over
// the in-flight cap, or the node reported node.ErrNotSent), are skipped: they
// cannot hold our value. A release that fails, or that the in-flight cap
// keeps from being sent, is queued for retry (retryRelease).
func (c *Client) release(ctx context.Context, cfg Config, key, value string, acq []*call) *round {
	detached := context.WithoutCancel(ctx)
	// plan says whether node i may hold the key and which guard to leave.
	plan := func(i int) (needed bool, guard time.Duration) {
		prior := acq[i]
		if !prior.sent || prior.out.Result == Rejected || prior.out.Result == Failed && neverSent(prior.out.Err) {
			return false, 0
		}
		if prior.out.Result != Succeeded {
			guard = cfg.TTL
		}
		return true, guard
	}
	retry := func(m *member, guard time.Duration) {
		c.retryRelease(m, pendingRelease{key: key, value: value, guard: guard, until: time.Now().Add(cfg.TTL)})
	}
	return c.fanout(detached, cfg.ReleaseTimeout, acq, func(ctx context.Context, i int, m *member, cl *call) (Result, error) {
		needed, guard := plan(i)
		if !needed {
			return Rejected, ErrNodeNotHeld
		}
		ok, err := m.node.Release(ctx, key, value, guard)
		switch {
		case err != nil:
			retry(m, guard) // the key may be there: retry until the node answers
			return Failed, err
		case !ok:
			return Rejected, ErrNodeNotHeld
		}
		return Succeeded, nil
	}, func(i int, m *member) {
		if needed, guard := plan(i); needed {
			retry(m, guard)
		}
	})
}

// MaxBacklog caps the releases kept for retry per node; beyond it, new ones
// are dropped (their keys, if any, expire with their TTL).
const MaxBacklog = 1024

// neverSent reports whether a failed call certainly did not reach the
// server: the node said so (node.ErrNotSent, e.g. a refused connection on a
// client that does not retry), or the call was over an in-flight cap.
func neverSent(err error) bool {
	return errors.Is(err, node.ErrNotSent) || errors.Is(err, node.ErrOverloaded) || errors.Is(err, ErrNodeBusy)
}

// retryRelease queues a release that failed on a node that may hold the key.
// A go-redis connection opened while a server is paused cannot even say
// HELLO, so a release sent then may never reach the server, while an acquire
// written earlier on an established connection is executed when the server
// resumes; likewise an acquire applied just before a partition loses its
// reply, and the release is refused until the partition heals. Without a
// retry such keys would stay for a whole TTL. One goroutine per node drains
// the queue with backoff (from min(NodeTimeout, 100ms), doubling up to 1 s), for at most one TTL
// per entry, and stops early when Close gives up.
func (c *Client) retryRelease(m *member, p pendingRelease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.backlog) >= MaxBacklog {
		return
	}
	m.backlog = append(m.backlog, p)
	if !m.draining {
		m.draining = true
		c.wg.add()
		go c.drain(m)
	}
}

func (c *Client) drain(m *member) {
	defer c.wg.done()
	first := min(c.cfg.NodeTimeout, 100*time.Millisecond)
	delay := first
	for {
		select {
		case <-c.closing:
			m.mu.Lock()
			m.backlog = nil
			m.draining = false
			m.mu.Unlock()
			return
		default:
		}
		m.mu.Lock()
		now := time.Now()
		kept := m.backlog[:0]
		for _, p := range m.backlog {
			if now.Before(p.until) {
				kept = append(kept, p)
			}
		}
		m.backlog = kept
		if len(m.backlog) == 0 {
			m.draining = false
			m.mu.Unlock()
			return
		}
		p := m.backlog[0]
		m.mu.Unlock()

		var err error = ErrNodeBusy
		if m.tryTake(c.cfg.MaxInFlight) {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ReleaseTimeout)
			_, err = m.node.Release(ctx, p.key, p.value, p.guard)
			cancel()
			m.give()
		}
		if err == nil {
			m.mu.Lock()
			if len(m.backlog) > 0 && m.backlog[0] == p {
				m.backlog = m.backlog[1:]
			}
			m.mu.Unlock()
			delay = first
			continue
		}
		// Real time: this waits for a server, not for the lock's clock.
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-c.closing:
			t.Stop() // the check at the top of the loop drops the backlog
		}
		delay = min(2*delay, time.Second)
	}
}

// Backlog returns, per node, how many releases wait for a retry.
func (c *Client) Backlog() []int {
	out := make([]int, len(c.members))
	for i, m := range c.members {
		m.mu.Lock()
		out[i] = len(m.backlog)
		m.mu.Unlock()
	}
	return out
}

// NodeHolder is one node's view of a lock, as read by Inspect.
type NodeHolder struct {
	Node string
	// Holder is the raw value and TTL; Holder.Exists is false when free.
	Holder node.Holder
	// Owner is the parsed value (zero when free).
	Owner Owner
	// Err is set when the node could not be read (a *NodeError).
	Err error
}

// Inspect reads the holder and remaining TTL of the lock called name from
// every node, each call bounded by the node timeout and ctx. It waits for all
// nodes. Per-node failures are reported in NodeHolder.Err; the error is
// non-nil only when ctx ended (it wraps ctx.Err()).
func (c *Client) Inspect(ctx context.Context, name string) ([]NodeHolder, error) {
	out := make([]NodeHolder, len(c.members))
	r := c.fanout(ctx, c.cfg.NodeTimeout, nil, func(ctx context.Context, i int, m *member, _ *call) (Result, error) {
		h, err := m.node.Inspect(ctx, name)
		if err != nil {
			return Failed, err
		}
		out[i] = NodeHolder{Node: m.addr, Holder: h}
		if h.Exists {
			out[i].Owner = ParseOwner(h.Value)
		}
		return Succeeded, nil
	}, nil)
	for _, cl := range r.calls {
		select {
		case <-cl.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("redlock: inspect %q: %w", name, ctx.Err())
		}
	}
	for i, cl := range r.calls {
		if cl.out.Err != nil {
			out[i] = NodeHolder{Node: c.members[i].addr, Err: cl.out.Err}
		}
	}
	return out, nil
}
