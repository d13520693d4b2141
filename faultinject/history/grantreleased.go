package history

import (
	"cmp"
	"fmt"
	"slices"
)

// GrantReleased checks that a call leaves no key behind once it has ended
// (the model's grant-released, model/queue.pml with GRANT): at a
// checkpoint (Held), no master's key holds a value of a call that gave up
// (GaveUp) or whose lease's Unlock began, before the checkpoint. The
// hand-over (docs/handoff.md) sets a waiter's key to a value its acquire
// recorded; the waiter's next acquire takes it over, its LeaveQueue
// releases it, and nothing else does: a key handed to a call that then
// ended stays until its TTL, and the lock is held by nobody. A value the
// coordinator documents it may leave (a release refused unsent, a
// straggler past its release's guard, a line entry a lost AOF tail brought
// back: NoOrphans) is excused. Each value
// is reported once per master, at the first checkpoint that finds it.
var GrantReleased = Invariant{
	Name:  "grant-released",
	About: "no master's key holds a value of a call that had given up or unlocked",
	Class: Cleanup,
	judge: judgeGrantReleased,
}

func judgeGrantReleased(v *view, _ *Findings) []Violation {
	excused := excusedLeft(v)
	held := v.of(Held)
	slices.SortStableFunc(held, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	type at struct {
		lock string
		left
	}
	seen := map[at]bool{}
	var out []Violation
	for _, h := range held {
		k := at{h.Lock, left{h.Node, h.Token}}
		if excused[k.left] || seen[k] {
			continue
		}
		// The end of the value's call: its client's first GaveUp or
		// Unlock of the lock from the value's sending, before the
		// checkpoint.
		var end *Event
		for i, e := range v.events {
			if e.Client == h.Client && e.Lock == h.Lock && e.At >= h.Sent && e.At < h.At &&
				(e.Kind == GaveUp || e.Kind == Unlock) && (end == nil || e.At < end.At) {
				end = &v.events[i]
			}
		}
		if end == nil {
			continue
		}
		seen[k] = true
		how := map[Kind]string{GaveUp: "gave up", Unlock: "unlocked"}[end.Kind]
		out = append(out, Violation{Lock: h.Lock, At: h.At, Client: h.Client, Token: h.Token,
			What: fmt.Sprintf("%sm%d's key holds c%d's value %s (sent at %v) at %v; that call %s at %v", on(h.Lock), h.Node, h.Client, h.Token, h.Sent, h.At, how, end.At)})
	}
	return out
}
