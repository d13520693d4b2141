package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestReconfigFamilyChanges: the reconfig family's schedules do what the
// family is for. Every change reaches its last configuration (epoch 5:
// two adds and two removes) within the workload, every told client loads
// it, and a client never told loads a later configuration when a master
// refuses its own as stale (redlock.ErrConfigStale), in the schedules
// that have one; and in most schedules a lease is granted on the last
// configuration (its clients' records accepted). The knob cases (NoConfigCheck, NoReconfigWait in
// TestKnobsAreCaught) show the family finds two holders without the
// check or the wait.
func TestReconfigFamilyChanges(t *testing.T) {
	n := uint64(40)
	if testing.Short() || raceEnabled {
		n = 12 // about half with a client never told
	}
	var never, neverLoaded, lastHeld int
	runSeeds(t, Reconfig, seq(1, n), func(r Result) {
		p := r.Plan
		if p.Change == nil {
			t.Fatalf("seed %d: a reconfig plan without a change", p.Seed)
		}
		if r.Outcome == Fail {
			t.Errorf("seed %d failed: %v", p.Seed, r.Violations)
		}
		h := strings.Join(r.History, "\n")
		if strings.Contains(h, ", epoch 5") {
			lastHeld++ // a lease granted on the last configuration: its record accepted
		}
		if !strings.Contains(h, "change: epoch 5 published") {
			t.Errorf("seed %d: the change did not reach epoch 5:\n%s", p.Seed, p)
		}
		for c := range p.Clients {
			loaded := strings.Contains(h, fmt.Sprintf("c%d loads epoch", c))
			if c == p.Change.Never {
				never++
				if loaded {
					neverLoaded++
				}
				continue
			}
			if !strings.Contains(h, fmt.Sprintf("c%d loads epoch 5", c)) {
				t.Errorf("seed %d: c%d, told, never loaded epoch 5", p.Seed, c)
			}
		}
	})
	if uint64(lastHeld) < n*3/4 {
		t.Errorf("a lease on the last configuration in %d of %d schedules, want at least %d: its clients' records are refused", lastHeld, n, n*3/4)
	}
	if never == 0 || neverLoaded == 0 {
		t.Errorf("%d schedules with a client never told, %d of them saw it load a configuration after a refusal", never, neverLoaded)
	}
	t.Logf("%d schedules, %d with a lease on the last configuration; %d with a client never told, which loaded a later configuration after a refusal in %d", n, lastHeld, never, neverLoaded)
}
