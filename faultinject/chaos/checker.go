package chaos

import "github.com/quorumlock/quorumlock/faultinject/history"

// The checker is package history's, shared with the simulator.
type (
	// Findings is history.Findings: what Check found.
	Findings = history.Findings
	// Overlap is history.Overlap: two holders at once.
	Overlap = history.Overlap
	// Interval is history.Interval: the time one lease was believed valid.
	Interval = history.Interval
)

// Check judges a history against every invariant of history.Invariants.
func Check(events []Event) Findings { return history.Check(events) }

// counted says which classes of invariant a run's verdict counts. Cleanup
// is not: keys left right after the clients closed are reported
// (Report.Leaked: they expire with their TTL, and a run on real servers
// cannot tell the ones the coordinator documents), and keys still there a
// TTL later fail the verdict as Report.PersistentLeaks.
var counted = map[history.Class]bool{
	history.Exclusion: true,
	history.Fencing:   true,
	history.Write:     true,
	history.Contract:  true,
	history.Cleanup:   false,
}

// violations returns the violations a run's verdict counts: those of a
// counted class, except, on a lock whose writes are fenced, what fencing
// absorbs (two leases at once: the resource orders their writes, and
// FencedWriteOrder judges that).
func violations(f Findings) []history.Violation {
	var out []history.Violation
	for _, v := range f.Violations {
		if counted[v.Invariant.Class] && !(v.Fenced && v.Invariant.FencingAbsorbs) {
			out = append(out, v)
		}
	}
	return out
}

// staleWrites are the invariants whose violations are writes the resource
// accepted although their lease was over, or a newer lease had written
// (Report.StaleWritesAccepted): judged on the resource's decisions, and on
// its own record of what it kept (StoredWriteOrder, a PostgreSQL
// resource's rows).
var staleWrites = []*history.Invariant{&history.FreshWrites, &history.LeasedWrites, &history.FencedWriteOrder, &history.StoredWriteOrder}

// staleWritesAccepted counts the stale writes of f: each lease writes once,
// so a write that breaks several of staleWrites (its decision and the
// resource's record of it) counts once.
func staleWritesAccepted(f Findings) int {
	seen := map[string]bool{}
	for _, v := range f.Of(staleWrites...) {
		seen[v.Token] = true
	}
	return len(seen)
}
