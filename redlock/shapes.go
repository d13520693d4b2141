package redlock

import "github.com/quorumlock/quorumlock/internal/wire"

// The lock shapes (docs/shapes.md) are Mutexes whose acquisitions are holds
// in a shared lock on each node (ShapeNode) instead of SET NX keys: the same
// fan-out, per-node deadline, decision at quorum, validity, rollback with
// release guards, release backlog, restart quarantine, renewal and Lease.
// Only the group and limit of a hold differ between them.

// Hold groups. Different shapes on one name exclude each other, and
// semaphores with different K do too (a client with a wrong K cannot exceed
// the others' bound).
const (
	readerGroup = wire.ReaderGroup
	writerGroup = wire.WriterGroup
)

// NewReentrant returns a reentrant mutex for the lock called name, held by
// owner: an ID the caller chooses (a job or request ID; Go has no thread
// identity), so re-entry works across goroutines and processes that share
// it. While a lease of owner is valid, another Lock by the same owner
// succeeds at once and adds a hold with its own lease and expiry (its
// Lease.Holds reports the depth); any other owner is refused until every
// hold of owner is released or expired on a quorum. Each lease releases,
// extends and renews only its own hold, so a release cannot touch another
// owner's holds; the key is removed with the last hold.
//
// It takes NewMutex's options (except WithFencing) with the same defaults,
// and does not contact the nodes. Every node must implement ShapeNode.
// Errors wrap ErrInvalidConfig: NewMutex's, an empty owner, WithFencing or
// WithWriterPreference, or a node without the capability (named by its
// Addr).
func (c *Client) NewReentrant(name, owner string, opts ...LockOption) (*Mutex, error) {
	if owner == "" {
		return nil, configError("NewReentrant: empty owner")
	}
	return c.newMutex("NewReentrant", name, &Hold{Group: wire.OwnerGroup(owner)}, opts)
}

// NewRWMutex returns a read-write lock called name as two mutexes: reader,
// whose Lock, TryLock and Do take read leases (any number of readers at
// once; each lease's Holds reports the live readers on the nodes), and
// writer, whose take the write lease (one writer, once the live readers
// have drained). Each reader's hold has its own expiry, so releases never
// touch other readers. Like every Mutex they hold no state between calls
// and are safe for concurrent use; every successful call returns its own
// Lease. It takes NewMutex's options (except WithFencing) with the same
// defaults, plus WithWriterPreference (which applies to the writer); it
// does not contact the nodes. Every node must implement ShapeNode. Errors
// wrap ErrInvalidConfig: NewMutex's, WithFencing, or a node without the
// capability (named by its Addr).
func (c *Client) NewRWMutex(name string, opts ...LockOption) (reader, writer *Mutex, err error) {
	// Readers always yield to a live waiting mark: preference is the
	// waiting writer's choice (only a writer with WithWriterPreference
	// leaves marks), so it works whatever option the readers' mutex, in
	// this process or another, was built with.
	r, err := c.newMutex("NewRWMutex", name, &Hold{Group: readerGroup, Yield: true}, opts)
	if err != nil {
		return nil, nil, err
	}
	w, err := c.newMutex("NewRWMutex", name, &Hold{Group: writerGroup, Limit: 1}, opts)
	if err != nil {
		return nil, nil, err
	}
	if w.cfg.preferWrite {
		token, _ := c.newValue()
		hk := w.kind.(*holdKind) // newMutex made it from the hold
		hk.hold.Waiter = token
		// Until this writer's next attempt renews the mark: its backoff
		// plus an attempt and its rollback, twice.
		hk.hold.WaitTTL = 2 * (w.cfg.retryMax + c.cfg.nodeTimeout + c.cfg.releaseTimeout)
	}
	return r, w, nil
}

// WithWriterPreference gives the writer of a read-write lock preference: a
// writer's attempt that is refused leaves a mark on the nodes that refused
// it, and new read leases of the lock (of every read-write lock of the name, in any
// process, whether or not it was built with this option) are refused there
// while the mark lives, so a stream of readers cannot starve the writer: it
// gets in once the read leases held when it started waiting have ended. The
// mark lives twice the writer's retry backoff maximum plus node and release
// timeouts (renewed by each attempt of a waiting Lock, removed where the
// writer gets the lock), so a writer that gives up, or a single TryLock,
// keeps readers out that long. Readers holding the lock keep it (and may
// Extend) until they release. As with sync.RWMutex, a reader must not wait
// for a new read lease while it keeps one: with a writer waiting, the new
// one is refused until the held one ends, so the writer waits out the held
// lease's validity (renewal, which goes on, makes that forever). Only
// NewRWMutex accepts it. Default: off (readers may starve writers).
func WithWriterPreference() LockOption { return func(l *lockConfig) { l.preferWrite = true } }

// NewSemaphore returns a counting semaphore called name that admits k
// holders at once, each with its own lease and expiry, as a Mutex: its
// Lock, TryLock and Do take one of the k places (the lease's Holds reports
// the holders on the nodes), and the lease's Unlock gives it back. Like
// every Mutex it holds no state between calls and is safe for concurrent
// use.
//
// For k > 1 a majority of nodes is not enough: its quorum is the larger of
// the client's and floor(n*k/(k+1))+1 for n nodes (n = 3: 3 for any k > 1;
// n = 5: 4 for k = 2 and 3, 5 for k >= 4; every node once k >= n-1), so it
// tolerates fewer failed nodes than a mutex: none for n = 3 and k > 1, one
// for n = 5 and k = 2 or 3, none for n = 5 and k >= 4 (docs/shapes.md has
// the table and the derivation). Every
// client of the semaphore must use the same k: the holds of semaphores with
// different k exclude each other, so a wrong k blocks instead of exceeding
// the bound. It takes NewMutex's options (except WithFencing) with the same
// defaults and does not contact the nodes. Every node must implement
// ShapeNode. Errors wrap ErrInvalidConfig: NewMutex's, k below 1,
// WithFencing or WithWriterPreference, or a node without the capability
// (named by its Addr).
func (c *Client) NewSemaphore(name string, k int, opts ...LockOption) (*Mutex, error) {
	if k < 1 {
		return nil, configError("NewSemaphore: k %d must be at least 1", k)
	}
	m, err := c.newMutex("NewSemaphore", name, &Hold{Group: wire.SemaphoreGroup(k), Limit: k}, opts)
	if err != nil {
		return nil, err
	}
	if !c.cfg.knobs.NoShapeQuorum { // test-only switch (internal/knobs)
		m.quorum = m.quorum.atLeast(func(n int) int { return semaphoreQuorum(n, k) })
	}
	return m, nil
}

// semaphoreQuorum is the least quorum that keeps n nodes, each admitting k
// holds, from granting k+1 holders: those would occupy (k+1)*q node places,
// more than the n*k there are, when (k+1)*q > n*k, so some node would hold
// k+1 (impossible); the least such q is floor(n*k/(k+1))+1. Any smaller q
// is unsafe: k+1 holders laid out round the nodes, q consecutive nodes
// each, put at most k on any node. A majority is not enough for k > 1: with
// n = 3, q = 2 and k = 2, holders on nodes {0,1}, {1,2} and {0,2} are three
// (TestSemaphoreBound found it). For k = 1 it is the majority; for
// k >= n-1 it is n.
func semaphoreQuorum(n, k int) int { return n*k/(k+1) + 1 }

// Holds returns the number of live holds of the lease's group on the nodes
// when it was acquired, counting its own (the highest among the nodes that
// granted it by the decision; the nodes apply concurrent acquisitions in
// different orders, so it is a report, not a lock-wide count): a reentrant lease's depth, the readers of a read lease, the
// holders of a semaphore. It is 1 for a plain mutex and a write lease.
func (l *Lease) Holds() int { return l.holds }

// kindFor chooses the kind of a constructor's lock (kind.go) and refuses
// what the constructor cannot do: fencing for shared locks, writer
// preference outside NewRWMutex, nodes without the kind's capability.
func (c *Client) kindFor(ctor string, hold *Hold, l lockConfig) (kind, error) {
	if l.preferWrite && ctor != "NewRWMutex" {
		return nil, configError("%s: WithWriterPreference applies to NewRWMutex only", ctor)
	}
	var k kind = mutexKind{}
	switch {
	case hold != nil && l.fencing:
		return nil, configError("%s: WithFencing applies to NewMutex only", ctor)
	case hold != nil:
		k = &holdKind{hold: *hold}
	case l.fencing:
		k, ctor = fencedKind{}, "WithFencing"
	}
	if l.fair {
		if hold != nil {
			return nil, configError("%s: WithFairQueue applies to NewMutex only", ctor)
		}
		if err := c.checkKind(ctor, k); err != nil {
			return nil, err
		}
		k, ctor = fairKind{base: k}, "WithFairQueue"
	}
	if err := c.checkKind(ctor, k); err != nil {
		return nil, err
	}
	return k, nil
}

// target is what releasing value removes: key=value, or its hold.
func (m *Mutex) target(value string) pendingRelease {
	return pendingRelease{key: m.name, value: value, kind: m.kind, lock: &m.info}
}

// holdCount is the highest hold count among the nodes that granted the
// acquisition r by its decision d (1 for a mutex).
func (m *Mutex) holdCount(r *round, d decision, grants []grant) int {
	high := 0
	for i := range r.calls {
		if r.yesBy(d, i) {
			high = max(high, grants[i].holds)
		}
	}
	return high
}
