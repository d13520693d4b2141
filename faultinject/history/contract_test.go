package history

import "testing"

func TestHoldsBound(t *testing.T) {
	acq := func(holds int, shared bool, limit int, owner string) Event {
		return Event{Kind: Acquired, At: 0, Until: 100 * ms, Token: "a", Holds: holds, Shared: shared, Limit: limit, Owner: owner}
	}
	cases := []struct {
		name string
		e    Event
		want int
	}{
		{"mutex 1", acq(1, false, 0, ""), 0},
		{"mutex 2", acq(2, false, 0, ""), 1},
		{"mutex 0", acq(0, false, 0, ""), 1},
		{"reader 3", acq(3, true, 0, ""), 0},
		{"reader 0", acq(0, true, 0, ""), 1},
		{"place 3 of K=3", acq(3, false, 3, ""), 0},
		{"place 4 of K=3", acq(4, false, 3, ""), 1},
		{"re-entry 2", acq(2, false, 0, "job-0"), 0},
		{"re-entry 0", acq(0, false, 0, "job-0"), 1},
	}
	for _, c := range cases {
		if f := Check([]Event{c.e}); len(f.Of(&HoldsBound)) != c.want || len(f.Violations) != c.want {
			t.Errorf("%s: want %d, got:\n%s", c.name, c.want, whats(f.Violations))
		}
	}
}
