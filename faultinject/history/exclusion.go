package history

import (
	"fmt"
	"time"
)

// MutualExclusion checks that no lease is granted while a conflicting lease
// of the same lock is believed valid (two holders of a mutex, a writer with
// anyone, two owners of a reentrant mutex).
var MutualExclusion = Invariant{
	Name:  "mutual-exclusion",
	About: "no lease is granted while a conflicting lease of the lock is believed valid: two mutex holders, a writer with any reader or writer, two reentrant owners",
	Class: Exclusion,
	// Two leases at once are harmless to a fenced resource by themselves:
	// it orders their writes by token (FencedWriteOrder).
	FencingAbsorbs: true,
	judge:          judgeExclusion,
}

// Overlap is a MutualExclusion violation: two clients inside a critical
// section at the same time while both believed their lease valid.
type Overlap struct {
	// A began first.
	A, B Interval
	// From and To bound the common part.
	From, To time.Duration
}

func (o Overlap) String() string {
	return fmt.Sprintf("%sclients %d and %d both held the lock from %v to %v (leases %.8s%s [%v,%v] and %.8s%s [%v,%v])",
		on(o.A.Lock), o.A.Client, o.B.Client, o.From, o.To, o.A.Token, o.A.label(), o.A.Start, o.A.End, o.B.Token, o.B.label(), o.B.Start, o.B.End)
}

// judgeExclusion compares, per lock, every lease with those that began
// while it was believed valid ([Start, End)). A lease granted inside
// another counts even if its holder stopped at once; one whose validity
// was over when its client got it does not.
func judgeExclusion(v *view, f *Findings) []Violation {
	var out []Violation
	for _, l := range v.locks {
		for i, a := range l.leases {
			for _, b := range l.leases[i+1:] {
				if b.Start >= a.End {
					break
				}
				if !b.granted() || !a.conflicts(b) {
					continue
				}
				o := Overlap{A: *a, B: *b, From: b.Start, To: min(a.End, b.End)}
				f.Overlaps = append(f.Overlaps, o)
				out = append(out, Violation{Lock: l.name, At: b.Start, Client: b.Client, Token: b.Token, What: o.String()})
			}
		}
	}
	return out
}
