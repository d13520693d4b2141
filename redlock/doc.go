// Package redlock is a distributed lock over N independent Redis masters
// (the RedLock algorithm): a lock is held when a quorum of masters (N/2+1 by
// default) granted it, for a validity measured on the monotonic clock.
//
// # Getting started
//
// Build one Node per master (package node/redisnode: redisnode.Dial with
// host:port or a redis:// or rediss:// URL, or redisnode.DialAll for the
// whole list; package node/memnode for tests), a
// Client over them with New, and a Mutex per lock name with
// Client.NewMutex. New does not contact the masters; it refuses invalid
// options, and exactly two masters unless WithQuorum(2) is given (two
// tolerate no failure). Use an odd number, three or five.
//
// Mutex.Lock returns a *Lease: Lease.Valid is the check before each write,
// Lease.Done closes the moment the lease can no longer be trusted and
// Lease.Err says why, Lease.Extend moves its deadline, Lease.Unlock releases
// it. Mutex.Do runs a function while it holds the lock, renews it in the
// background, and cancels the function's context before the lock can
// expire; WithMaxWait bounds its wait for the lock apart from the work.
// Close the Client with a deadline when done (Client.Close).
//
// The package Example is the README's quick start (Lock and Unlock, then
// Do, with fencing). The other examples:
//
//   - ExampleMutex_Do: Do with fencing tokens; a late write with an older
//     token is refused by the resource.
//   - ExampleWithLogger: the library's log/slog records and go-redis's own
//     log lines in one logger.
//   - ExampleLease_Done: a renewed lease that learns the lock is lost.
//   - ExampleClient_NewRWMutex, ExampleClient_NewSemaphore,
//     ExampleClient_NewReentrant: the lock shapes.
//   - redisnode's ExampleDial: URLs, ACL users and TLS; ExampleDialAll:
//     every master at once.
//   - memnode's Example and TestInvoiceJobOnVirtualTime
//     (node/memnode/example_test.go): user code tested on in-memory masters
//     inside a testing/synctest bubble, where TTLs run on virtual time.
//
// # Safety, opt-in
//
// RedLock alone assumes bounded clock drift, masters that keep their keys
// across restarts, and holders that stop at their deadline. Options cover
// what it cannot: WithFencing (Lease.Fence: a token the protected
// resource checks, which stops a holder paused past its lease; its counters
// expire WithFenceRetention after their last use),
// WithAutoRenew and Mutex.Do (leases that end in time), WithRestartQuarantine
// (masters that restarted empty or failed over do not vote for a TTL) and
// WithLockDelay. docs/algorithm.md gives the argument and docs/safety.md the
// chaos suite's evidence; docs/shapes.md describes the reentrant mutex,
// read-write lock and semaphore.
//
// # Leader election
//
// Client.NewElection elects one leader at a time on the same quorum, as
// etcd's concurrency.Election does: Election.Campaign waits to be elected
// and returns a Leadership whose Term is a fencing token and whose Context
// is done before another candidate can be elected; Resign hands it back;
// Election.Leader and Election.Observe tell anyone who leads
// (docs/algorithm.md, "Election").
//
// # Observability
//
// WithObserver installs an Observer, called synchronously with five events:
// an operation's start and end (its attempts and fencing epoch included), a
// node call, a lease's end, and a node's state (a server run met, with its
// quarantine and settings check, or a release backlog change); each carries
// an Err to match with errors.Is (nothing is built without one); WithLogger
// writes
// log/slog records of what an operator needs to know. The modules
// observe/redlockprometheus and observe/redlockotel are Observers for
// Prometheus and OpenTelemetry (docs/observability.md).
//
// # Errors
//
// Errors wrap sentinel values for errors.Is: ErrNotObtained (with a
// *QuorumError naming each node's outcome, and ctx.Err() when the context
// ended), ErrLockLost, ErrNotExtended, ErrNotReleased, ErrReleased,
// ErrClosed, ErrInvalidConfig; a Node's errors wrap ErrNotSent (the call
// certainly did not reach the master: a refused connection) or
// ErrNodeDenied (the server refused the user).
//
// # Defaults
//
// TTL 10s, drift factor 0.01 (+2ms), node call timeout 50ms (1s for the
// first contact with a node), release timeout 100ms, quorum N/2+1, retry
// backoff 10-250ms with jitter, 16 calls in flight per node; each option
// documents its default and its valid range.
package redlock
