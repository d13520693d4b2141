package history

import "time"

// Kind names what an event records.
type Kind string

// What clients do.
const (
	// Acquired: a lease was granted. At is when the client got it; Until is
	// its validity deadline; Fence its fencing token (0 without fencing);
	// Holds what Lease.Holds reported; Shared, Limit and Owner its shape;
	// Delay the lock's WithLockDelay (0 without).
	Acquired Kind = "acquired"
	// Paused: the holder stalled (a client-pause fault) after its validity
	// check and before its write. At is when the stall began.
	Paused Kind = "paused"
	// LockLost: the holder found its lease no longer valid before writing
	// (it skips the write), or Unlock reported the lock lost.
	LockLost Kind = "lock-lost"
	// WriteAccepted / WriteRejected: the protected resource accepted or
	// rejected a write. At is when the resource decided, under its lock;
	// Fence is the write's fencing token (0 without fencing).
	WriteAccepted Kind = "write-accepted"
	WriteRejected Kind = "write-rejected"
	// Unlock: the holder stopped using its lease and began to release it.
	// At is just before the call; Until the validity as renewed by then.
	Unlock Kind = "unlock"
	// DoReturned: Mutex.Do returned. Valid is what Lease.Valid reported
	// right after; Until the lease's validity deadline then.
	DoReturned Kind = "do-returned"
	// Waiting: a waiting Lock call (one that retries until it gets the
	// lock) began. Within is how long it may go on while the lock is free
	// (Granted; 0: not judged). It ends at its client's next Acquired or
	// GaveUp event of the lock.
	Waiting Kind = "waiting"
	// GaveUp: a waiting Lock call ended without a lease (its context
	// ended, or it gave up).
	GaveUp Kind = "gave-up"
)

// What the recorder observed on the masters.
const (
	// Covered: the holder of a lease counted the masters that hold it.
	// Copies is how many do, Quorum how many must while the lease is valid;
	// Until is the lease's validity deadline at At.
	Covered Kind = "covered"
	// KeysLost: master Node lost its keys and counters (a restart or crash
	// without persistence) at At.
	KeysLost Kind = "keys-lost"
	// Overtaken: an acquire of Token applied on master Node at At although
	// the same value's release had reached Node at Released. Guard is how
	// long the release guard refuses a late acquire there; Note what the
	// recorder knows of the acquire (when it was sent).
	Overtaken Kind = "overtaken"
	// ReleaseRefused: master Node refused a release of Token without
	// applying it (the connection was refused: redlock.ErrNotSent), or the
	// LeaveQueue of a waiter whose acquires carried Token there (the
	// waiter stays in the line, where a release may hand it the key at
	// Token); the coordinator does not retry either (documented), so a key
	// of Token may be left behind on Node.
	ReleaseRefused Kind = "release-refused"
	// Restored: master Node restarted from its last fsync (a host crash
	// losing the AOF's last second) with a waiter's entry back in Lock's
	// line although its removal had applied there after that fsync (its
	// LeaveQueue, or the acquire that took the key): a release may hand
	// the key at the entry's value Token, which nobody takes over or
	// releases; it expires with its TTL (docs/handoff.md). Note names the
	// waiter and when its removal applied.
	Restored Kind = "restored"
	// Leftover: after every client closed, master Node still held Token
	// under Lock (a key, or a hold of a shape). Note says what, in words
	// ("key lock-0").
	Leftover Kind = "leftover"
	// Outlived: what Note describes was still on master Node one TTL after
	// every client closed.
	Outlived Kind = "outlived"
	// Refused: master Node refused the acquire of waiter Token (a waiter
	// ID in the master's waiting line) for Client's Lock call although the
	// lock key was free. Line is the master's line right after (its live
	// waiters, first first); Late says the acquire applied after its
	// caller had stopped waiting for it (a copy the network delayed).
	Refused Kind = "refused"
	// Left: waiter Token left master Node's waiting line: its LeaveQueue
	// applied there, or its acquire took the key there in a binding (fair)
	// line. Note says which.
	Left Kind = "left"
	// Queued: master Node refused the acquire of waiter Token for Client's
	// Lock call while another value held the lock key, and the waiter is
	// in the master's line; Late as for Refused.
	Queued Kind = "queued"
	// Held: at a checkpoint (a moment the recorder knows no call to the
	// masters is on its way), master Node held Token as Lock's key. Client
	// is the client whose call sent Token, Sent when it first sent it: the
	// value is of that client's call in progress then (a client's calls
	// run one at a time).
	Held Kind = "held"
)

// What the protected resource itself kept.
const (
	// Stored: the resource's own record of a write it kept (read back from
	// it after the run, as a database's rows): Token is the writing
	// lease's, Fence the write's fencing token, Seq the write's place in the
	// resource's own order (a commit sequence: later commits, higher Seq).
	// At is when the write was recorded accepted, when known.
	Stored Kind = "stored"
)

// Event is one entry of a history. Times are durations on one reference
// clock of the run (RefClock, or the simulator's virtual clock).
type Event struct {
	// Client is the client's index, 0 to K-1.
	Client int `json:"client"`
	// Kind says what happened.
	Kind Kind `json:"kind"`
	// At is when it happened.
	At time.Duration `json:"at"`
	// Lock is the lock's name ("" in the history of one lock).
	Lock string `json:"lock,omitempty"`
	// Token is the lease's token (for Leftover, ReleaseRefused, Restored
	// and Overtaken: the value the master stores, or a hold's id).
	Token string `json:"token"`
	// Until is the lease's validity deadline: on Acquired as acquired, on
	// writes, Unlock, Covered and DoReturned as renewed by then (zero when
	// not recorded).
	Until time.Duration `json:"until,omitempty"`
	// Fence is the fencing token of a lease or a write (0 without fencing).
	Fence int64 `json:"fence,omitempty"`
	// Shared marks a read lease (Acquired only): read leases may overlap
	// each other, not a write lease.
	Shared bool `json:"shared,omitempty"`
	// Limit, on Acquired, is a semaphore's K: up to Limit such leases may
	// overlap. Zero: not a semaphore.
	Limit int `json:"limit,omitempty"`
	// Owner, on Acquired, names a reentrant owner: leases of the same owner
	// may overlap (re-entry).
	Owner string `json:"owner,omitempty"`
	// Delay, on Acquired, is the lock's WithLockDelay: once the lease's
	// validity has ended without Unlock, no conflicting lease may be granted
	// for Delay (LockDelay). Zero: no lock delay.
	Delay time.Duration `json:"delay,omitempty"`
	// Holds, on Acquired, is what Lease.Holds reported: at least 1, at
	// most Limit for a semaphore, exactly 1 for an exclusive lease.
	Holds int `json:"holds,omitempty"`
	// Valid, on DoReturned, is what Lease.Valid reported.
	Valid bool `json:"valid,omitempty"`
	// Node is a master's index (KeysLost, Overtaken, ReleaseRefused,
	// Leftover, Outlived).
	Node int `json:"node,omitempty"`
	// Copies and Quorum, on Covered: masters holding the lease, and how
	// many must.
	Copies int `json:"copies,omitempty"`
	Quorum int `json:"quorum,omitempty"`
	// Released and Guard, on Overtaken: when the release reached the
	// master, and how long its guard lasts there.
	Released time.Duration `json:"released,omitempty"`
	Guard    time.Duration `json:"guard,omitempty"`
	// Seq, on Stored, is the write's place in the resource's own order.
	Seq int64 `json:"seq,omitempty"`
	// Within, on Waiting, bounds how long the call may go on while the
	// lock is free (0: not judged).
	Within time.Duration `json:"within,omitempty"`
	// Sent, on Held, is when the held value's first acquire was sent.
	Sent time.Duration `json:"sent,omitempty"`
	// Line and Late, on Refused: the master's waiting line right after the
	// refusal (its live waiters' IDs, first first), and whether the acquire
	// applied after its caller had stopped waiting for it.
	Line []string `json:"line,omitempty"`
	Late bool     `json:"late,omitempty"`
	// Note describes the event in words, for a report.
	Note string `json:"note,omitempty"`
	// Err is the error text of LockLost, when there was one.
	Err string `json:"err,omitempty"`
}
