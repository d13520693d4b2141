package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
)

// Election elects one leader at a time among the candidates that campaign
// under one name, on the client's quorum, as etcd's concurrency.Election
// does on etcd: Campaign waits to be elected, the Leadership it returns
// says the moment leadership can no longer be trusted (its Context is
// done), Resign hands
// it back, and Leader and Observe tell anyone who leads. Create it with
// Client.NewElection. It holds no state between calls and is safe for
// concurrent use.
//
// A leadership is a lease of a fenced mutex (WithFencing) that renews
// itself (WithAutoRenew): its term is the lease's fencing token, higher
// than every earlier term of the election, so a resource the leader writes
// to can refuse a deposed leader's late writes (docs/algorithm.md,
// "Election"). Once elected, a leader also writes a record of its term
// (termRecord): Leader and Observe report only candidates whose record they
// find, with the term it holds.
type Election struct {
	m *Mutex
}

// ErrNoLeader is returned when Election.Leader found no candidate holding
// the election on a quorum of nodes.
var ErrNoLeader = errors.New("redlock: no leader")

// NewElection returns the election called name, which is the lock name on
// the nodes (so a Mutex must not use the same name). It takes NewMutex's
// options with the same defaults, except that fencing is always on (the
// terms) and leaderships renew themselves at a third of the TTL unless
// WithAutoRenew says otherwise; WithCancelMargin sets how long before its
// validity deadline an unrenewed leadership ends (default a tenth of the
// TTL). It does not contact the nodes. Besides the lock key name and its
// fencing counter, each leadership writes one more key, name + ":term:" +
// its lease's token, holding its term (see Leader); it lives three times the
// key TTL (the TTL plus the lock delay) unless the leader refreshes it, as
// it does every key TTL, and is deleted when the leadership ends. Every
// node must implement FencingNode; Leader and Observe also need PeekNode.
// Errors wrap ErrInvalidConfig: NewMutex's, WithWriterPreference, or a node
// without FencingNode (named by its Addr).
func (c *Client) NewElection(name string, opts ...LockOption) (*Election, error) {
	all := append([]LockOption{WithFencing(), WithAutoRenew(0)}, opts...)
	m, err := c.newMutex("NewElection", name, nil, all)
	if err != nil {
		return nil, err
	}
	m.info.Shape = shapeElection
	return &Election{m: m}, nil
}

// Campaign waits until the caller is elected leader with value (what Leader
// and Observe report about it: an address, an ID), retrying as Mutex.Lock
// does (WithRetryBackoff, WithMaxWait) until ctx ends, and
// returns the Leadership once it has written the record of its term
// (termRecord) to a quorum of nodes, or tried to: when too few nodes took
// it, the leadership writes it again every third of the key TTL until a
// quorum has it, and until then Leader and Observe may report no leader. ctx only
// bounds the wait: the leadership lasts until Resign, or until it is lost.
// Its errors are Lock's: they wrap ErrNotObtained, and ctx.Err() when ctx
// ended.
func (e *Election) Campaign(ctx context.Context, value string) (*Leadership, error) {
	m := *e.m // the candidate's own copy, storing its value with the token
	m.suffix = wire.CandidateSuffix(value)
	lease, err := m.lock(ctx, m.cfg.renew)
	if err != nil {
		return nil, err
	}
	l := &Leadership{
		lease:   lease,
		record:  e.record(lease),
		margin:  m.cancelMargin(),
		done:    make(chan struct{}),
		resign:  make(chan struct{}),
		kept:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	// Elected: the term is known, written back to a quorum. A caller whose
	// ctx ends now still gets the leadership, so the record does not
	// depend on ctx.
	recorded := l.record.put(context.WithoutCancel(ctx), false)
	l.workers.Add(2)
	go l.watch()
	go l.keep(recorded)
	go func() { l.workers.Wait(); close(l.stopped) }()
	return l, nil
}

// termRecord is the record a leadership writes of its term once elected:
// the key name + ":term:" + its lease's token, holding the term in decimal.
// Leader finds it from the lock value (the token comes first), so it
// reports a candidate only once that candidate was elected, and with its
// own term, however long ago the fencing counters were written: a failed
// campaign's keys can stay on a quorum (acquires that paused masters run
// after the candidate gave up on them, votes of quarantined masters), and
// the counters, which renewals do not rewrite, expire one fence retention
// after the election. The term cannot be part of the lock value itself:
// that is written before the term is known, and renewals and the release
// compare it.
type termRecord struct {
	m     *Mutex // the election's
	key   string
	value string
}

// record returns the term record of the leadership holding lease.
func (e *Election) record(lease *Lease) termRecord {
	return termRecord{m: e.m, key: wire.TermKey(e.m.name, lease.token), value: strconv.FormatInt(lease.fence, 10)}
}

// ttl is the record's time to live: three key TTLs, refreshed every key TTL
// (keep), so that a refresh that fails on a node is made twice more before
// the record expires there.
func (t termRecord) ttl() time.Duration { return 3 * t.m.keyTTL() }

// put writes the record to every node, or with refresh resets its time to
// live where it is and writes it where it is not, and waits for a quorum
// (each call bounded by the node timeout). It reports whether a quorum has
// it; what failed is written again by the next refresh.
func (t termRecord) put(ctx context.Context, refresh bool) bool {
	c := t.m.c
	if c.usable() != nil {
		return false
	}
	ttl, nop := t.ttl(), OpFence
	if refresh {
		nop = OpExtend
	}
	r := c.fanout(ctx, op{
		timeout: c.cfg.nodeTimeout,
		no:      ErrNodeNotHeld,
		node:    nop,
		lock:    &t.m.info,
		do: func(ctx context.Context, _ int, mb *member) (bool, error) {
			if refresh {
				if ok, err := mb.node.Extend(ctx, t.key, t.value, ttl); ok || err != nil {
					return ok, err
				}
			}
			return mb.node.Acquire(ctx, t.key, t.value, ttl)
		},
	})
	return r.wait(ctx, &t.m.quorum, 0).held
}

// remove deletes the record from every node and waits for each call (each
// bounded by the release timeout and ctx). A record it misses expires with
// its time to live; it names a leadership that has ended, which Leader no
// longer finds on a quorum.
func (t termRecord) remove(ctx context.Context) {
	c := t.m.c
	r := c.fanout(ctx, op{
		timeout: c.cfg.releaseTimeout,
		no:      ErrNodeNotHeld,
		node:    OpRelease,
		lock:    &t.m.info,
		do: func(ctx context.Context, _ int, mb *member) (bool, error) {
			return mb.node.Release(ctx, t.key, t.value, 0)
		},
	})
	for _, cl := range r.calls {
		cl.wait()
	}
}

// Leadership is one term of one leader. It is safe for concurrent use.
type Leadership struct {
	lease  *Lease
	record termRecord
	margin time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	once    sync.Once
	err     error         // set once, before done closes
	done    chan struct{} // closed when leadership ends
	resign  chan struct{} // closed by Resign: the watcher stops
	rOnce   sync.Once
	workers sync.WaitGroup // watch and keep
	kept    chan struct{}  // closed when keep has returned
	stopped chan struct{}  // closed when watch and keep have returned
}

// Term returns the leadership's term: its fencing token, greater than the
// term of every earlier leadership of the election (docs/algorithm.md,
// "Fencing tokens"). Pass it with every write the leader makes to a resource
// that refuses a lower term than the highest it has seen.
func (l *Leadership) Term() int64 { return l.lease.fence }

// Lease returns the lease behind the leadership, for its Token, Until and
// Fence (Term is its Fence). It renews itself; Unlock on it ends the
// leadership as Resign does.
func (l *Leadership) Lease() *Lease { return l.lease }

// Context returns a context that is done the moment the leadership can no
// longer be trusted: its lease came within the cancel margin
// (WithCancelMargin, a tenth of the TTL by default) of its validity
// deadline without a renewal moving it, a renewal found it lost, or Resign
// was called. That is before any other candidate can be elected: another
// candidate can take the nodes only once the keys have expired, after the
// validity deadline. Its cause (context.Cause) then says why: an error
// wrapping ErrReleased (Resign) or ErrLockLost (lost; after failed
// renewals it also wraps the last renewal's error, a *QuorumError naming
// every node's result). Run the leader's work under it.
func (l *Leadership) Context() context.Context { return l.ctx }

// Valid reports whether the leadership can still be trusted: its Context
// is not done and the validity deadline is more than the cancel margin
// ahead. It never waits on the network; check it before each write.
func (l *Leadership) Valid() bool {
	return l.ended() == nil && time.Now().Before(l.lease.Until().Add(-l.margin))
}

// ended returns nil while the leadership lasts, then why it ended.
func (l *Leadership) ended() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

// Resign ends the leadership (its Context is done, with a cause wrapping
// ErrReleased) and
// releases it on the nodes as Lease.Unlock does, so that another candidate
// can be elected at once, then deletes the record of its term; ctx bounds
// how long it waits. After a loss it still releases whatever the lease
// still holds. It returns Unlock's error, or nil when the leadership's
// lease was released already.
func (l *Leadership) Resign(ctx context.Context) error {
	l.end(fmt.Errorf("%w: %q: resigned", ErrReleased, l.lease.m.name))
	l.rOnce.Do(func() { close(l.resign) })
	<-l.stopped
	err := l.lease.Unlock(ctx)
	l.record.remove(ctx)
	if err != nil && errors.Is(err, ErrReleased) && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrNotReleased) {
		return nil // the watcher released it when the leadership was lost
	}
	return err
}

// end ends the leadership with err (once).
func (l *Leadership) end(err error) {
	l.once.Do(func() {
		l.err = err
		l.cancel(err) // Context is done by the time done closes
		close(l.done)
	})
}

// watch ends the leadership when its lease ends or comes within the margin
// of its deadline unrenewed; in that case it also releases the lease, so
// that no late renewal keeps the election held by a leader that knows it
// no longer leads. Unless the leader resigned (Resign does it), it then
// deletes the record of the term.
func (l *Leadership) watch() {
	defer l.workers.Done()
	lease := l.lease
	c := lease.m.c
	t := time.NewTimer(time.Until(lease.Until().Add(-l.margin)))
	defer t.Stop()
	for {
		select {
		case <-lease.Done():
			l.end(lease.Err())
			<-l.kept // a refresh that keep was making lands before the removal
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.releaseTimeout)
			l.record.remove(ctx)
			cancel()
			return
		case <-l.resign:
			return
		case <-t.C:
			if left := time.Until(lease.Until().Add(-l.margin)); left > 0 {
				t.Reset(left) // renewed: follow the new deadline
				continue
			}
			err := fmt.Errorf("%w: %q: leadership within the cancel margin (%v) of its validity deadline, not renewed", ErrLockLost, lease.m.name, l.margin)
			if last := lease.lastExtendErr(); last != nil {
				err = fmt.Errorf("%w: %w", err, last)
			}
			l.end(err)
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.releaseTimeout+c.cfg.nodeTimeout)
			_ = lease.Unlock(ctx) // its keys expire with their TTL if this fails
			<-l.kept
			l.record.remove(ctx)
			cancel()
			return
		}
	}
}

// keep refreshes the record of the term every key TTL, a third of its time
// to live, writing it again where it is missing, until the leadership ends;
// while fewer than a quorum of nodes are known to have it (recorded false),
// it does so every third of a key TTL instead.
func (l *Leadership) keep(recorded bool) {
	defer l.workers.Done()
	defer close(l.kept)
	m := l.record.m
	every := m.keyTTL()
	retry := max(every/3, time.Millisecond)
	next := func() time.Duration {
		if recorded {
			return every
		}
		return retry
	}
	t := time.NewTimer(next())
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		recorded = l.record.put(l.ctx, true)
		t.Reset(next())
	}
}

// Leader is who leads an election, as the nodes show it.
type Leader struct {
	// Value is what the leader campaigned with.
	Value string
	// Term is the leader's term: its Leadership's Term, read from the
	// record of it the leader wrote once elected. 0 in Observe's reports
	// means no leader.
	Term int64
}

// Leader reads every node (one call each, bounded by the node timeout: a
// Peek of the lock key, then one of the record of the term of the value it
// holds) and returns the candidate whose value a
// quorum of nodes hold, provided one of them also holds the record that
// candidate wrote of its term once it was elected: a candidate that was
// never elected, whose keys a failed campaign left behind, is not a leader.
// The Term is the one in that record. It returns an error wrapping
// ErrNoLeader when no elected candidate holds a quorum, and an error naming
// every node's result when too few nodes answered to tell. The answer is
// what the nodes held when they were read: a leader that has just lost its
// lease can be reported until its keys expire; only the leader's own
// Leadership.Context says when leadership ends. Every node must implement PeekNode (the error,
// which wraps ErrInvalidConfig, names the one that does not).
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	m := e.m
	c := m.c
	for i, mb := range c.members {
		if mb.peek == nil {
			return Leader{}, configError("Election.Leader: node %d (%s, %T) does not implement PeekNode", i, mb.addr, mb.node)
		}
	}
	n := len(c.members)
	values := make([]string, n)
	terms := make([]int64, n) // the term in the record of values[i]'s leadership, 0 without one
	r := c.fanout(ctx, op{
		timeout: c.cfg.nodeTimeout,
		no:      ErrNodeNotHeld,
		node:    OpPeek,
		lock:    &m.info,
		do: func(ctx context.Context, i int, mb *member) (bool, error) {
			v, _, err := mb.peek.Peek(ctx, m.name)
			values[i] = v
			if err != nil || v == "" {
				return v != "", err
			}
			token, ok := wire.ValueToken(v)
			if !ok {
				return true, nil // not a value Campaign wrote: no record
			}
			rec, _, err := mb.peek.Peek(ctx, wire.TermKey(m.name, token))
			if term, perr := strconv.ParseInt(rec, 10, 64); err == nil && perr == nil && term > 0 {
				terms[i] = term
			}
			return true, err
		},
	})
	// Wait for every node, or for a quorum holding one value whose record
	// was found.
	d := decision{answered: make([]bool, n)}
	counts := map[string]int{}
	// of reports whether node j answered yes with value v.
	of := func(v string) func(j int) bool {
		return func(j int) bool { return d.answered[j] && r.calls[j].err == nil && values[j] == v }
	}
	termOf := map[string]int64{}
	grace := time.NewTimer(c.cfg.nodeTimeout + 20*time.Millisecond)
	defer grace.Stop()
	answered, leading := 0, ""
	for answered < n && leading == "" {
		select {
		case i := <-r.replies:
			d.answered[i] = true
			answered++
			if r.calls[i].err == nil {
				v := values[i]
				counts[v]++
				termOf[v] = max(termOf[v], terms[i])
				if termOf[v] > 0 && m.quorum.holds(n, of(v)) {
					leading = v
				}
			}
		case <-grace.C:
			answered = n
		case <-ctx.Done():
			return Leader{}, fmt.Errorf("redlock: leader of %q: %w", m.name, ctx.Err())
		}
	}
	if leading != "" {
		return Leader{Value: candidateOf(leading), Term: termOf[leading]}, nil
	}
	// No elected candidate's value has a quorum: no leader, unless the
	// nodes that did not answer could still make one (their answers could
	// also bring the record a quorum's value lacks).
	failed := func(i int) bool {
		return !d.answered[i] || (r.calls[i].err != nil && !errors.Is(r.calls[i].err, ErrNodeNotHeld))
	}
	someFailed := false
	for i := range n {
		someFailed = someFailed || failed(i)
	}
	possible := m.quorum.holds(n, failed) // with no value: the failed alone
	for v := range counts {
		possible = possible || m.quorum.holds(n, func(i int) bool { return failed(i) || of(v)(i) })
	}
	if someFailed && possible {
		qe := &QuorumError{Op: "leader", Key: m.name, Quorum: m.quorum.first(), quorum: &m.quorum, Nodes: c.results(r, d)}
		return Leader{}, fmt.Errorf("redlock: leader of %q unknown: %w", m.name, qe)
	}
	return Leader{}, fmt.Errorf("%w of %q on a quorum of nodes", ErrNoLeader, m.name)
}

// candidateOf returns the candidate value stored in a lock value ("" for a
// value Campaign did not write).
func candidateOf(stored string) string { return wire.ParseOwner(stored).Candidate }

// Observe reports the election's leader on the returned channel: the
// current one first, then each change (a new value or term), reading the
// nodes as Leader does every tenth of the TTL; a Leader with Term 0 means no
// elected candidate holds a quorum. Reads that cannot tell (too few nodes
// answered) are skipped. The channel is closed when ctx ends; a change that happens
// while the receiver is not reading is reported as the leader of the next
// read (intermediate leaders may be missed). It needs PeekNode as Leader
// does: without it the channel is closed at once.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	every := max(e.m.cfg.ttl/10, time.Millisecond)
	go func() {
		defer close(ch)
		var last Leader
		first := true
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, err := e.Leader(ctx)
			switch {
			case errors.Is(err, ErrInvalidConfig):
				return
			case err != nil && !errors.Is(err, ErrNoLeader):
				t.Reset(every) // could not tell: read again
				continue
			}
			if first || cur != last {
				select {
				case ch <- cur:
				case <-ctx.Done():
					return
				}
				first, last = false, cur
			}
			t.Reset(every)
		}
	}()
	return ch
}
