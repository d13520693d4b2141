package history

import (
	"strings"
	"testing"
)

// TestReleaseGuard: an acquire applied after its release is an orphan
// within the guard, and excused (its key too) beyond it.
func TestReleaseGuard(t *testing.T) {
	overtaken := Event{Client: 3, Kind: Overtaken, At: 499 * ms, Lock: "l", Token: "v", Node: 1, Released: 100 * ms, Guard: 400 * ms, Note: "sent at 90ms"}
	left := Event{Kind: Leftover, At: 900 * ms, Lock: "l", Token: "v", Node: 1, Note: "key l"}
	f := Check([]Event{overtaken, left})
	vs := f.Of(&ReleaseGuard)
	if len(vs) != 1 || !strings.Contains(vs[0].What, "orphan: c3's acquire of l (sent at 90ms) applied on m1") || len(f.Of(&NoOrphans)) != 1 {
		t.Fatalf("within the guard: want the straggler and its orphan key, got:\n%s", whats(f.Violations))
	}
	overtaken.At = 500 * ms
	if f := Check([]Event{overtaken, left}); len(f.Violations) != 0 {
		t.Errorf("beyond the guard: %s", whats(f.Violations))
	}
}
