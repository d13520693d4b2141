package history

import (
	"sync"
	"time"
)

// Register is a protected resource: an in-process register that records
// every write in a Recorder, timestamped on a RefClock while it holds its
// lock. Without fencing it accepts every write; with fencing it refuses a
// write whose token is below the highest it has accepted (as
// memnode.FencedStore does). It is safe for concurrent use.
type Register struct {
	clock  *RefClock
	h      *Recorder
	fenced bool

	mu      sync.Mutex
	value   string
	highest int64
}

// NewRegister returns a register recording into h on clock c, checking
// fencing tokens when fenced.
func NewRegister(c *RefClock, h *Recorder, fenced bool) *Register {
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
