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
	// Shared, Limit and Owner come from the Acquired event: a read lease,
	// a semaphore's K, a reentrant owner.
	Shared bool
	Limit  int
	Owner  string
}

// conflicts says whether a and b may not overlap: not two read leases, not
// two leases of one reentrant owner, and semaphore leases are counted
// instead (OverLimit).
func (a *Interval) conflicts(b *Interval) bool {
	switch {
	case a.Limit > 0 || b.Limit > 0:
		return false
	case a.Shared && b.Shared:
		return false
	case a.Owner != "" && a.Owner == b.Owner:
		return false
	}
	return true
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

// OverLimit is a semaphore violation: more than Limit leases believed valid
// at the same time.
type OverLimit struct {
	At           time.Duration
	Count, Limit int
}

func (o OverLimit) String() string {
	return fmt.Sprintf("%d semaphore leases believed valid at %v, limit %d", o.Count, o.At, o.Limit)
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
	// Fenced says the writes carried fencing tokens, and were judged by
	// what fencing promises (see Check).
	Fenced bool
	// OverLimit are the moments more than a semaphore's K leases were
	// believed valid (the first moment of each excess).
	OverLimit []OverLimit
	// NewerRefused are writes of a newer lease that a fenced resource
	// refused because an older lease had written with a higher token: the
	// tokens went backwards.
	NewerRefused []StaleWrite
}

// Violations is the number of violations. Without fencing: overlaps plus
// stale writes accepted. With fencing, overlaps are harmless by
// themselves: stale writes accepted plus newer writes refused.
func (f Findings) Violations() int {
	if f.Fenced {
		return len(f.StaleWrites) + len(f.NewerRefused) + len(f.OverLimit)
	}
	return len(f.Overlaps) + len(f.StaleWrites) + len(f.OverLimit)
}

// Check checks a history for mutual exclusion and stale writes. It does not
// need events in time order. A lease counts as
// believed valid from its Acquired event to its Unlock event or, without
// one, to its Until, the latest any of its events recorded (renewals move
// it). Events whose token has no Acquired event are ignored, except accepted
// writes, which are stale.
//
// Writes without fencing tokens are stale when accepted after their lease's
// validity or after another lease began. Writes with fencing tokens are
// judged by what fencing promises, which is weaker than mutual exclusion and
// enough for the resource: no write of an older lease (one that began
// earlier) is accepted after a newer lease's write was, and no newer lease's
// write is refused.
func Check(events []Event) Findings {
	var f Findings
	byToken := map[string]*Interval{}
	var ivs []*Interval
	for _, e := range events {
		if e.Kind != Acquired {
			continue
		}
		f.Acquisitions++
		iv := &Interval{Client: e.Client, Token: e.Token, Start: e.At, End: e.Until, Until: e.Until,
			Shared: e.Shared, Limit: e.Limit, Owner: e.Owner}
		byToken[e.Token] = iv
		ivs = append(ivs, iv)
	}
	for _, e := range events {
		if iv := byToken[e.Token]; iv != nil && e.Until > iv.Until {
			iv.Until, iv.End = e.Until, e.Until
		}
		if (e.Kind == WriteAccepted || e.Kind == WriteRejected) && e.Fence > 0 {
			f.Fenced = true
		}
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
	for i, a := range ivs {
		for _, b := range ivs[i+1:] {
			if b.Start >= a.End {
				break
			}
			if b.End <= b.Start || !a.conflicts(b) {
				continue // believed valid for no time at all, or allowed to overlap
			}
			f.Overlaps = append(f.Overlaps, Overlap{A: *a, B: *b, From: b.Start, To: min(a.End, b.End)})
		}
	}
	f.checkLimit(ivs)
	if f.Fenced {
		f.checkFencedWrites(events, byToken)
	} else {
		f.checkWrites(events, byToken, ivs)
	}
	sort.SliceStable(f.StaleWrites, func(i, j int) bool { return f.StaleWrites[i].At < f.StaleWrites[j].At })
	return f
}

// checkLimit sweeps the semaphore leases (Limit > 0) in time order and
// records each moment their count first exceeds the limit.
func (f *Findings) checkLimit(ivs []*Interval) {
	type edge struct {
		at    time.Duration
		delta int
		limit int
	}
	var edges []edge
	for _, iv := range ivs {
		if iv.Limit > 0 && iv.End > iv.Start {
			edges = append(edges, edge{iv.Start, +1, iv.Limit}, edge{iv.End, -1, iv.Limit})
		}
	}
	// At equal times an end comes before a start: a hand-over is no excess.
	sort.SliceStable(edges, func(i, j int) bool {
		return edges[i].at < edges[j].at || edges[i].at == edges[j].at && edges[i].delta < edges[j].delta
	})
	n, over := 0, false
	for _, e := range edges {
		n += e.delta
		if n > e.limit && !over {
			f.OverLimit = append(f.OverLimit, OverLimit{At: e.at, Count: n, Limit: e.limit})
		}
		over = n > e.limit
	}
}

// checkWrites judges writes without fencing: an accepted write is stale
// after its lease's validity or once another lease began.
func (f *Findings) checkWrites(events []Event, byToken map[string]*Interval, ivs []*Interval) {
	starts := make([]time.Duration, len(ivs))
	for i, iv := range ivs {
		starts[i] = iv.Start
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
			if ivs[k].Token != iv.Token && (iv.Owner == "" || ivs[k].Owner != iv.Owner) {
				o := ivs[k]
				f.StaleWrites = append(f.StaleWrites, StaleWrite{Client: e.Client, Token: e.Token, At: e.At,
					Reason: fmt.Sprintf("after client %d's later lease %.8s began at %v", o.Client, o.Token, o.Start)})
				break
			}
		}
	}
}

// checkFencedWrites judges writes with fencing tokens, in the resource's
// order: an accepted write is stale when a newer lease's write was accepted
// before it; a refused write is a violation when its lease is newer than the
// lease of every accepted write.
func (f *Findings) checkFencedWrites(events []Event, byToken map[string]*Interval) {
	var writes []Event
	for _, e := range events {
		if e.Kind == WriteAccepted || e.Kind == WriteRejected {
			writes = append(writes, e)
		}
	}
	// The resource timestamps a write while it holds its lock: At orders
	// them as it decided them.
	sort.SliceStable(writes, func(i, j int) bool { return writes[i].At < writes[j].At })
	var newest *Interval // the latest-starting lease with an accepted write
	var newestFence int64
	for _, e := range writes {
		iv := byToken[e.Token]
		if iv == nil {
			if e.Kind == WriteAccepted {
				f.StaleWrites = append(f.StaleWrites, StaleWrite{Client: e.Client, Token: e.Token, At: e.At, Reason: "from a token that never held the lock"})
			}
			continue
		}
		switch {
		case e.Kind == WriteRejected && (newest == nil || iv.Start > newest.Start):
			reason := "by a fenced resource that accepted no write yet"
			if newest != nil {
				reason = fmt.Sprintf("with fencing token %d, below %d of client %d's older lease %.8s (began at %v, this one at %v): the tokens went backwards",
					e.Fence, newestFence, newest.Client, newest.Token, newest.Start, iv.Start)
			}
			f.NewerRefused = append(f.NewerRefused, StaleWrite{Client: e.Client, Token: e.Token, At: e.At, Reason: reason})
		case e.Kind == WriteAccepted && newest != nil && newest.Start > iv.Start:
			f.StaleWrites = append(f.StaleWrites, StaleWrite{Client: e.Client, Token: e.Token, At: e.At,
				Reason: fmt.Sprintf("with fencing token %d after client %d's newer lease %.8s (token %d) had written", e.Fence, newest.Client, newest.Token, newestFence)})
		case e.Kind == WriteAccepted && (newest == nil || iv.Start >= newest.Start):
			newest, newestFence = iv, e.Fence
		}
	}
}
