package history

import (
	"testing"
	"time"
)

func TestFencedWrites(t *testing.T) {
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
		// Tokens repeated, the older lease writes last: its write is
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
		if !f.Fenced || len(f.Overlaps) != c.overlaps || len(f.Of(&FencedWriteOrder)) != c.stale || len(f.Of(&NewerWriteAccepted)) != c.refused {
			t.Errorf("%s: fenced %v, %d overlaps; want %d overlaps, %d stale, %d refused; got:\n%s",
				c.name, f.Fenced, len(f.Overlaps), c.overlaps, c.stale, c.refused, whats(f.Violations))
		}
		if len(f.Of(&FreshWrites)) != 0 {
			t.Errorf("%s: fenced writes judged by time", c.name)
		}
		for _, v := range f.Of(&MutualExclusion) {
			if !v.Fenced || !v.Invariant.FencingAbsorbs {
				t.Errorf("%s: an overlap on a fenced lock is not marked absorbed: %+v", c.name, v)
			}
		}
	}
}

// TestTokenOrder: tokens must rise in the order leases are granted, also
// for leases that never write; leases without tokens are not judged.
func TestTokenOrder(t *testing.T) {
	acq := func(c int, tok string, at int, fence int64) Event {
		return Event{Client: c, Kind: Acquired, At: time.Duration(at) * 100 * ms, Until: time.Duration(at)*100*ms + 50*ms, Token: tok, Fence: fence, Holds: 1}
	}
	cases := []struct {
		name string
		ev   []Event
		want int
	}{
		{"rising", []Event{acq(0, "a", 0, 1), acq(1, "b", 1, 2), acq(0, "c", 2, 1000)}, 0},
		{"recorded out of order", []Event{acq(0, "c", 2, 3), acq(1, "b", 1, 2), acq(0, "a", 0, 1)}, 0},
		{"repeated", []Event{acq(0, "a", 0, 1), acq(1, "b", 1, 1)}, 1},
		{"back", []Event{acq(0, "a", 0, 7), acq(1, "b", 1, 8), acq(0, "c", 2, 2), acq(1, "d", 3, 3)}, 1},
		{"a lease without a token among fenced ones", []Event{acq(0, "a", 0, 7), acq(1, "b", 1, 0)}, 1},
		{"no fencing", []Event{acq(0, "a", 0, 0), acq(1, "b", 1, 0)}, 0},
	}
	for _, c := range cases {
		if f := Check(c.ev); len(f.Of(&TokenOrder)) != c.want || len(f.Violations) != c.want {
			t.Errorf("%s: want %d token-order violations, got:\n%s", c.name, c.want, whats(f.Violations))
		}
	}
}
