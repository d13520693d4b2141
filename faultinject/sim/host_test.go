package sim

import (
	"slices"
	"testing"
	"time"
)

// TestHostFaultDraw: the host faults (issue 32) come from a stream of
// their own and change nothing else in a plan: stripped of them (a
// BootClockStep back to the RestartEmpty it replaced, the quarantine as
// drawn), a plan is the plan of its seed's main stream (drawPlan, with the
// fair draw). About one schedule in hostOneIn of fences, restarts and late
// gets them, no schedule of another family. A power cut's last fsync comes
// less than a second before it, not before the workload, and early enough
// that the keys it brings back expire before the workload's end; a clock
// step at boot is far above every quarantine (the TTL).
func TestHostFaultDraw(t *testing.T) {
	const n = 2000
	with := map[Family]int{}
	for seed := uint64(1); seed <= n; seed++ {
		for _, fam := range Families {
			p := NewPlan(seed, fam)
			base := drawPlan(seed, fam)
			base.Fair, base.LockRetry, base.Change = p.Fair, p.LockRetry, p.Change // drawn from streams of their own
			stripped := p
			stripped.Faults = nil
			host := false
			for _, f := range p.Faults {
				switch f.Kind {
				case CrashAOFTail:
					host = true
					if !p.Quar {
						t.Fatalf("seed %d (%s): a power cut without the quarantine", seed, fam)
					}
					if f.Delay <= 0 || f.Delay >= time.Second || f.At-f.Delay < 0 || f.At-f.Delay+p.TTL+2*p.Delay > p.Duration {
						t.Fatalf("seed %d (%s): %v: last fsync out of bounds (ttl %v, lock delay %v, duration %v)", seed, fam, f, p.TTL, p.Delay, p.Duration)
					}
					continue
				case BootClockStep:
					host = true
					if f.Jump < 30*time.Second || f.Jump < 10*p.TTL {
						t.Fatalf("seed %d (%s): %v: a clock step within reach of the quarantine", seed, fam, f)
					}
					f.Kind, f.Jump = RestartEmpty, 0
				}
				stripped.Faults = append(stripped.Faults, f)
			}
			if !host {
				if p.String() != base.String() {
					t.Fatalf("seed %d (%s): a plan without host faults differs from its main stream's:\n%s\n%s", seed, fam, p, base)
				}
				continue
			}
			with[fam]++
			if !slices.Contains([]Family{Fences, Restarts, Late}, fam) {
				t.Fatalf("seed %d (%s): host faults outside their families: %s", seed, fam, p)
			}
			stripped.Quar = base.Quar
			if stripped.String() != base.String() {
				t.Fatalf("seed %d (%s): stripped of its host faults, the plan differs from its main stream's:\n%s\n%s", seed, fam, stripped, base)
			}
		}
	}
	for _, fam := range []Family{Fences, Restarts, Late} {
		// Late: only plans whose restarts were drawn as steps (every late
		// plan has some).
		if got := with[fam]; got < n/hostOneIn*3/4 || got > n/hostOneIn*5/4 {
			t.Errorf("%s: %d plans of %d with host faults, want about %d", fam, got, n, n/hostOneIn)
		}
	}
}
