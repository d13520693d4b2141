package sim

import (
	"fmt"
	"strings"
	"testing"
)

// TestReconfigFamilyChanges: the reconfig family's schedules do what the
// family is for. Every change reaches its last configuration (epoch 5 for
// two adds and two removes; epoch 3 through joint mode) within the
// workload, every told client loads it, and a client never told loads a
// later configuration when a master refuses its own as stale
// (redlock.ErrConfigStale), in the schedules that have one; in most
// schedules a lease is granted on the last configuration (its clients'
// records accepted), and in at least half of those through joint mode on
// the joint configuration. The knob cases (NoConfigCheck, NoReconfigWait,
// JointOneSet in TestKnobsAreCaught) show the family finds two holders
// without the check, the wait, or a quorum of each set.
func TestReconfigFamilyChanges(t *testing.T) {
	n := uint64(40)
	if testing.Short() || raceEnabled {
		n = 12 // about half with a client never told
	}
	var never, neverLoaded, lastHeld, joint, jointHeld int
	runSeeds(t, Reconfig, seq(1, n), func(r Result) {
		p := r.Plan
		if p.Change == nil {
			t.Fatalf("seed %d: a reconfig plan without a change", p.Seed)
		}
		if r.Outcome == Fail {
			t.Errorf("seed %d failed: %v", p.Seed, r.Violations)
		}
		h := strings.Join(r.History, "\n")
		last := 5 // four single steps
		if p.Change.Joint {
			last = 3 // into joint mode and out
			joint++
			if strings.Contains(h, ", epoch 2") {
				jointHeld++ // a lease granted on the joint configuration
			}
		}
		if strings.Contains(h, fmt.Sprintf(", epoch %d", last)) {
			lastHeld++ // a lease granted on the last configuration: its record accepted
		}
		if !strings.Contains(h, fmt.Sprintf("change: epoch %d published", last)) {
			t.Errorf("seed %d: the change did not reach epoch %d:\n%s", p.Seed, last, p)
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
			if !strings.Contains(h, fmt.Sprintf("c%d loads epoch %d", c, last)) {
				t.Errorf("seed %d: c%d, told, never loaded epoch %d", p.Seed, c, last)
			}
		}
	})
	if uint64(lastHeld) < n*3/4 {
		t.Errorf("a lease on the last configuration in %d of %d schedules, want at least %d: its clients' records are refused", lastHeld, n, n*3/4)
	}
	if never == 0 || neverLoaded == 0 {
		t.Errorf("%d schedules with a client never told, %d of them saw it load a configuration after a refusal", never, neverLoaded)
	}
	if joint == 0 || jointHeld < joint/2 {
		t.Errorf("%d schedules through joint mode, %d with a lease on the joint configuration: want some, half of them with one", joint, jointHeld)
	}
	t.Logf("%d schedules, %d with a lease on the last configuration; %d with a client never told, which loaded a later configuration after a refusal in %d; %d through joint mode, %d with a lease on the joint configuration", n, lastHeld, never, neverLoaded, joint, jointHeld)
}
