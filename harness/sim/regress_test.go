package sim

import (
	"testing"
)

// fencingBugSeeds reproduced the fencing bug the simulator found
// (docs/simulation.md, "Found"): with WithRestartQuarantine and WithFencing,
// a master that restarts without its keys also loses its fencing counters,
// and once its quarantine is over a later quorum that meets the last
// write-back quorum only in that master read a lower maximum: a token
// repeated or went back. Fixed by the fencing epoch (a token computed from
// fewer than a quorum of existing counters starts from the clock).
var fencingBugSeeds = []struct {
	seed uint64
	fam  Family
}{
	{73, Restarts}, {83, Restarts}, {140, Restarts},
}

// TestRegressions replays the seeds of bugs the simulator found; each must
// now pass, with fencing violations after a counter loss counted as
// failures. TestKnobsAreCaught (NoFenceEpoch) shows the same family fails
// without the fix.
func TestRegressions(t *testing.T) {
	for _, c := range fencingBugSeeds {
		if r := runOne(t, c.seed, c.fam); r.Outcome == Fail || len(r.Known) > 0 {
			t.Errorf("seed %d (%s): %v %v\nreplay: %s", c.seed, c.fam, r.Violations, r.Known, replayCmd(c.seed, c.fam, "none"))
		}
	}
}
