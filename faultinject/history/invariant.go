package history

import (
	"cmp"
	"slices"
	"time"
)

// Class groups invariants by what a break means, so that a caller's
// verdict is a table from class to consequence.
type Class int

// The classes of invariant.
const (
	// Exclusion: the lock's promise between leases (two conflicting
	// holders at once, more than K, a valid lease off a quorum, an acquire
	// applied after its release). Promised under the documented
	// assumptions (docs/safety.md).
	Exclusion Class = iota + 1
	// Fencing: what fencing tokens promise: tokens rise in the order leases
	// are granted, and the fenced resource never takes an older lease's
	// write after a newer one's, nor refuses the newer one's.
	Fencing
	// Write: a write accepted without fencing must come from a lease, within
	// its validity and before any rival lease began. A holder that stalls
	// past its validity (a process pause) breaks it: that is what fencing
	// is for.
	Write
	// Contract: what a lease reports about itself (Holds within its
	// shape's bound, not valid once Do has returned).
	Contract
	// Cleanup: what outlives the clients (keys left after every client
	// closed, unless the coordinator documents them; anything left one TTL
	// later), or the call that sent it (a key handed to a call that then
	// ended).
	Cleanup
	// Progress: what the waiting line promises about who gets a free lock
	// (a master refuses a waiter the free key only for a live waiter ahead
	// of it; a waiting call gets a lock that stays free). A break delays
	// callers, it never lets two in.
	Progress
)

func (c Class) String() string {
	return [...]string{"?", "exclusion", "fencing", "write", "contract", "cleanup", "progress"}[c]
}

// Invariant is one property a history must have, as a value: its name,
// what it says, its class, and its judge.
type Invariant struct {
	// Name is short and stable ("mutual-exclusion").
	Name string
	// About states the property in one sentence.
	About string
	// Class says what a break means.
	Class Class
	// FencingAbsorbs: with fencing tokens on the lock's writes, a break is
	// harmless to the resource by itself (the fenced writes are judged
	// instead). A caller that judges the resource may skip it then.
	FencingAbsorbs bool
	judge          func(*view, *Findings) []Violation
}

// Invariants is every invariant Check judges, in the order it reports
// them.
var Invariants = []*Invariant{
	&MutualExclusion, &SemaphoreBound, &QuorumCoverage, &ReleaseGuard, &LockDelay,
	&TokenOrder, &FencedWriteOrder, &NewerWriteAccepted, &StoredWriteOrder,
	&FreshWrites, &LeasedWrites,
	&HoldsBound, &DoReleases,
	&NoOrphans, &KeysExpire, &GrantReleased,
	&KeptOut, &Granted,
}

// Violation is one break of an invariant.
type Violation struct {
	Invariant *Invariant
	// Lock is the lock's name ("" in the history of one lock).
	Lock string
	// At is when it happened; Client and Token the lease that broke it,
	// when one did.
	At     time.Duration
	Client int
	Token  string
	// Fenced: the lock's writes carried fencing tokens.
	Fenced bool
	// Paused (FreshWrites): the writer had stalled before the write, the
	// client-pause hazard fencing exists for.
	Paused bool
	// What says what happened, in words.
	What string
}

func (v Violation) String() string { return v.Invariant.Name + ": " + v.What }

// Findings is what Check found in a history.
type Findings struct {
	// Acquisitions counts Acquired events.
	Acquisitions int
	// LocksLost counts LockLost events (information, not a violation).
	LocksLost int
	// Rejected counts writes the resource rejected (fencing).
	Rejected int
	// Fenced says some write carried a fencing token: those locks' writes
	// are judged by what fencing promises (FencedWriteOrder,
	// NewerWriteAccepted) instead of by time (FreshWrites).
	Fenced bool
	// Overlaps are MutualExclusion's violations with both leases, by start
	// of the first.
	Overlaps []Overlap
	// Violations are every invariant's, in the order of Invariants, each
	// invariant's by time.
	Violations []Violation
}

// Of returns the violations of the invariants given, in Violations' order.
func (f Findings) Of(invs ...*Invariant) []Violation {
	var out []Violation
	for _, v := range f.Violations {
		if slices.Contains(invs, v.Invariant) {
			out = append(out, v)
		}
	}
	return out
}

// Check judges a history against every invariant of Invariants. The events
// need not be in time order. A lease counts as believed valid from its
// Acquired event to its Unlock event or, without one, to its Until, the
// latest any of its events recorded (renewals move it). Events whose token
// has no Acquired event are ignored, except accepted writes, which break
// LeasedWrites.
func Check(events []Event) Findings {
	v := index(events)
	f := Findings{}
	for _, e := range events {
		switch e.Kind {
		case Acquired:
			f.Acquisitions++
		case LockLost:
			f.LocksLost++
		case WriteRejected:
			f.Rejected++
		}
	}
	for _, l := range v.locks {
		f.Fenced = f.Fenced || l.fenced
	}
	for _, inv := range Invariants {
		vs := inv.judge(v, &f)
		slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
		for i := range vs {
			vs[i].Invariant, vs[i].Fenced = inv, v.fenced(vs[i].Lock)
		}
		f.Violations = append(f.Violations, vs...)
	}
	return f
}
