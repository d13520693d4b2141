package chaos

import (
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
)

// The checker's own tests (a violating history per invariant) are in
// package history; these test what a chaos run's verdict counts.

const ms = time.Millisecond

// TestVerdictCountsByClass: an overlap counts without fencing and not with
// it (the fenced resource orders the writes); a fenced write out of order
// and a lease that reports two holds count; leftover keys do not (they are
// Report.Leaked and, a TTL later, Report.PersistentLeaks).
func TestVerdictCountsByClass(t *testing.T) {
	// overlap: client 1 acquires and writes inside client 0's lease, with
	// fencing tokens fence and fence+1 (none when fence is 0).
	overlap := func(fence int64) []Event {
		next := fence
		if fence > 0 {
			next++
		}
		return []Event{
			{Client: 0, Kind: Acquired, At: 0, Until: 990 * ms, Token: "a", Fence: fence, Holds: 1},
			{Client: 1, Kind: Acquired, At: 300 * ms, Until: 1290 * ms, Token: "b", Fence: next, Holds: 1},
			{Client: 1, Kind: WriteAccepted, At: 310 * ms, Token: "b", Fence: next},
			{Client: 1, Kind: Unlock, At: 320 * ms, Token: "b"},
			{Client: 0, Kind: Unlock, At: 500 * ms, Token: "a"},
		}
	}
	cases := []struct {
		name    string
		ev      []Event
		counted int
		stale   int
	}{
		{"overlap without fencing", overlap(0), 1, 0},
		{"overlap with fencing", overlap(1), 0, 0},
		{"older write after a newer one", append(overlap(1), Event{Client: 0, Kind: WriteAccepted, At: 400 * ms, Token: "a", Fence: 1}), 1, 1},
		{"two holds on a mutex", []Event{{Client: 0, Kind: Acquired, At: 0, Until: 990 * ms, Token: "a", Holds: 2}}, 1, 0},
		{"a key left, then still there", []Event{
			{Kind: history.Leftover, At: time.Second, Token: "a", Node: 1, Note: "k"},
			{Kind: history.Outlived, At: 2 * time.Second, Token: "a", Node: 1, Note: "k"}}, 0, 0},
	}
	for _, c := range cases {
		f := Check(c.ev)
		if got := violations(f); len(got) != c.counted {
			t.Errorf("%s: %d counted (%v), want %d; found %v", c.name, len(got), got, c.counted, f.Violations)
		}
		if got := len(f.Of(staleWrites...)); got != c.stale {
			t.Errorf("%s: %d stale writes accepted, want %d", c.name, got, c.stale)
		}
	}
	for c := history.Exclusion; c <= history.Cleanup; c++ {
		if _, ok := counted[c]; !ok {
			t.Errorf("class %v: not in the verdict's table", c)
		}
	}
}
