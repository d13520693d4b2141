package chaos

import (
	"fmt"
	"sort"
	"time"
)

// Interval is the time one lease was believed valid by its client: from
// Start (Lock returned) to End = min(the start of Unlock, Until).
type Interval struct {
	Client     int
	Token      string
	Start, End time.Duration
	Until      time.Duration
}

// Overlap is a mutual-exclusion violation: two clients inside a critical
// section at the same time while both believed their lease valid.
type Overlap struct {
	// A began first.
	A, B Interval
	// From and To bound the common part.
	From, To time.Duration
}

func (o Overlap) String() string {
	return fmt.Sprintf("clients %d and %d both held the lock from %v to %v (leases %.8s [%v,%v] and %.8s [%v,%v])",
		o.A.Client, o.B.Client, o.From, o.To, o.A.Token, o.A.Start, o.A.End, o.B.Token, o.B.Start, o.B.End)
}

// StaleWrite is a write the resource accepted although its writer's lease
// was over: after the lease's validity ended, after another client's later
// lease began, or from a token that never held a lease.
type StaleWrite struct {
	Client int
	Token  string
	At     time.Duration
	Reason string
}

func (s StaleWrite) String() string {
	return fmt.Sprintf("client %d's write at %v (lease %.8s) was accepted %s", s.Client, s.At, s.Token, s.Reason)
}

// Findings is what Check found in a history.
type Findings struct {
	// Acquisitions counts Acquired events.
	Acquisitions int
	// LocksLost counts LockLost events (information, not a violation).
	LocksLost int
	// Overlaps are the mutual-exclusion violations, by start of A.
	Overlaps []Overlap
	// StaleWrites are the stale writes the resource accepted, by time.
	StaleWrites []StaleWrite
	// Rejected counts writes the resource rejected (fencing).
	Rejected int
}

// Violations is the number of overlaps plus stale writes accepted.
func (f Findings) Violations() int { return len(f.Overlaps) + len(f.StaleWrites) }

// Check checks a history for mutual exclusion and stale writes. It does not
// need events in time order. A lease without an Unlock event counts as
// believed valid until its Until. Events whose token has no Acquired event
// are ignored, except accepted writes, which are stale.
func Check(events []Event) Findings {
	var f Findings
	byToken := map[string]*Interval{}
	var ivs []*Interval
	for _, e := range events {
		if e.Kind != Acquired {
			continue
		}
		f.Acquisitions++
		iv := &Interval{Client: e.Client, Token: e.Token, Start: e.At, End: e.Until, Until: e.Until}
		byToken[e.Token] = iv
		ivs = append(ivs, iv)
	}
	for _, e := range events {
		switch e.Kind {
		case Unlock:
			if iv := byToken[e.Token]; iv != nil && e.At < iv.End {
				iv.End = max(e.At, iv.Start)
			}
		case LockLost:
			f.LocksLost++
		case WriteRejected:
			f.Rejected++
		}
	}
	sort.SliceStable(ivs, func(i, j int) bool { return ivs[i].Start < ivs[j].Start })
	starts := make([]time.Duration, len(ivs))
	for i, iv := range ivs {
		starts[i] = iv.Start
	}
	for i, a := range ivs {
		for _, b := range ivs[i+1:] {
			if b.Start >= a.End {
				break
			}
			if b.End <= b.Start {
				continue // believed valid for no time at all
			}
			f.Overlaps = append(f.Overlaps, Overlap{A: *a, B: *b, From: b.Start, To: min(a.End, b.End)})
		}
	}
	for _, e := range events {
		if e.Kind != WriteAccepted {
			continue
		}
		iv := byToken[e.Token]
		switch {
		case iv == nil:
			f.StaleWrites = append(f.StaleWrites, StaleWrite{Client: e.Client, Token: e.Token, At: e.At, Reason: "from a token that never held the lock"})
			continue
		case e.At > iv.Until:
			f.StaleWrites = append(f.StaleWrites, StaleWrite{Client: e.Client, Token: e.Token, At: e.At,
				Reason: fmt.Sprintf("%v after its lease's validity ended at %v", e.At-iv.Until, iv.Until)})
			continue
		}
		// The first lease of another token that began after this lease and
		// before the write.
		k := sort.Search(len(starts), func(k int) bool { return starts[k] > iv.Start })
		for ; k < len(ivs) && ivs[k].Start < e.At; k++ {
			if ivs[k].Token != iv.Token {
				o := ivs[k]
				f.StaleWrites = append(f.StaleWrites, StaleWrite{Client: e.Client, Token: e.Token, At: e.At,
					Reason: fmt.Sprintf("after client %d's later lease %.8s began at %v", o.Client, o.Token, o.Start)})
				break
			}
		}
	}
	sort.SliceStable(f.StaleWrites, func(i, j int) bool { return f.StaleWrites[i].At < f.StaleWrites[j].At })
	return f
}
