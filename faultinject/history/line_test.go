package history

import (
	"strings"
	"testing"
	"time"
)

// TestKeptOut: a refusal of the free key is a violation when the waiter is
// not in the line (its own tombstone), when it is first, or behind a
// waiter that had left that master's line and came back by a late copy;
// not behind a live waiter that never left it (or left another master's
// line, or left after, or came back by its own current acquire), nor for a
// late copy.
func TestKeptOut(t *testing.T) {
	left := func(tok string, node int, at time.Duration) Event {
		return Event{Client: 1, Kind: Left, At: at, Token: tok, Node: node, Note: "LeaveQueue"}
	}
	refused := func(tok string, line ...string) Event {
		return Event{Client: 1, Kind: Refused, At: 20 * ms, Token: tok, Node: 0, Line: line}
	}
	queued := func(tok string, at time.Duration, late bool) Event {
		return Event{Client: 1, Kind: Queued, At: at, Token: tok, Node: 0, Late: late}
	}
	late := refused("w2")
	late.Late = true
	cases := []struct {
		name string
		ev   []Event
		want string // "" for a clean history
	}{
		{"its own tombstone", []Event{left("w2", 0, 10*ms), refused("w2", "w1")}, "it is not in that line"},
		{"first in line", []Event{refused("w2", "w2", "w1")}, "it is first in that line"},
		{"behind a waiter that left", []Event{left("w1", 0, 10*ms), refused("w2", "w1", "w2")}, "the first in line, w1, had left that line at 10ms and came back"},
		{"behind a live waiter", []Event{refused("w2", "w1", "w2")}, ""},
		{"behind a waiter that left another line", []Event{left("w1", 1, 10*ms), refused("w2", "w1", "w2")}, ""},
		{"behind a waiter that left later", []Event{left("w1", 0, 30*ms), refused("w2", "w1", "w2")}, ""},
		{"a late copy", []Event{left("w2", 0, 10*ms), late}, ""},
		{"behind a waiter back by its own acquire", []Event{left("w1", 0, 10*ms), queued("w1", 15*ms, false), refused("w2", "w1", "w2")}, ""},
		{"behind a waiter back by a late copy", []Event{left("w1", 0, 10*ms), queued("w1", 15*ms, true), refused("w2", "w1", "w2")}, "the first in line, w1, had left that line at 10ms and came back"},
		{"behind a waiter that left after its acquire", []Event{queued("w1", 5*ms, false), left("w1", 0, 10*ms), refused("w2", "w1", "w2")}, "the first in line, w1, had left that line at 10ms and came back"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if v, ok := onlyViolation(t, &KeptOut, tc.ev, tc.want); ok && (v.Client != 1 || v.Token != "w2" || v.At != 20*ms) {
				t.Errorf("violation %+v: want c1's waiter w2 at 20ms", v)
			}
		})
	}
}

// TestGranted: a waiting call that stays waiting (or gives up, or is
// granted) after the lock has been free for longer than its bound breaks
// it; the lock is busy while a lease is held (until its Unlock), and after
// a lease that ended without Unlock until the next grant.
func TestGranted(t *testing.T) {
	waits := func(at time.Duration) Event {
		return Event{Client: 1, Kind: Waiting, At: at, Within: 500 * ms}
	}
	gaveUp := func(at time.Duration) Event { return Event{Client: 1, Kind: GaveUp, At: at} }
	cases := []struct {
		name string
		ev   []Event
		want string
	}{
		{"granted at once", concat(lease(0, "a", 0, 990*ms, -1, 100*ms), []Event{waits(10 * ms)}, lease(1, "b", 110*ms, 1100*ms, -1, 200*ms)), ""},
		{"granted within the bound", concat(lease(0, "a", 0, 990*ms, -1, 100*ms), []Event{waits(10 * ms)}, lease(1, "b", 600*ms, 1600*ms, -1, 700*ms)), ""},
		{"granted late", concat(lease(0, "a", 0, 990*ms, -1, 100*ms), []Event{waits(10 * ms)}, lease(1, "b", 601*ms, 1600*ms, -1, 700*ms)),
			"c1's Lock call, waiting since 10ms, did not get the lock within 500ms of its being free from 100ms (granted at 601ms)"},
		{"gave up", concat(lease(0, "a", 0, 990*ms, -1, 100*ms), []Event{waits(10 * ms), gaveUp(2 * time.Second)}), "(gave up at 2s)"},
		{"still waiting", concat([]Event{waits(0)}, lease(0, "a", 100*ms, 990*ms, -1, 800*ms), []Event{{Kind: KeysLost, At: 1400 * ms, Node: 0}}),
			"of its being free from 800ms (still waiting at the history's end)"},
		{"free stretches each short", concat([]Event{waits(0)}, lease(0, "a", 400*ms, 990*ms, -1, 500*ms), lease(2, "c", 900*ms, 2000*ms, -1, 1300*ms), []Event{gaveUp(1700 * ms)}), ""},
		{"held the whole time", concat([]Event{waits(0)}, lease(0, "a", 0, 5*time.Second, -1, 3*time.Second), []Event{gaveUp(3 * time.Second)}), ""},
		{"a lease that expired unreleased", concat(lease(0, "a", 0, 100*ms, -1, -1), []Event{waits(10 * ms), gaveUp(3 * time.Second)}), ""},
		{"no bound", concat(lease(0, "a", 0, 990*ms, -1, 100*ms), []Event{{Client: 1, Kind: Waiting, At: 10 * ms}, gaveUp(3 * time.Second)}), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { onlyViolation(t, &Granted, tc.ev, tc.want) })
	}
}

// onlyViolation checks ev's history: clean when want is "", else exactly
// one violation, of inv, whose text contains want (returned, ok true).
func onlyViolation(t *testing.T, inv *Invariant, ev []Event, want string) (Violation, bool) {
	t.Helper()
	f := Check(ev)
	if want == "" {
		if len(f.Violations) != 0 {
			t.Fatalf("clean history, got:\n%s", whats(f.Violations))
		}
		return Violation{}, false
	}
	vs := f.Of(inv)
	if len(vs) != 1 || len(f.Violations) != 1 || !strings.Contains(vs[0].What, want) {
		t.Fatalf("want one %s violation containing %q, got:\n%s", inv.Name, want, whats(f.Violations))
	}
	return vs[0], true
}
