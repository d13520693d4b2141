package bench

import (
	"slices"
	"testing"
	"time"
)

// TestTally checks the contention figures on a made-up slice: three
// clients, acquisitions out of order in the input, one re-lock by the same
// client, one overlap (a Lock that returned before the holder called
// Unlock), an acquisition after the stop (its wait counts up to the stop)
// and a client that gave up waiting at the end.
func TestTally(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acqs := []acquisition{
		{client: 1, want: at(0), acq: at(10), unlock: at(12)}, // 3rd
		{client: 0, want: at(0), acq: at(1), unlock: at(2)},   // 1st
		{client: 0, want: at(2), acq: at(3), unlock: at(5)},   // 2nd: same client
		{client: 2, want: at(0), acq: at(11), unlock: at(13)}, // 4th: overlaps client 1 (Lock returned at 11, Unlock called at 12)
		{client: 0, want: at(5), acq: at(40), unlock: at(41)}, // after the stop: waited 5..30 at least
	}
	var tl tally
	tl.add(acqs, []time.Time{at(4)}, at(30)) // a client waiting since 4 gave up at the end
	if tl.acquisitions != 4 || tl.pairs != 3 || tl.same != 1 || tl.overlaps != 1 {
		t.Errorf("acquisitions %d, pairs %d, same-client %d, overlaps %d; want 4, 3, 1, 1", tl.acquisitions, tl.pairs, tl.same, tl.overlaps)
	}
	// handoffs to another client: 0 -> 1 (5 to 10), 1 -> 2 (12 to 11: overlapping, counted as 0)
	if want := []time.Duration{5 * time.Millisecond, 0}; !slices.Equal(tl.handoffs, want) {
		t.Errorf("handoffs %v, want %v", tl.handoffs, want)
	}
	if want := []time.Duration{time.Millisecond, time.Millisecond, 10 * time.Millisecond, 11 * time.Millisecond}; !slices.Equal(tl.waits, want) {
		t.Errorf("waits %v, want %v", tl.waits, want)
	}
	if tl.longest != 26*time.Millisecond { // the waiter since 4, cut at the stop (30)
		t.Errorf("longest wait %v, want 26ms", tl.longest)
	}
}
