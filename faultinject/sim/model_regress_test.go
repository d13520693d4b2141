package sim

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
)

// modelCases are the model's counterexamples (model/check.sh writes them
// to testdata/model with -update), each replayed on the real coordinator:
// with its mechanism switched off (off) the schedule must break the
// property the model found broken, and with the mechanism on it must not,
// nor fail otherwise (docs/verification.md, "Counterexamples").
//
// For a knob, off switches it on (internal/knobs). For a documented unsafe
// condition the mechanism is an option the trail's configuration did not
// use (on sets it): the quarantine against a restart without persistence,
// fencing against a clock jump or a client pause.
var modelCases = []struct {
	trail string
	// knob is switched on for the off run ("" for an unsafe condition).
	knob string
	// on makes the script use the mechanism (an unsafe condition).
	on func(*Script)
	// property is the history invariant the off run must break (the
	// model's property of the same name).
	property string
}{
	{trail: "NoQuarantine", knob: "NoQuarantine", property: "mutual-exclusion"},
	{trail: "NoVoteIdentity", knob: "NoVoteIdentity", property: "mutual-exclusion"},
	{trail: "NoDrift", knob: "NoDrift", property: "mutual-exclusion"},
	{trail: "NoReleaseGuard", knob: "NoReleaseGuard", property: "release-guard"},
	{trail: "NoFenceEpoch", knob: "NoFenceEpoch", property: "token-order"},
	// The model breaks the write-back alone with client clocks a tick
	// apart; the simulator's clients share one clock, on which the epoch
	// alone keeps tokens monotonic, so the replay switches both off (as
	// TestKnobsAreCaught does).
	{trail: "NoFenceWriteBack", knob: "NoFenceWriteBack+NoFenceEpoch", property: "token-order"},
	{trail: "DialTimeoutNotSent", knob: "DialTimeoutNotSent", property: "no-orphans"},
	{trail: "NoShapeQuorum", knob: "NoShapeQuorum", property: "semaphore-bound"},
	{trail: "unsafe-restart", on: func(s *Script) { s.Quar = true }, property: "mutual-exclusion"},
	{trail: "unsafe-jump", on: func(s *Script) { s.Fencing = true }, property: "fresh-writes"},
	{trail: "unsafe-pause", on: func(s *Script) { s.Fencing = true }, property: "fresh-writes"},
}

// readModelTrail translates testdata/model/name.trail.
func readModelTrail(t *testing.T, name string) (Script, Trail) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "model", name+".trail"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, tr, err := ParseTrail(f)
	if err != nil {
		t.Fatal(err)
	}
	return s, tr
}

// runScript runs s in its own bubble.
func runScript(t *testing.T, s Script) Result {
	var r Result
	synctest.Test(t, func(*testing.T) { r = RunScript(s) })
	return r
}

// broke returns the violations of r (judged, or seen in a classified
// schedule) that name property. A stale write after a holder's stall is
// fresh-writes' violation that the verdict turns into the broken no-pause
// assumption (Result.Broken).
func broke(r Result, property string) []string {
	var out []string
	for _, v := range slices.Concat(r.Violations, r.Unsafe, r.Known) {
		if strings.Contains(v, " "+property+": ") {
			out = append(out, v)
		}
	}
	if property == "fresh-writes" {
		for _, b := range r.Broken {
			if strings.Contains(b, "paused past its validity before a write") {
				out = append(out, b)
			}
		}
	}
	return out
}

// TestModelCounterexamples replays each of the model's counterexamples on
// the real coordinator: it must break the model's property with the
// mechanism switched off, and pass with it on.
func TestModelCounterexamples(t *testing.T) {
	for _, mc := range modelCases {
		t.Run(mc.trail, func(t *testing.T) {
			s, tr := readModelTrail(t, mc.trail)
			if tr.Violation != mc.property {
				t.Fatalf("the trail breaks %q, the case expects %q", tr.Violation, mc.property)
			}
			off := func() Result {
				defer setKnob(t, mc.knob)()
				return runScript(t, s)
			}()
			if len(broke(off, mc.property)) == 0 {
				t.Errorf("with %s off the replay does not break %s: %v, violations %v, unsafe %v\n%s\nhistory:\n%s",
					mechanism(mc.knob), mc.property, off.Outcome, off.Violations, off.Unsafe, s, strings.Join(off.History, "\n"))
			}
			if mc.on != nil {
				mc.on(&s)
			}
			on := runScript(t, s)
			if on.Outcome == Fail || len(broke(on, mc.property)) > 0 {
				t.Errorf("with %s on the replay fails: %v, violations %v, unsafe %v\n%s\nhistory:\n%s",
					mechanism(mc.knob), on.Outcome, on.Violations, on.Unsafe, s, strings.Join(on.History, "\n"))
			}
			t.Logf("%s: off: %v (%s); on: %v, %d leases", mc.trail, off.Outcome, firstOr(broke(off, mc.property)), on.Outcome, on.Holds)
		})
	}
}

func mechanism(knob string) string {
	if knob == "" {
		return "the mechanism (an option)"
	}
	return "the mechanism (knob " + knob + ")"
}

func firstOr(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	return vs[0]
}

var (
	flagTrail     = flag.String("trail", "", "TestReplayTrail: a model counterexample (spin -t -p output, or model/check.sh -update's file)")
	flagTrailKnob = flag.String("trail-knob", "none", "TestReplayTrail: the mechanism switched off while it replays")
)

// TestReplayTrail translates one model trail (flag -trail) into a script,
// prints it, runs it with -trail-knob switched off and prints its history
// and verdict:
//
//	go test ./sim -run 'TestReplayTrail$' -v -args -trail sim/testdata/model/NoDrift.trail -trail-knob NoDrift
func TestReplayTrail(t *testing.T) {
	if *flagTrail == "" {
		t.Skip("replay needs -args -trail FILE [-trail-knob K]")
	}
	f, err := os.Open(*flagTrail)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, tr, err := ParseTrail(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tr.Events {
		t.Logf("%12v %s", e.At, e.Line)
	}
	t.Log(s)
	defer setKnob(t, *flagTrailKnob)()
	r := runScript(t, s)
	for _, h := range r.History {
		t.Log(h)
	}
	t.Logf("verdict: %v, %d leases in %d attempts\nbroken: %v\nviolations: %v\nunsafe (classified): %v",
		r.Outcome, r.Holds, r.Attempts, r.Broken, r.Violations, r.Unsafe)
}
