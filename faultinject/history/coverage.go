package history

import (
	"fmt"
	"slices"
	"time"
)

// QuorumCoverage checks that a lease's validity never exceeds the real
// remaining time on a quorum: while it is valid, a quorum of masters holds
// it.
var QuorumCoverage = Invariant{
	Name:  "quorum-coverage",
	About: "while a lease is valid, a quorum of masters holds it (its validity never exceeds the real remaining time on a quorum); not judged once a master lost its keys, which the restart quarantine covers",
	Class: Exclusion,
	judge: judgeCoverage,
}

// judgeCoverage judges each Covered observation made while its lease was
// valid, unless a master had lost its keys by then (KeysLost at or before
// it: a quarantined restart may drop a quorum member's key legitimately).
func judgeCoverage(v *view, _ *Findings) []Violation {
	var loss []time.Duration
	for _, e := range v.of(KeysLost) {
		loss = append(loss, e.At)
	}
	var out []Violation
	for _, e := range v.of(Covered) {
		if e.At >= e.Until || e.Copies >= e.Quorum || len(loss) > 0 && slices.Min(loss) <= e.At {
			continue
		}
		out = append(out, Violation{Lock: e.Lock, At: e.At, Client: e.Client, Token: e.Token,
			What: fmt.Sprintf("c%d's lease on %s is valid for %v more but its key is on %d masters, quorum %d", e.Client, e.Lock, e.Until-e.At, e.Copies, e.Quorum)})
	}
	return out
}
