package sim

import (
	"cmp"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
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
	// base is switched on in both runs: the behaviour the model's trail
	// was found with (queue.pml without GRANT: NoGrant, the release only
	// names the waiter).
	base string
	// on makes the script use the mechanism (an unsafe condition).
	on func(*Script)
	// property is the history invariant the off run must break (the
	// model's property of the same name).
	property string
	// judged, when set, is the invariant the replay breaks instead, when
	// the history judges the model's property by another (the model's
	// kept-out of a waiter behind a holder's stale entry is, on the real
	// code, a call not granted within a second of the lock being free).
	judged string
	// timing, when set, changes both runs' timing where the trail leaves
	// the code a choice the model's abstraction does not have (a reply
	// the real round gets after it was decided).
	timing func(*Script)
	// onShows: lines the run with the mechanism on must log (its history),
	// each a substring of one line: how the mechanism stopped the
	// violation, so that a replay that passes for another reason fails.
	onShows []string
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
	// The holder's lease expires without Unlock; with the keys written for
	// the TTL alone a second client is granted the lock when they expire,
	// before the lock delay has run (history.LockDelay).
	{trail: "NoLockDelay", knob: "NoLockDelay", property: "lock-delay"},
	{trail: "NoRunStamp", knob: "NoRunStamp", property: "token-order"},
	{trail: "WallUptime", knob: "WallUptime", property: "mutual-exclusion"},
	// The waiting line (queue.pml): waiting Lock calls in the masters'
	// line, judged by history.KeptOut and history.Granted. These trails
	// come from the model without the hand-over (no -DGRANT), so both runs
	// switch it off (NoGrant: a release only names the waiter).
	{trail: "NoLeaveTombstone", knob: "NoLeaveTombstone", base: "NoGrant", property: "kept-out"},
	{trail: "NoFairRequeue", knob: "NoFairRequeue", base: "NoGrant", property: "kept-out"},
	{trail: "NoFreshLook", knob: "NoFreshLook", base: "NoGrant", property: "granted"},
	// The hand-over (queue.pml -DGRANT): a release hands the key to the
	// line's first waiter. A key handed to a call that then ended is
	// found at the trail's checkpoint (history.GrantReleased): left by
	// the waiter's LeaveQueue after its grant elsewhere, or handed to a
	// plain call's ID that a late copy of its first attempt put back in
	// m1's line.
	{trail: "NoGrantLeaveRelease", knob: "NoGrantLeaveRelease", property: "grant-released"},
	{trail: "GrantPlainNoRequeue", knob: "NoPlainRequeue", property: "grant-released"},
	// The hold on grants (queue.pml -DGRANT_HOLD): a call holds with the
	// keys releases handed it. Leaving the lines it counted releases its
	// own keys (two holders); a release of a handed value that leaves its
	// waiter first in line keeps the next waiter from the free key (the
	// model's kept-out; here the waiter is not granted within a second of
	// the key being free). Not replayed: GrantHoldUnanswered (the code's
	// late refusal reply reaches the client before the hand-over's
	// notification, so it holds on time: the simulator's stragglers find
	// it, TestKnobsAreCaught) and NoGrantCurrentValue (a woken call
	// attempts at once, the trail's attempt comes later).
	//
	// In GrantHoldLeaveAll's trail c1's round closes with m2's yes (the
	// model's round waits for every reply); the code's round is decided by
	// m0's and m1's refusals first, and m2's yes comes late. The code counts
	// a late yes as free (redlock's TestALateYesCountsAsFree), so m0's
	// hand-over alone would wake c1, which attempts at once and takes the
	// lock by its round, where the trail's woken call attempts later and
	// holds with m0's and m1's hand-overs: the replay delivers m2's late
	// yes after m1's hand-over.
	{trail: "GrantHoldLeaveAll", knob: "GrantHoldLeaveAll", property: "mutual-exclusion", timing: func(s *Script) {
		for i, c := range s.Calls {
			if c.Client == 1 && c.Master == 2 && c.Kind == CallAcquire && c.Attempt == 1 {
				s.Calls[i].ReplyAt = 7 * time.Millisecond
			}
		}
	}},
	{trail: "NoGrantHoldRelease", knob: "NoGrantHoldRelease", property: "kept-out", judged: "granted"},
	// Changing the masters (reconfig.pml): a client of epoch 1 counts a
	// quorum of {0,1,2} after the masters moved to epoch 3's {0,1,3}; with
	// the record check its calls are refused as stale.
	{trail: "reconfig-nocheck", knob: "NoConfigCheck", property: "mutual-exclusion", onShows: []string{
		"c1: lock failed: redlock: lock not obtained \"lock-0\": 0 of 3 nodes, quorum 2; configuration not current: m0", // epoch 1 refused as stale
		"m1 (memnode m1: acquire.lua: QLCONFIG behind 2 ", "m3 (memnode m3: acquire.lua: QLCONFIG none)",                // epoch 3 refused by masters not at 3
	}},
	// A master back with an older record (reconfig.pml -DROLLBACKS=1): the
	// run stamp makes it count as none; trusted, client 1 at epoch 1 gets
	// a quorum after epoch 2 committed, and client 0 at epoch 3 another.
	{trail: "reconfig-norun", knob: "NoConfigRun", property: "mutual-exclusion", onShows: []string{
		"m0 (memnode m0: acquire.lua: QLCONFIG none)", // the rolled-back record counts as none
	}},
	// Fencing across the change (reconfig.pml -DFENCING -DPRIOR_FENCE):
	// counters left on masters 0 and 3 before the records (token 1)
	// read as present at epoch 3 without the epoch stamp: client 1's
	// token comes from them, below client 0's (the model's tokens, the
	// history's token-order).
	{trail: "reconfig-nostamp", knob: "NoConfigStamp", property: "tokens", judged: "token-order"},
	// Joint mode (reconfig.pml -DPLAN_JOINT): a joint round needs a quorum
	// of each set. Counting the new set alone (JOINT_ONE_SET), client 1 at
	// the joint epoch takes {1,3} of {0,1,3} while client 0 holds {0,2} of
	// epoch 1's {0,1,2}; counting the old set alone (JOINT_OLD_SET, the
	// replay names the old set first), client 0 at the joint epoch takes
	// {1,2} of {0,1,2} after the step out of joint mode committed, while
	// client 1 holds {0,3} of {0,1,3}. With both sets counted each joint
	// round fails.
	{trail: "reconfig-joint-one-set", knob: "JointOneSet", property: "mutual-exclusion", onShows: []string{
		// m0 and m2 behind: 1 of the old set {0,1,2} can say yes (m3 had
		// not answered; the nodes are numbered as the client lists them,
		// the new set first: m0 m1 m3 m2)
		"c1: lock failed: redlock: lock not obtained \"lock-0\": 1 of 4 nodes, quorum 2 of nodes 0,1,2 and 2 of nodes 0,1,3; failed: m0",
	}},
	{trail: "reconfig-joint-old-set", knob: "JointOneSet", property: "mutual-exclusion", onShows: []string{
		"c0: lock failed: redlock: lock not obtained \"lock-0\": 2 of 4 nodes, quorum 2 of nodes 0,1,2 and 2 of nodes 0,1,3",
	}},
	{trail: "unsafe-restart", on: func(s *Script) { s.Quar = true }, property: "mutual-exclusion"},
	{trail: "unsafe-jump", on: func(s *Script) { s.Fencing = true }, property: "fresh-writes"},
	{trail: "unsafe-pause", on: func(s *Script) { s.Fencing = true }, property: "fresh-writes"},
}

// readModelTrail translates testdata/model/name.trail.
func readModelTrail(t *testing.T, name string) (Script, Trail) {
	t.Helper()
	return readTrail(t, filepath.Join("testdata", "model", name+".trail"))
}

// readTrail translates the trail in the file at path.
func readTrail(t *testing.T, path string) (Script, Trail) {
	t.Helper()
	f, err := os.Open(path)
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
// mechanism switched off, and pass with it on. Two more are replayed
// apart: NoExtendCheck (a mechanism without a knob: with it on only) and
// jump-fencing-3 (a hole under a documented unsafe condition: the real
// code must show it too).
func TestModelCounterexamples(t *testing.T) {
	for _, mc := range modelCases {
		t.Run(mc.trail, func(t *testing.T) {
			s, tr := readModelTrail(t, mc.trail)
			if tr.Violation != mc.property {
				t.Fatalf("the trail breaks %q, the case expects %q", tr.Violation, mc.property)
			}
			if mc.timing != nil {
				mc.timing(&s)
			}
			defer setKnob(t, mc.base)()
			off := func() Result {
				defer setKnob(t, mc.knob)()
				return runScript(t, s)
			}()
			judged := cmp.Or(mc.judged, mc.property)
			if len(broke(off, judged)) == 0 {
				t.Errorf("with %s off the replay does not break %s: %v, violations %v, unsafe %v\n%s\nhistory:\n%s",
					mechanism(mc.knob), judged, off.Outcome, off.Violations, off.Unsafe, s, strings.Join(off.History, "\n"))
			}
			if mc.on != nil {
				mc.on(&s)
			}
			on := runScript(t, s)
			if on.Outcome == Fail || len(broke(on, judged)) > 0 {
				t.Errorf("with %s on the replay fails: %v, violations %v, unsafe %v\n%s\nhistory:\n%s",
					mechanism(mc.knob), on.Outcome, on.Violations, on.Unsafe, s, strings.Join(on.History, "\n"))
			}
			for _, want := range mc.onShows {
				if !slices.ContainsFunc(on.History, func(h string) bool { return strings.Contains(h, want) }) {
					t.Errorf("with %s on the replay's history has no line with %q:\n%s", mechanism(mc.knob), want, strings.Join(on.History, "\n"))
				}
			}
			t.Logf("%s: off: %v (%s); on: %v, %d leases%s", mc.trail, off.Outcome, firstOr(broke(off, judged)), on.Outcome, on.Holds, withBase(mc.base))
		})
	}

	// NoExtendCheck: the mechanism (Extend refuses once the lease's Until
	// has passed) has no knob, so the replay runs with it on only: the
	// late extend must be refused.
	t.Run("NoExtendCheck", func(t *testing.T) {
		s, tr := readModelTrail(t, "NoExtendCheck")
		if tr.Violation != "extend-after-end" {
			t.Fatalf("the trail breaks %q, want extend-after-end", tr.Violation)
		}
		r := runScript(t, s)
		extends := 0
		for _, h := range r.History {
			if strings.Contains(h, " extended ") {
				extends++
				if strings.HasSuffix(h, ": <nil>") {
					t.Errorf("the lease was extended after its validity ended: %s", h)
				}
			}
		}
		if extends == 0 || r.Outcome == Fail {
			t.Errorf("replay: %d extends, %v, violations %v\n%s\nhistory:\n%s",
				extends, r.Outcome, r.Violations, s, strings.Join(r.History, "\n"))
		}
		t.Logf("NoExtendCheck: %v, %d extends, none granted after the lease ended", r.Outcome, extends)
	})

	// The changes that break the step rules (reconfig.pml): a swap of
	// the lists without records (SWAP), the swap as one step with records
	// (PLAN_SWAP: the quorums of the two sets need not meet) and the
	// second step installed without the wait (NO_WAIT). The rules are the
	// changer's (reconfig.Plan and the masters' reconfig.lua, tested on
	// real servers); what the masters' check alone does not stop, the real
	// coordinator does not either: each replay gives two holders.
	for _, name := range []string{"reconfig-swap", "reconfig-swap-step", "reconfig-nowait"} {
		t.Run(name, func(t *testing.T) {
			s, tr := readModelTrail(t, name)
			if tr.Violation != "mutual-exclusion" {
				t.Fatalf("the trail breaks %q, want mutual-exclusion", tr.Violation)
			}
			r := runScript(t, s)
			if len(broke(r, "mutual-exclusion")) == 0 {
				t.Errorf("replay: want two holders: %v, violations %v\n%s\nhistory:\n%s", r.Outcome, r.Violations, s, strings.Join(r.History, "\n"))
			}
			t.Logf("%s: %v (%s)", name, r.Outcome, firstOr(broke(r, "mutual-exclusion")))
		})
	}

	// jump-fencing-3 is what the model found under a documented unsafe
	// condition with every mechanism on (fencing included): a forward
	// clock jump on one master lets two leases get the same fencing token
	// (the model's unique-tokens). The real coordinator does the same:
	// the replay breaks token-order, and the verdict puts it down to the
	// clock jump (a classified schedule), not to a bug.
	t.Run("jump-fencing-3", func(t *testing.T) {
		s, tr := readModelTrail(t, "jump-fencing-3")
		if tr.Violation != "unique-tokens" {
			t.Fatalf("the trail breaks %q, want unique-tokens", tr.Violation)
		}
		if !s.Fencing {
			t.Fatal("the script does not use fencing")
		}
		r := runScript(t, s)
		if r.Outcome != Classified || len(broke(r, "token-order")) == 0 {
			t.Errorf("replay: want a repeated token, classified under the clock jump: %v, broken %v, violations %v, unsafe %v\n%s\nhistory:\n%s",
				r.Outcome, r.Broken, r.Violations, r.Unsafe, s, strings.Join(r.History, "\n"))
		}
		t.Logf("jump-fencing-3: %v (%s), broken %v", r.Outcome, firstOr(broke(r, "token-order")), r.Broken)
	})
}

// TestParseTrailHostFaults checks how ParseTrail translates the prior
// counter and the restarts of issue 32 (the fsync steps no replayed trail
// has): a restart with an older state is a CrashAOFTail down for no time,
// its clock stepped, whose checkpoint is its master's last fsync, else its
// last restart, else the start; a restart with a clock step a
// BootClockStep; and the combinations the replay cannot give are refused.
func TestParseTrailHostFaults(t *testing.T) {
	const head = "# model/check.sh host: spin -t -p -DFENCING -DPRIOR -DQUAR -DRESTARTS=4 -DRESTART_STALE -DRESTART_EMPTY redlock.pml\n" +
		"EV start N=3 C=2 A=1 TTL=4 DRIFT=1\n"
	s, tr, err := ParseTrail(strings.NewReader(head + `EV prior tok=1
EV fsync m=1 fence=1
EV restart m=0 keep=0 stale=1 fence=1
EV tick
EV fsync m=0 fence=1
EV restart m=1 keep=0
EV tick
EV restart m=1 keep=0 stale=1 fence=0
EV restart m=0 keep=0 stale=1 fence=1
EV restart m=2 keep=0 step=1
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Prior != 1 || tr.Prior != 1 {
		t.Errorf("prior: script %d, trail %d, want 1", s.Prior, tr.Prior)
	}
	at := func(kind string, m int) time.Duration {
		for _, e := range tr.Events {
			if e.Kind == kind && e.Args["m"] == m {
				return e.At
			}
		}
		t.Fatalf("no %s of m%d", kind, m)
		return 0
	}
	type want struct {
		kind       FaultKind
		m          int
		checkpoint time.Duration // CrashAOFTail: At-Delay
	}
	wants := []want{
		{CrashAOFTail, 0, 0},
		{RestartEmpty, 1, 0},
		{CrashAOFTail, 1, at("restart", 1)}, // m1's empty restart, not its fsync before
		{CrashAOFTail, 0, at("fsync", 0)},
		{BootClockStep, 2, 0},
	}
	if len(s.Faults) != len(wants) {
		t.Fatalf("faults %v, want %d", s.Faults, len(wants))
	}
	for k, w := range wants {
		f := s.Faults[k]
		if f.Kind != w.kind || f.Master != w.m || f.Dur != 0 {
			t.Errorf("fault %d: %v, want %v on m%d", k, f, w.kind, w.m)
			continue
		}
		switch f.Kind {
		case CrashAOFTail:
			if f.At-f.Delay != w.checkpoint || f.Jump != modelBootStep {
				t.Errorf("fault %d: %v: checkpoint at %v, step %v; want %v, %v", k, f, f.At-f.Delay, f.Jump, w.checkpoint, modelBootStep)
			}
		case BootClockStep:
			if f.Jump != modelBootStep {
				t.Errorf("fault %d: %v: step %v, want %v", k, f, f.Jump, modelBootStep)
			}
		}
	}

	for _, bad := range []string{
		strings.Replace(head, "-DRESTART_EMPTY", "-DWALL_UPTIME", 1),
		strings.Replace(head, "-DRESTART_EMPTY", "-DFAST", 1) + "EV fast m=0 d=1\n",
	} {
		if _, _, err := ParseTrail(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "cannot be replayed") {
			t.Errorf("trail %q: err %v, want it refused", bad, err)
		}
	}
}

func mechanism(knob string) string {
	if knob == "" {
		return "the mechanism (an option)"
	}
	return "the mechanism (knob " + knob + ")"
}

// withBase names the knobs switched on in both runs, if any.
func withBase(base string) string {
	if base == "" {
		return ""
	}
	return " (both with " + base + ")"
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
//	go test ./sim -run 'TestReplayTrail$' -v -args -trail testdata/model/NoDrift.trail -trail-knob NoDrift
func TestReplayTrail(t *testing.T) {
	if *flagTrail == "" {
		t.Skip("replay needs -args -trail FILE [-trail-knob K]")
	}
	s, tr := readTrail(t, *flagTrail)
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
