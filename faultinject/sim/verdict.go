package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/quorumlock/quorumlock/faultinject/history"
)

// role is what a violation does to a schedule's verdict.
type role int

const (
	// unsafe: a failure, unless the schedule broke a documented hard
	// assumption (then counted in Result.Unsafe, the schedule classified).
	unsafe role = iota
	// fencing: as unsafe, or Result.Known (the fencing bug once open) after
	// a counter loss under the quarantine when StrictFencing is off.
	fencing
	// failure: a failure whatever the schedule broke.
	failure
	numRoles
)

// roles is the verdict's table: the role of each class of invariant
// (docs/simulation.md, "Invariants"). A stale write whose writer paused
// is not judged: its pause broke the no-pause assumption (Result.Broken).
var roles = map[history.Class]role{
	history.Exclusion: unsafe,
	history.Fencing:   fencing,
	history.Write:     unsafe,
	history.Contract:  failure,
	history.Cleanup:   failure,
	history.Progress:  failure,
}

// judge checks events and puts the findings into r by the roles table, after the
// harness's own violations (w.viol); r.Broken holds the plan's broken
// assumptions.
func (w *world) judge(r *Result, events []history.Event) {
	f := history.Check(events)
	p := w.plan
	var by [numRoles][]string
	for _, v := range f.Violations {
		if v.Paused {
			r.Broken = append(r.Broken, fmt.Sprintf("c%d paused past its validity before a write (no fencing)", v.Client))
			continue
		}
		rl := roles[v.Invariant.Class]
		by[rl] = append(by[rl], fmt.Sprintf("%v: %v", v.At, v))
	}
	keyLoss := slices.ContainsFunc(events, func(e history.Event) bool { return e.Kind == history.KeysLost })
	if len(by[fencing]) > 0 && keyLoss && p.Quar && !StrictFencing.Load() {
		r.Known = by[fencing]
	} else {
		by[unsafe] = append(by[unsafe], by[fencing]...)
	}
	r.Violations = append(slices.Clip(w.viol), by[failure]...)
	// A holder's pause past its validity explains a late write, never two
	// overlapping validity intervals or a token out of order: a schedule
	// whose only broken assumption is a pause is still judged on those.
	hard := slices.ContainsFunc(r.Broken, func(b string) bool { return !strings.Contains(b, "paused past its validity") })
	if hard {
		r.Unsafe = by[unsafe]
	} else {
		r.Violations = append(r.Violations, by[unsafe]...)
	}
}
