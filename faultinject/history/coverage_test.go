package history

import (
	"testing"
	"time"
)

// TestQuorumCoverage: judged while the lease is valid and no master has
// lost its keys by then.
func TestQuorumCoverage(t *testing.T) {
	covered := func(at, until int, copies int) Event {
		return Event{Client: 1, Kind: Covered, At: time.Duration(at) * ms, Lock: "l", Token: "a", Until: time.Duration(until) * ms, Copies: copies, Quorum: 2}
	}
	cases := []struct {
		name string
		ev   []Event
		want int
	}{
		{"on a quorum", []Event{covered(100, 200, 2)}, 0},
		{"off a quorum", []Event{covered(100, 200, 1)}, 1},
		{"off a quorum at its deadline", []Event{covered(200, 200, 1)}, 0},
		{"after a key loss", []Event{{Kind: KeysLost, At: 50 * ms, Node: 0}, covered(100, 200, 1)}, 0},
		{"key loss at the same instant", []Event{covered(100, 200, 1), {Kind: KeysLost, At: 100 * ms, Node: 0}}, 0},
		{"before a key loss", []Event{covered(100, 200, 1), {Kind: KeysLost, At: 150 * ms, Node: 0}}, 1},
	}
	for _, c := range cases {
		if f := Check(c.ev); len(f.Of(&QuorumCoverage)) != c.want || len(f.Violations) != c.want {
			t.Errorf("%s: want %d, got:\n%s", c.name, c.want, whats(f.Violations))
		}
	}
}
