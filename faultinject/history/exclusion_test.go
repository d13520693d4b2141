package history

import (
	"strings"
	"testing"
	"time"
)

func TestOverlap(t *testing.T) {
	// Client 0 holds [0, 500ms) (its unlock); client 1 acquires at 300ms
	// (a master of 0's quorum restarted empty) and writes inside its own
	// lease. Client 0 writes at 450ms, after 1's lease began.
	ev := concat(
		lease(0, "a", 0, 990*ms, 450*ms, 500*ms),
		lease(1, "b", 300*ms, 1290*ms, 310*ms, 320*ms),
	)
	f := Check(ev)
	if len(f.Overlaps) != 1 || len(f.Of(&MutualExclusion)) != 1 {
		t.Fatalf("Overlaps = %v, want exactly one", f.Overlaps)
	}
	o := f.Overlaps[0]
	if o.A.Client != 0 || o.B.Client != 1 || o.From != 300*ms || o.To != 320*ms {
		t.Errorf("overlap = %+v, want clients 0 and 1 from 300ms to 320ms", o)
	}
	stale := f.Of(&FreshWrites)
	if len(stale) != 1 || stale[0].Client != 0 || !strings.Contains(stale[0].What, "later lease") {
		t.Errorf("fresh-writes violations = %v, want client 0's write after client 1's later lease", stale)
	}
	if len(f.Violations) != 2 {
		t.Errorf("%d violations, want 2:\n%s", len(f.Violations), whats(f.Violations))
	}
	if !strings.Contains(o.String(), "clients 0 and 1") {
		t.Errorf("Overlap.String() = %q", o.String())
	}
}

func TestOverlapEndsAtValidity(t *testing.T) {
	// Client 0 never unlocks before its validity ends at 100ms: client 1's
	// lease from 100ms on does not overlap; one from 99ms does.
	for _, tc := range []struct {
		start time.Duration
		want  int
	}{{100 * ms, 0}, {99 * ms, 1}} {
		ev := concat(
			lease(0, "a", 0, 100*ms, -1, 5000*ms),
			lease(1, "b", tc.start, tc.start+time.Second, -1, tc.start+10*ms),
		)
		if got := len(Check(ev).Overlaps); got != tc.want {
			t.Errorf("client 1 acquiring at %v: %d overlaps, want %d", tc.start, got, tc.want)
		}
	}
}

func TestOverlapCountsEveryPair(t *testing.T) {
	// A long lease of client 1 and three short leases of client 0 inside it.
	ev := concat(
		lease(1, "long", 0, 2000*ms, -1, 1200*ms),
		lease(0, "s1", 100*ms, 1100*ms, -1, 110*ms),
		lease(0, "s2", 200*ms, 1200*ms, -1, 210*ms),
		lease(0, "s3", 300*ms, 1300*ms, -1, 310*ms),
		lease(0, "after", 1300*ms, 2300*ms, -1, 1310*ms),
	)
	if got := len(Check(ev).Overlaps); got != 3 {
		t.Fatalf("%d overlaps, want 3", got)
	}
}

// TestOverlapOfAnInstant: a lease granted inside another counts even if
// its holder stops at once (the simulator's virtual clock makes that an
// interval of no length); a lease whose validity was over when its client
// got it was never believed valid and does not.
func TestOverlapOfAnInstant(t *testing.T) {
	at := concat(lease(0, "a", 0, 990*ms, -1, 500*ms), lease(1, "b", 300*ms, 1290*ms, -1, 300*ms))
	if got := len(Check(at).Overlaps); got != 1 {
		t.Errorf("a lease granted and released at one instant inside another: %d overlaps, want 1", got)
	}
	never := concat(lease(0, "a", 0, 990*ms, -1, 500*ms), lease(1, "b", 300*ms, 300*ms, -1, 310*ms))
	if f := Check(never); len(f.Violations) != 0 {
		t.Errorf("a lease over when granted: %s", whats(f.Violations))
	}
}

func TestOverlapWithRenewedValidity(t *testing.T) {
	// A lease renewed past its first validity writes at 150ms (its write
	// records the renewed deadline); another client starts after the
	// renewed deadline. No violation; without the renewal the same write
	// would be stale.
	renewed := []Event{{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a", Holds: 1},
		{Client: 0, Kind: WriteAccepted, At: 150 * ms, Token: "a", Until: 300 * ms},
		{Client: 0, Kind: Unlock, At: 160 * ms, Token: "a", Until: 300 * ms}}
	if f := Check(concat(renewed, lease(1, "b", 170*ms, 900*ms, 180*ms, 190*ms))); len(f.Violations) != 0 {
		t.Errorf("renewed lease: %s", whats(f.Violations))
	}
	renewed[1].Until, renewed[2].Until = 0, 0
	if f := Check(renewed); len(f.Of(&FreshWrites)) != 1 {
		t.Errorf("a write past the unrenewed validity: %d stale writes, want 1", len(f.Of(&FreshWrites)))
	}
	// A renewed lease overlapping a rival's is an overlap.
	renewed[1].Until, renewed[2].Until = 300*ms, 300*ms
	renewed[2].At = 400 * ms
	if f := Check(concat(renewed, lease(1, "b", 200*ms, 900*ms, 250*ms, 260*ms))); len(f.Overlaps) != 1 {
		t.Errorf("a rival inside the renewed validity: %d overlaps, want 1", len(f.Overlaps))
	}
}

// shaped is a lease of a shape, for the shape cases: start and end in ms.
type shaped struct {
	start, end int
	shared     bool
	limit      int
	owner      string
}

func shapedHistory(ls []shaped) []Event {
	var ev []Event
	for i, l := range ls {
		tok := string(rune('a' + i))
		ev = append(ev, Event{Client: i, Kind: Acquired, At: time.Duration(l.start) * ms, Until: time.Duration(l.end+1000) * ms, Token: tok,
			Shared: l.shared, Limit: l.limit, Owner: l.owner, Holds: 1},
			Event{Client: i, Kind: Unlock, At: time.Duration(l.end) * ms, Token: tok})
	}
	return ev
}

// TestShapes: each shape's exclusion fires on a violation and stays quiet
// on what the shape allows (readers together, a writer right after
// readers, one owner's re-entries, K places). The cases of the
// simulator's TestShapeChecks and the chaos checker's TestCheckShapes.
func TestShapes(t *testing.T) {
	r := func(s, e int) shaped { return shaped{start: s, end: e, shared: true} }
	w := func(s, e int) shaped { return shaped{start: s, end: e} }
	o := func(s, e int, owner string) shaped { return shaped{start: s, end: e, owner: owner} }
	p := func(s, e int) shaped { return shaped{start: s, end: e, limit: 2} }
	cases := []struct {
		name   string
		leases []shaped
		want   *Invariant // nil: no violation
	}{
		{"readers overlap", []shaped{r(0, 100), r(50, 150), r(60, 70)}, nil},
		{"writer after readers", []shaped{r(0, 100), r(50, 150), w(150, 200)}, nil},
		{"writer overlaps reader", []shaped{r(0, 100), w(99, 150)}, &MutualExclusion},
		{"reader overlaps writer", []shaped{w(0, 100), r(10, 20)}, &MutualExclusion},
		{"two writers", []shaped{w(0, 100), w(50, 150)}, &MutualExclusion},
		{"one owner re-enters", []shaped{o(0, 100, "job-0"), o(10, 50, "job-0"), o(100, 200, "job-1")}, nil},
		{"two owners", []shaped{o(0, 100, "job-0"), o(10, 50, "job-0"), o(40, 200, "job-1")}, &MutualExclusion},
		{"K places", []shaped{p(0, 100), p(50, 150), p(100, 200), p(150, 250)}, nil},
		{"K+1 places", []shaped{p(0, 100), p(50, 150), p(99, 200)}, &SemaphoreBound},
		{"K+1 places at one instant", []shaped{p(0, 100), p(0, 100), p(0, 100)}, &SemaphoreBound},
		{"mutex", []shaped{w(0, 100), w(50, 150)}, &MutualExclusion},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := Check(shapedHistory(c.leases))
			switch {
			case c.want == nil && len(f.Violations) > 0:
				t.Errorf("want no violation, got:\n%s", whats(f.Violations))
			case c.want != nil && (len(f.Of(c.want)) == 0 || len(f.Of(c.want)) != len(f.Violations)):
				t.Errorf("want %s only, got:\n%s", c.want.Name, whats(f.Violations))
			}
		})
	}
}
