package history

import (
	"testing"
	"time"
)

// TestGrantReleased: a key holding a value of a call that gave up, or
// whose lease's Unlock began, before the checkpoint breaks it, once per
// master and value; not a value of a call still going on (its end after
// the checkpoint, or at it), not one sent after the call ended (a later
// call's), not another client's, and not one whose release the master
// refused unsent or a straggler past its guard.
func TestGrantReleased(t *testing.T) {
	held := func(tok string, node int, sent, at time.Duration) Event {
		return Event{Client: 1, Kind: Held, At: at, Lock: "l", Token: tok, Node: node, Sent: sent}
	}
	gaveUp := Event{Client: 1, Kind: GaveUp, At: 50 * ms, Lock: "l"}
	unlock := Event{Client: 1, Kind: Unlock, At: 50 * ms, Lock: "l", Token: "b"}
	other := gaveUp
	other.Client = 2
	refused := Event{Kind: ReleaseRefused, At: 40 * ms, Token: "v", Node: 0}
	overtaken := Event{Client: 1, Kind: Overtaken, At: 30 * ms, Lock: "l", Token: "v", Node: 0, Released: 10 * ms, Guard: 15 * ms}
	cases := []struct {
		name string
		ev   []Event
		want string // "" for a clean history
	}{
		{"gave up", []Event{gaveUp, held("v", 0, 10*ms, 100*ms)}, "m0's key holds c1's value v (sent at 10ms) at 100ms; that call gave up at 50ms"},
		{"unlocked", []Event{unlock, held("v", 0, 10*ms, 100*ms)}, "that call unlocked at 50ms"},
		{"once per master and value", []Event{gaveUp, held("v", 0, 10*ms, 100*ms), held("v", 0, 10*ms, 200*ms)}, "at 100ms"},
		{"the call goes on", []Event{gaveUp, held("v", 0, 10*ms, 40*ms)}, ""},
		{"the call ends at the checkpoint", []Event{gaveUp, held("v", 0, 10*ms, 50*ms)}, ""},
		{"a later call's value", []Event{gaveUp, held("v", 0, 60*ms, 100*ms)}, ""},
		{"another client's call ended", []Event{other, held("v", 0, 10*ms, 100*ms)}, ""},
		{"a release refused unsent", []Event{refused, gaveUp, held("v", 0, 10*ms, 100*ms)}, ""},
		{"a release refused by another master", []Event{refused, gaveUp, held("v", 1, 10*ms, 100*ms)}, "m1's key holds c1's value v"},
		{"a straggler past the guard", []Event{overtaken, gaveUp, held("v", 0, 10*ms, 100*ms)}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if v, ok := onlyViolation(t, &GrantReleased, tc.ev, tc.want); ok && (v.Client != 1 || v.Token != "v" || v.At != 100*ms) {
				t.Errorf("violation %+v: want c1's value v at 100ms", v)
			}
		})
	}
}
