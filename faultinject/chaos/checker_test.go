package chaos

import (
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// lease returns the events of one clean lease of client c with token tok:
// acquired at a with validity until u, a write at w (if w >= 0), unlock at
// un (if un >= 0).
func lease(c int, tok string, a, u, w, un time.Duration) []Event {
	ev := []Event{{Client: c, Kind: Acquired, At: a, Until: u, Token: tok}}
	if w >= 0 {
		ev = append(ev, Event{Client: c, Kind: WriteAccepted, At: w, Token: tok})
	}
	if un >= 0 {
		ev = append(ev, Event{Client: c, Kind: Unlock, At: un, Token: tok})
	}
	return ev
}

func concat(evs ...[]Event) []Event {
	var out []Event
	for _, e := range evs {
		out = append(out, e...)
	}
	return out
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
			[]Event{{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a"},
				{Client: 0, Kind: LockLost, At: 150 * ms, Token: "a"},
				{Client: 0, Kind: Unlock, At: 150 * ms, Token: "a"}},
			lease(1, "b", 120*ms, 1100*ms, 130*ms, 140*ms),
		),
		"rejected stale write": concat(
			[]Event{{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a"},
				{Client: 0, Kind: WriteRejected, At: 400 * ms, Token: "a"},
				{Client: 0, Kind: Unlock, At: 400 * ms, Token: "a"}},
			lease(1, "b", 120*ms, 1100*ms, 130*ms, 140*ms),
		),
		"out of order events": concat(
			lease(1, "b", 10*ms, 1000*ms, 15*ms, 20*ms),
			lease(0, "a", 0, 990*ms, 5*ms, 10*ms),
		),
	}
	for name, ev := range cases {
		t.Run(name, func(t *testing.T) {
			f := Check(ev)
			if f.Violations() != 0 {
				t.Fatalf("Check found %d violations in a clean history: overlaps %v, stale writes %v", f.Violations(), f.Overlaps, f.StaleWrites)
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

func TestCheckOverlap(t *testing.T) {
	// Client 0 holds [0, 500ms) (its unlock); client 1 acquires at 300ms
	// (a master of 0's quorum restarted empty) and writes inside its own
	// lease. Client 0 writes at 450ms, after 1's lease began.
	ev := concat(
		lease(0, "a", 0, 990*ms, 450*ms, 500*ms),
		lease(1, "b", 300*ms, 1290*ms, 310*ms, 320*ms),
	)
	f := Check(ev)
	if len(f.Overlaps) != 1 {
		t.Fatalf("Overlaps = %v, want exactly one", f.Overlaps)
	}
	o := f.Overlaps[0]
	if o.A.Client != 0 || o.B.Client != 1 || o.From != 300*ms || o.To != 320*ms {
		t.Errorf("overlap = %+v, want clients 0 and 1 from 300ms to 320ms", o)
	}
	if len(f.StaleWrites) != 1 || f.StaleWrites[0].Client != 0 || !strings.Contains(f.StaleWrites[0].Reason, "later lease") {
		t.Errorf("StaleWrites = %v, want client 0's write after client 1's later lease", f.StaleWrites)
	}
	if f.Violations() != 2 {
		t.Errorf("Violations() = %d, want 2", f.Violations())
	}
	if !strings.Contains(o.String(), "clients 0 and 1") {
		t.Errorf("Overlap.String() = %q", o.String())
	}
}

func TestCheckOverlapEndsAtValidity(t *testing.T) {
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

func TestCheckCountsEveryOverlappingPair(t *testing.T) {
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

func TestCheckStaleWriteAfterValidity(t *testing.T) {
	// Client 0 checked its lease, paused, and wrote 300ms after its
	// validity ended; nobody else took the lock meanwhile.
	ev := concat(
		[]Event{{Client: 0, Kind: Acquired, At: 0, Until: 990 * ms, Token: "a"},
			{Client: 0, Kind: Paused, At: 2 * ms, Token: "a"},
			{Client: 0, Kind: WriteAccepted, At: 1290 * ms, Token: "a"},
			{Client: 0, Kind: Unlock, At: 1291 * ms, Token: "a"}},
	)
	f := Check(ev)
	if len(f.Overlaps) != 0 {
		t.Errorf("Overlaps = %v, want none (the interval ends at the validity)", f.Overlaps)
	}
	if len(f.StaleWrites) != 1 || !strings.Contains(f.StaleWrites[0].Reason, "300ms after its lease's validity ended") {
		t.Fatalf("StaleWrites = %v, want one 300ms after the validity", f.StaleWrites)
	}
}

func TestCheckStaleWriteAfterLaterLease(t *testing.T) {
	// Client 0's write at 500ms is inside its own validity but after
	// client 1's lease began at 400ms (client 0 had already unlocked in
	// its own view, so there is no overlap: the write is the violation).
	ev := []Event{
		{Client: 0, Kind: Acquired, At: 0, Until: 990 * ms, Token: "a"},
		{Client: 0, Kind: Unlock, At: 300 * ms, Token: "a"},
		{Client: 1, Kind: Acquired, At: 400 * ms, Until: 1390 * ms, Token: "b"},
		{Client: 0, Kind: WriteAccepted, At: 500 * ms, Token: "a"},
		{Client: 1, Kind: Unlock, At: 600 * ms, Token: "b"},
	}
	f := Check(ev)
	if len(f.Overlaps) != 0 || len(f.StaleWrites) != 1 || f.StaleWrites[0].Client != 0 {
		t.Fatalf("overlaps %v, stale writes %v; want no overlap and client 0's write", f.Overlaps, f.StaleWrites)
	}
}

func TestCheckWriteWithoutLease(t *testing.T) {
	f := Check([]Event{{Client: 2, Kind: WriteAccepted, At: time.Second, Token: "nobody"}})
	if len(f.StaleWrites) != 1 || !strings.Contains(f.StaleWrites[0].String(), "never held") {
		t.Fatalf("StaleWrites = %v, want the write of a token without a lease", f.StaleWrites)
	}
}

func TestRegisterAndHistory(t *testing.T) {
	c := NewRefClock()
	h := &History{}
	r := NewRegister(c, h, false)
	until := c.Of(time.Now().Add(time.Hour))
	h.Add(Event{Client: 0, Kind: Acquired, At: c.Now(), Until: until, Token: "a"})
	if !r.Write(0, "a", 0, until, "v1") || !r.Write(0, "a", 0, until, "v0") || r.Value() != "v0" {
		t.Fatalf("a register without fencing refused a write or lost it (value %q)", r.Value())
	}
	r2 := NewRegister(c, h, true)
	if !r2.Write(0, "a", 7, until, "v2") || r2.Write(0, "a", 6, until, "v3") || r2.Value() != "v2" {
		t.Fatalf("a fencing register accepted a token below the highest, or refused one at it (value %q)", r2.Value())
	}
	if h.Acquisitions() != 1 {
		t.Errorf("Acquisitions = %d, want 1", h.Acquisitions())
	}
	ev := h.Events()
	if len(ev) != 5 || ev[3].Kind != WriteAccepted || ev[4].Kind != WriteRejected || ev[4].Fence != 6 {
		t.Fatalf("events = %+v", ev)
	}
	if f := Check(ev); f.Violations() != 0 || f.Rejected != 1 || !f.Fenced {
		t.Errorf("Check = %+v", f)
	}
	if ev[1].At < ev[0].At {
		t.Errorf("reference clock went backwards: %v then %v", ev[0].At, ev[1].At)
	}
}

// fenced returns the events of a fenced lease of client c: acquired at a
// with validity until u, one write at w with token fence (accepted or not).
func fenced(c int, tok string, a, u, w time.Duration, fence int64, accepted bool) []Event {
	kind := WriteAccepted
	if !accepted {
		kind = WriteRejected
	}
	return []Event{{Client: c, Kind: Acquired, At: a, Until: u, Token: tok},
		{Client: c, Kind: kind, At: w, Token: tok, Fence: fence},
		{Client: c, Kind: Unlock, At: w, Token: tok}}
}

func TestCheckFencedWrites(t *testing.T) {
	cases := []struct {
		name                     string
		ev                       []Event
		overlaps, stale, refused int
	}{
		// A paused holder writes after the next one: refused, harmless.
		{"late write refused", concat(
			fenced(0, "a", 0, 100*ms, 400*ms, 1, false),
			fenced(1, "b", 120*ms, 1100*ms, 130*ms, 2, true)), 0, 0, 0},
		// Overlapping leases with increasing tokens: the resource orders
		// them; the older writes first, the newer after: harmless.
		{"overlap, tokens in order", concat(
			fenced(0, "a", 0, 1000*ms, 300*ms, 1, true),
			fenced(1, "b", 200*ms, 1200*ms, 400*ms, 2, true)), 1, 0, 0},
		// Tokens went backwards, the older lease writes last: its write is
		// accepted after the newer one's.
		{"token repeated, older writes last", concat(
			fenced(0, "a", 0, 1000*ms, 500*ms, 3, true),
			fenced(1, "b", 200*ms, 1200*ms, 400*ms, 3, true)), 1, 1, 0},
		// Tokens went backwards, the older lease writes first: the newer
		// lease's write is refused.
		{"token lower, newer refused", concat(
			fenced(0, "a", 0, 1000*ms, 300*ms, 3, true),
			fenced(1, "b", 200*ms, 1200*ms, 400*ms, 2, false)), 1, 0, 1},
	}
	for _, c := range cases {
		f := Check(c.ev)
		if !f.Fenced || len(f.Overlaps) != c.overlaps || len(f.StaleWrites) != c.stale || len(f.NewerRefused) != c.refused {
			t.Errorf("%s: fenced %v, %d overlaps, %d stale %v, %d newer refused %v; want %d, %d, %d",
				c.name, f.Fenced, len(f.Overlaps), len(f.StaleWrites), f.StaleWrites, len(f.NewerRefused), f.NewerRefused, c.overlaps, c.stale, c.refused)
		}
		if f.Violations() != c.stale+c.refused {
			t.Errorf("%s: %d violations, want %d (overlaps do not count with fencing)", c.name, f.Violations(), c.stale+c.refused)
		}
	}
}

func TestCheckRenewedValidity(t *testing.T) {
	// A lease renewed past its first validity writes at 150ms (its write
	// records the renewed deadline); another client starts after the
	// renewed deadline. No violation; without the renewal the same write
	// would be stale.
	renewed := []Event{{Client: 0, Kind: Acquired, At: 0, Until: 100 * ms, Token: "a"},
		{Client: 0, Kind: WriteAccepted, At: 150 * ms, Token: "a", Until: 300 * ms},
		{Client: 0, Kind: Unlock, At: 160 * ms, Token: "a", Until: 300 * ms}}
	if f := Check(concat(renewed, lease(1, "b", 170*ms, 900*ms, 180*ms, 190*ms))); f.Violations() != 0 {
		t.Errorf("renewed lease: %+v", f)
	}
	renewed[1].Until, renewed[2].Until = 0, 0
	if f := Check(renewed); len(f.StaleWrites) != 1 {
		t.Errorf("a write past the unrenewed validity: %d stale writes, want 1", len(f.StaleWrites))
	}
	// A renewed lease overlapping a rival's is an overlap.
	renewed[1].Until, renewed[2].Until = 300*ms, 300*ms
	renewed[2].At = 400 * ms
	if f := Check(concat(renewed, lease(1, "b", 200*ms, 900*ms, 250*ms, 260*ms))); len(f.Overlaps) != 1 {
		t.Errorf("a rival inside the renewed validity: %d overlaps, want 1", len(f.Overlaps))
	}
}

func TestCheckShapes(t *testing.T) {
	read := func(c int, tok string, a, u, un time.Duration) []Event {
		ev := lease(c, tok, a, u, -1, un)
		ev[0].Shared = true
		return ev
	}
	sem := func(c int, tok string, a, un time.Duration) []Event {
		ev := lease(c, tok, a, a+time.Second, -1, un)
		ev[0].Limit = 2
		return ev
	}
	owned := func(c int, owner, tok string, a, w, un time.Duration) []Event {
		ev := lease(c, tok, a, a+time.Second, w, un)
		ev[0].Owner = owner
		return ev
	}
	cases := []struct {
		name            string
		ev              []Event
		overlaps, limit int
	}{
		{"readers share", concat(read(0, "a", 0, time.Second, 50*ms), read(1, "b", 10*ms, time.Second, 60*ms)), 0, 0},
		{"writer among readers", concat(read(0, "a", 0, time.Second, 50*ms), lease(1, "w", 10*ms, time.Second, -1, 60*ms)), 1, 0},
		{"two holders of K=2", concat(sem(0, "a", 0, 50*ms), sem(1, "b", 10*ms, 60*ms)), 0, 0},
		{"three holders of K=2", concat(sem(0, "a", 0, 50*ms), sem(1, "b", 10*ms, 60*ms), sem(2, "c", 20*ms, 30*ms)), 0, 1},
		{"hand-over at K", concat(sem(0, "a", 0, 50*ms), sem(1, "b", 10*ms, 60*ms), sem(2, "c", 50*ms, 70*ms)), 0, 0},
		{"one owner re-enters and writes", concat(owned(0, "o", "a", 0, 30*ms, 50*ms), owned(0, "o", "b", 10*ms, 20*ms, 40*ms)), 0, 0},
		{"two owners", concat(owned(0, "o", "a", 0, 30*ms, 50*ms), owned(1, "p", "b", 10*ms, 20*ms, 40*ms)), 1, 0},
	}
	for _, c := range cases {
		f := Check(c.ev)
		if len(f.Overlaps) != c.overlaps || len(f.OverLimit) != c.limit {
			t.Errorf("%s: %d overlaps %v, %d over the limit %v; want %d, %d", c.name, len(f.Overlaps), f.Overlaps, len(f.OverLimit), f.OverLimit, c.overlaps, c.limit)
		}
		if c.overlaps+c.limit == 0 && f.Violations() != 0 {
			t.Errorf("%s: %d violations (%+v)", c.name, f.Violations(), f)
		}
	}
}
