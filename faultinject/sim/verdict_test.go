package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
)

// TestVerdict feeds the verdict forged histories: each class of violation
// must land where the roles table says (the invariants themselves are
// tested in package history, one violating history each).
func TestVerdict(t *testing.T) {
	const ms = time.Millisecond
	acq := func(c int, tok string, at, until time.Duration, fence int64) history.Event {
		return history.Event{Client: c, Kind: history.Acquired, At: at, Lock: "lock-0", Token: tok, Until: until, Fence: fence, Holds: 1}
	}
	unlock := func(c int, tok string, at time.Duration) history.Event {
		return history.Event{Client: c, Kind: history.Unlock, At: at, Lock: "lock-0", Token: tok}
	}
	overlap := []history.Event{acq(0, "a", 0, 500*ms, 0), acq(1, "b", 100*ms, 600*ms, 0), unlock(1, "b", 200*ms), unlock(0, "a", 300*ms)}
	pausedWrite := []history.Event{acq(0, "a", 0, 100*ms, 0),
		{Client: 0, Kind: history.Paused, At: 50 * ms, Lock: "lock-0", Token: "a"},
		{Client: 0, Kind: history.WriteAccepted, At: 150 * ms, Lock: "lock-0", Token: "a", Until: 100 * ms},
		unlock(0, "a", 150*ms)}
	tokenBack := []history.Event{acq(0, "a", 0, 100*ms, 5), unlock(0, "a", 50*ms), acq(1, "b", 200*ms, 300*ms, 5), unlock(1, "b", 250*ms)}
	keyLoss := history.Event{Kind: history.KeysLost, At: 10 * ms, Node: 1}
	twoHolds := []history.Event{{Client: 0, Kind: history.Acquired, At: 0, Lock: "lock-0", Token: "a", Until: 100 * ms, Holds: 2}}
	orphan := []history.Event{{Kind: history.Leftover, At: time.Second, Lock: "lock-0", Token: "a", Node: 0, Note: "key lock-0"}}
	keptOut := []history.Event{{Client: 1, Kind: history.Refused, At: 20 * ms, Lock: "lock-0", Token: "w", Node: 0}}
	jump := []Fault{{Kind: ClockJump, Master: 0}}
	cat := func(evs ...[]history.Event) []history.Event {
		var out []history.Event
		for _, e := range evs {
			out = append(out, e...)
		}
		return out
	}
	cases := []struct {
		name    string
		events  []history.Event
		faults  []Fault
		quar    bool
		strict  bool
		outcome Outcome
		want    string // in Violations, Unsafe or Known, as the outcome says
	}{
		{"overlap", overlap, nil, false, true, Fail, "mutual-exclusion"},
		{"overlap, clock jumped", overlap, jump, false, true, Classified, "mutual-exclusion"},
		{"paused writer only", pausedWrite, nil, false, true, Classified, ""},
		{"paused writer and an overlap", cat(pausedWrite, []history.Event{acq(1, "b", 20*ms, 600*ms, 0), unlock(1, "b", 30*ms)}), nil, false, true, Fail, "mutual-exclusion"},
		{"token back", tokenBack, nil, false, true, Fail, "token-order"},
		{"token back after a key loss, not strict", cat(tokenBack, []history.Event{keyLoss}), nil, true, false, Classified, "token-order"},
		{"token back after a key loss, strict", cat(tokenBack, []history.Event{keyLoss}), nil, true, true, Fail, "token-order"},
		{"two holds, clock jumped", twoHolds, jump, false, true, Fail, "holds-bound"},
		{"orphan key", orphan, nil, false, true, Fail, "orphan key lock-0 on m0"},
		{"kept out, clock jumped", keptOut, jump, false, true, Fail, "kept-out"},
	}
	defer StrictFencing.Store(true)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			StrictFencing.Store(c.strict)
			w := &world{plan: Plan{Names: []string{"lock-0"}, Masters: 3, Faults: c.faults, Quar: c.quar}, events: c.events}
			r := w.result()
			got := strings.Join(r.Violations, "\n")
			switch r.Outcome {
			case Classified:
				got = strings.Join(append(r.Unsafe, r.Known...), "\n")
			case Pass:
				got = ""
			}
			if r.Outcome != c.outcome || !strings.Contains(got, c.want) || c.want == "" && got != "" {
				t.Errorf("outcome %v, want %v with %q; violations %v, unsafe %v, known %v, broken %v",
					r.Outcome, c.outcome, c.want, r.Violations, r.Unsafe, r.Known, r.Broken)
			}
		})
	}
}
