package history

import (
	"testing"
	"time"
)

// violating is, for every invariant, a hand-built history that breaks it
// and (as far as the invariant allows) nothing else.
var violating = map[*Invariant][]Event{
	// Client 1 acquires at 300ms inside client 0's lease [0, 500ms).
	&MutualExclusion: concat(lease(0, "a", 0, 990*ms, -1, 500*ms), lease(1, "b", 300*ms, 1290*ms, -1, 320*ms)),
	// Three places of a K=2 semaphore at 20ms.
	&SemaphoreBound: {
		{Client: 0, Kind: Acquired, At: 0, Until: time.Second, Token: "a", Limit: 2, Holds: 1},
		{Client: 1, Kind: Acquired, At: 10 * ms, Until: time.Second, Token: "b", Limit: 2, Holds: 1},
		{Client: 2, Kind: Acquired, At: 20 * ms, Until: time.Second, Token: "c", Limit: 2, Holds: 1},
	},
	// Valid for 100ms more, on 1 master of a quorum of 2.
	&QuorumCoverage: concat(lease(0, "a", 0, 500*ms, -1, 410*ms),
		[]Event{{Client: 0, Kind: Covered, At: 400 * ms, Lock: "l", Token: "a", Until: 500 * ms, Copies: 1, Quorum: 2}}),
	// An acquire applied 10ms after its release, guard 400ms.
	&ReleaseGuard: {{Client: 0, Kind: Overtaken, At: 110 * ms, Lock: "l", Token: "a", Node: 1, Released: 100 * ms, Guard: 400 * ms}},
	// Client 0's lease (lock delay 400ms) ends at 500ms without Unlock;
	// client 1 is granted the lock at 800ms, before 900ms.
	&LockDelay: concat(delayed(0, "a", 0, 500*ms, 400*ms, -1), lease(1, "b", 800*ms, 1300*ms, -1, 850*ms)),
	// The second lease's token is below the first's; neither writes.
	&TokenOrder: {
		{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a", Fence: 5, Holds: 1},
		{Client: 0, Kind: Unlock, At: 50 * ms, Token: "a"},
		{Client: 1, Kind: Acquired, At: 200 * ms, Until: 300 * ms, Token: "b", Fence: 5, Holds: 1},
		{Client: 1, Kind: Unlock, At: 250 * ms, Token: "b"},
	},
	// The older lease (token 2) writes after the newer one (token 3): the
	// resource takes it, as if the tokens were the other way round.
	&FencedWriteOrder: concat(fenced(0, "a", 0, 1000*ms, 500*ms, 2, true), fenced(1, "b", 600*ms, 1600*ms, 400*ms, 3, true)),
	// The resource's own record keeps the older lease's write (token 2)
	// after the newer lease's (token 3).
	&StoredWriteOrder: {
		{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a", Fence: 2, Holds: 1},
		{Client: 0, Kind: Unlock, At: 50 * ms, Token: "a"},
		{Client: 1, Kind: Acquired, At: 200 * ms, Until: 300 * ms, Token: "b", Fence: 3, Holds: 1},
		{Client: 1, Kind: Unlock, At: 250 * ms, Token: "b"},
		{Kind: Stored, Token: "b", Fence: 3, Seq: 1},
		{Kind: Stored, Token: "a", Fence: 2, Seq: 2},
	},
	// The newer lease's token is below the older's: its write is refused.
	&NewerWriteAccepted: concat(fenced(0, "a", 0, 100*ms, 50*ms, 3, true), fenced(1, "b", 200*ms, 300*ms, 250*ms, 2, false)),
	// A write 300ms after the validity ended.
	&FreshWrites:  lease(0, "a", 0, 990*ms, 1290*ms, 1291*ms),
	&LeasedWrites: {{Client: 2, Kind: WriteAccepted, At: time.Second, Token: "nobody"}},
	// A mutex lease that reports two holds.
	&HoldsBound: {{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a", Holds: 2}},
	&DoReleases: concat(lease(0, "a", 0, 100*ms, -1, 50*ms),
		[]Event{{Client: 0, Kind: DoReturned, At: 60 * ms, Token: "a", Valid: true, Until: 100 * ms}}),
	&NoOrphans:  {{Kind: Leftover, At: time.Second, Lock: "l", Token: "a", Node: 2, Note: "key l"}},
	&KeysExpire: {{Kind: Outlived, At: 2 * time.Second, Lock: "l", Token: "a", Node: 2, Note: "key l"}},
	// Client 1's call, which sent "v" at 10ms, gave up at 50ms; m0 still
	// holds "v" at the checkpoint at 100ms.
	&GrantReleased: {
		{Client: 1, Kind: GaveUp, At: 50 * ms, Lock: "l"},
		{Client: 1, Kind: Held, At: 100 * ms, Lock: "l", Token: "v", Node: 0, Sent: 10 * ms},
	},
	// m0 refuses waiter w2 the free key behind w1, whose LeaveQueue had
	// applied there.
	&KeptOut: {
		{Client: 1, Kind: Left, At: 10 * ms, Lock: "l", Token: "w1", Node: 0},
		{Client: 1, Kind: Refused, At: 20 * ms, Lock: "l", Token: "w2", Node: 0, Line: []string{"w1", "w2"}},
	},
	// A Lock call waits from 0 on a lock free from 100ms to its giving up
	// at 2s; its bound is 1s.
	&Granted: concat(lease(0, "a", 0, 990*ms, -1, 100*ms), []Event{
		{Client: 1, Kind: Waiting, At: 0, Lock: "", Within: time.Second},
		{Client: 1, Kind: GaveUp, At: 2 * time.Second}}),
}

// implied is what a violating history cannot avoid breaking too: a fenced
// resource refuses the newest lease's write only if its token is below an
// older lease's.
var implied = map[*Invariant]*Invariant{&NewerWriteAccepted: &TokenOrder}

// TestEachInvariantCatchesItsViolation: every invariant of the table has a
// violating history, and Check reports that invariant on it, and no other
// (but what it implies).
func TestEachInvariantCatchesItsViolation(t *testing.T) {
	for _, inv := range Invariants {
		ev, ok := violating[inv]
		if !ok {
			t.Errorf("%s: no violating history in the test table", inv.Name)
			continue
		}
		f := Check(ev)
		if len(f.Of(inv)) == 0 {
			t.Errorf("%s: not caught:\n%s", inv.Name, whats(f.Violations))
		}
		for _, v := range f.Violations {
			if v.Invariant != inv && v.Invariant != implied[inv] {
				t.Errorf("%s: Check also reported %v", inv.Name, v)
			}
			if v.What == "" || v.String() != v.Invariant.Name+": "+v.What {
				t.Errorf("%s: violation %+v", inv.Name, v)
			}
		}
	}
	if len(violating) != len(Invariants) {
		t.Errorf("%d violating histories for %d invariants", len(violating), len(Invariants))
	}
}

// TestInvariantTable: names are unique and every invariant has a class
// and a description.
func TestInvariantTable(t *testing.T) {
	seen := map[string]bool{}
	for _, inv := range Invariants {
		if seen[inv.Name] || inv.Name == "" || inv.About == "" || inv.Class < Exclusion || inv.Class > Progress || inv.judge == nil {
			t.Errorf("invariant %+v: duplicate or incomplete", *inv)
		}
		seen[inv.Name] = true
		if inv.Class.String() == "?" {
			t.Errorf("%s: class without a name", inv.Name)
		}
	}
}

func TestCheckCleanHistories(t *testing.T) {
	cases := map[string][]Event{
		"empty": nil,
		"one client": concat(
			lease(0, "a1", 0, 990*ms, 5*ms, 10*ms),
			lease(0, "a2", 20*ms, 1010*ms, 25*ms, 30*ms),
		),
		"handover at unlock": concat(
			lease(0, "a", 0, 990*ms, 5*ms, 10*ms),
			lease(1, "b", 10*ms, 1000*ms, 15*ms, 20*ms), // starts exactly at A's unlock
		),
		"handover after expiry": concat(
			lease(0, "a", 0, 990*ms, 5*ms, -1), // crashed: no unlock
			lease(1, "b", 1000*ms, 1990*ms, 1005*ms, 1010*ms),
		),
		"lost lease does not write": concat(
			[]Event{{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a", Holds: 1},
				{Client: 0, Kind: LockLost, At: 150 * ms, Token: "a"},
				{Client: 0, Kind: Unlock, At: 150 * ms, Token: "a"}},
			lease(1, "b", 120*ms, 1100*ms, 130*ms, 140*ms),
		),
		"rejected stale write": concat(
			[]Event{{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a", Holds: 1},
				{Client: 0, Kind: WriteRejected, At: 400 * ms, Token: "a"},
				{Client: 0, Kind: Unlock, At: 400 * ms, Token: "a"}},
			lease(1, "b", 120*ms, 1100*ms, 130*ms, 140*ms),
		),
		"out of order events": concat(
			lease(1, "b", 10*ms, 1000*ms, 15*ms, 20*ms),
			lease(0, "a", 0, 990*ms, 5*ms, 10*ms),
		),
		"two locks at once": concat(
			withLock("x", lease(0, "a", 0, 990*ms, 5*ms, 500*ms)),
			withLock("y", lease(1, "b", 100*ms, 990*ms, 105*ms, 500*ms)),
		),
		"tokens rise": concat(fenced(0, "a", 0, 100*ms, 50*ms, 1, true), fenced(1, "b", 200*ms, 300*ms, 250*ms, 2, true)),
		"coverage after a key loss": concat(lease(0, "a", 0, 500*ms, -1, 410*ms), []Event{
			{Kind: KeysLost, At: 100 * ms, Node: 1},
			{Client: 0, Kind: Covered, At: 400 * ms, Token: "a", Until: 500 * ms, Copies: 1, Quorum: 2}}),
		"coverage once expired": {{Client: 0, Kind: Covered, At: 500 * ms, Token: "a", Until: 500 * ms, Copies: 0, Quorum: 2}},
		"do released":           {{Client: 0, Kind: DoReturned, At: 60 * ms, Token: "a", Until: 100 * ms}},
		"straggler beyond the guard, its key excused": {
			{Client: 0, Kind: Overtaken, At: 600 * ms, Token: "a", Node: 1, Released: 100 * ms, Guard: 400 * ms},
			{Kind: Leftover, At: time.Second, Token: "a", Node: 1, Note: "key l"}},
		"release refused, its key excused": {
			{Client: 0, Kind: ReleaseRefused, At: 100 * ms, Token: "a", Node: 2},
			{Kind: Leftover, At: time.Second, Token: "a", Node: 2, Note: "key l"}},
	}
	for name, ev := range cases {
		t.Run(name, func(t *testing.T) {
			if f := Check(ev); len(f.Violations) != 0 {
				t.Fatalf("Check found violations in a clean history:\n%s", whats(f.Violations))
			}
		})
	}
	f := Check(cases["rejected stale write"])
	if f.Rejected != 1 || f.Acquisitions != 2 {
		t.Errorf("rejected stale write: Rejected=%d Acquisitions=%d, want 1 and 2", f.Rejected, f.Acquisitions)
	}
	if f := Check(cases["lost lease does not write"]); f.LocksLost != 1 {
		t.Errorf("LocksLost = %d, want 1", f.LocksLost)
	}
}

func withLock(name string, evs []Event) []Event {
	for i := range evs {
		evs[i].Lock = name
	}
	return evs
}

// TestViolationsCarryTheirLock: a violation names its lock and whether the
// lock's writes were fenced; Of selects by invariant.
func TestViolationsCarryTheirLock(t *testing.T) {
	ev := concat(
		withLock("x", concat(lease(0, "a", 0, 990*ms, -1, 500*ms), lease(1, "b", 300*ms, 1290*ms, -1, 320*ms))),
		withLock("y", concat(fenced(0, "c", 0, 1000*ms, 300*ms, 1, true), fenced(1, "d", 200*ms, 1200*ms, 400*ms, 2, true))),
	)
	f := Check(ev)
	overlaps := f.Of(&MutualExclusion)
	if len(overlaps) != 2 || len(f.Overlaps) != 2 || len(f.Violations) != 2 || !f.Fenced {
		t.Fatalf("want one overlap on each lock and nothing else, fenced: %v\n%s", f.Fenced, whats(f.Violations))
	}
	// By time: y's from 200ms, x's from 300ms.
	if overlaps[0].Lock != "y" || !overlaps[0].Fenced || overlaps[1].Lock != "x" || overlaps[1].Fenced {
		t.Errorf("overlaps %+v: want y fenced, then x unfenced", overlaps)
	}
	if len(f.Of(&TokenOrder, &FencedWriteOrder)) != 0 {
		t.Errorf("Of returned violations of invariants not broken")
	}
}
