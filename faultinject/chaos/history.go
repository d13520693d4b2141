package chaos

import "github.com/quorumlock/quorumlock/faultinject/history"

// A run's history is recorded and checked by package history, the checker
// the simulator shares; these names keep the chaos API.
type (
	// RefClock is history.RefClock: the run's reference monotonic clock.
	RefClock = history.RefClock
	// EventKind is history.Kind.
	EventKind = history.Kind
	// Event is history.Event: one entry of a history.
	Event = history.Event
	// History is history.Recorder: the events of one run, safe for
	// concurrent use.
	History = history.Recorder
	// Register is history.Register: the protected resource.
	Register = history.Register
)

// The kinds of event the chaos workload records (history's).
const (
	Acquired      = history.Acquired
	Paused        = history.Paused
	LockLost      = history.LockLost
	WriteAccepted = history.WriteAccepted
	WriteRejected = history.WriteRejected
	Unlock        = history.Unlock
)

// NewRefClock returns a clock that reads zero now.
func NewRefClock() *RefClock { return history.NewRefClock() }

// NewRegister returns a register recording into h on clock c, checking
// fencing tokens when fenced.
func NewRegister(c *RefClock, h *History, fenced bool) *Register {
	return history.NewRegister(c, h, fenced)
}
