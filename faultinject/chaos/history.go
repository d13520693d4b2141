package chaos

import (
	"sync"
	"time"
)

// RefClock is the one reference monotonic clock of a run: every event of
// every client is timestamped with it, as a duration since the clock's
// start. It reads Go's monotonic clock, so wall-clock changes on the host do
// not affect it. It is safe for concurrent use.
type RefClock struct{ base time.Time }

// NewRefClock returns a clock that reads zero now.
func NewRefClock() *RefClock { return &RefClock{base: time.Now()} }

// Now returns the time elapsed since the clock's start.
func (c *RefClock) Now() time.Duration { return time.Since(c.base) }

// Of converts a reading of clock.Real (a time.Time carrying a monotonic
// reading, such as redlock.Lease.Until) to this clock.
func (c *RefClock) Of(t time.Time) time.Duration { return t.Sub(c.base) }

// EventKind names what a client did.
type EventKind string

// The kinds of event a client records.
const (
	// Acquired: Lock returned a lease. At is when it returned; Until is the
	// lease's validity deadline.
	Acquired EventKind = "acquired"
	// Paused: the client stalled (a client-pause fault) after its validity
	// check and before its write. At is when the stall began.
	Paused EventKind = "paused"
	// LockLost: the client found its lease no longer valid before writing
	// (it skips the write), or Unlock reported the lock lost.
	LockLost EventKind = "lock-lost"
	// WriteAccepted / WriteRejected: the protected resource accepted or
	// rejected a write. At is when the resource decided, under its lock.
	WriteAccepted EventKind = "write-accepted"
	WriteRejected EventKind = "write-rejected"
	// Unlock: the client began to Unlock. At is just before the call.
	Unlock EventKind = "unlock"
)

// Event is one entry of a history. Times are on the run's RefClock.
type Event struct {
	// Client is the client's index, 0 to K-1.
	Client int `json:"client"`
	// Kind says what happened.
	Kind EventKind `json:"kind"`
	// At is when it happened.
	At time.Duration `json:"at"`
	// Token is the lease's token (every kind).
	Token string `json:"token"`
	// Until is the lease's validity deadline: on Acquired as acquired, on
	// writes and Unlock as renewed by then (zero when not recorded).
	Until time.Duration `json:"until,omitempty"`
	// Fence is the fencing token of a write (0 without fencing).
	Fence int64 `json:"fence,omitempty"`
	// Shared marks a read lease (Acquired only): read leases may overlap
	// each other, not a write lease.
	Shared bool `json:"shared,omitempty"`
	// Limit, on Acquired, is a semaphore's K: up to Limit such leases may
	// overlap. Zero: an exclusive lease.
	Limit int `json:"limit,omitempty"`
	// Owner, on Acquired, names a reentrant owner: leases of the same owner
	// may overlap (re-entry).
	Owner string `json:"owner,omitempty"`
	// Err is the error text of LockLost, when there was one.
	Err string `json:"err,omitempty"`
}

// History is the list of events of one run, in recording order. It is safe
// for concurrent use; the zero value is ready to use.
type History struct {
	mu     sync.Mutex
	events []Event
	acq    int
}

// Add appends e.
func (h *History) Add(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
	if e.Kind == Acquired {
		h.acq++
	}
}

// Acquisitions returns how many Acquired events were added.
func (h *History) Acquisitions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.acq
}

// Events returns a copy of the events.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// Register is the protected resource: an in-process register that records
// every write in a History, timestamped on the RefClock while it holds its
// lock. Without fencing it accepts every write; with fencing it refuses a
// write whose token is below the highest it has accepted (as
// memnode.FencedStore does). It is safe for concurrent use.
type Register struct {
	clock  *RefClock
	h      *History
	fenced bool

	mu      sync.Mutex
	value   string
	highest int64
}

// NewRegister returns a register recording into h on clock c, checking
// fencing tokens when fenced.
func NewRegister(c *RefClock, h *History, fenced bool) *Register {
	return &Register{clock: c, h: h, fenced: fenced}
}

// Write sets the register to value on behalf of the lease token of client,
// with fencing token fence (0 without fencing) and the lease's validity
// deadline until (as renewed by then), and reports whether the write was
// accepted.
func (r *Register) Write(client int, token string, fence int64, until time.Duration, value string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := !r.fenced || fence >= r.highest
	kind := WriteRejected
	if ok {
		r.value, r.highest = value, max(r.highest, fence)
		kind = WriteAccepted
	}
	r.h.Add(Event{Client: client, Kind: kind, At: r.clock.Now(), Token: token, Fence: fence, Until: until})
	return ok
}

// Value returns the last accepted value.
func (r *Register) Value() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.value
}
