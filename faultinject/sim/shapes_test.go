package sim

import (
	"strings"
	"testing"
	"time"
)

// TestShapeChecks feeds the verdict forged histories: each shape's
// invariant must fire on a violation and stay quiet on what the shape
// allows (readers together, one owner's re-entries, K places).
func TestShapeChecks(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type lease struct {
		start, end int
		write      bool
		owner      string
	}
	cases := []struct {
		name   string
		shape  Shape
		leases []lease
		want   string // "" for no violation
	}{
		{"readers overlap", Shape{Kind: RWLock}, []lease{{0, 100, false, ""}, {50, 150, false, ""}, {60, 70, false, ""}}, ""},
		{"writer after readers", Shape{Kind: RWLock, Prefer: true}, []lease{{0, 100, false, ""}, {50, 150, false, ""}, {150, 200, true, ""}}, ""},
		{"writer overlaps reader", Shape{Kind: RWLock}, []lease{{0, 100, false, ""}, {99, 150, true, ""}}, "overlaps"},
		{"reader overlaps writer", Shape{Kind: RWLock}, []lease{{0, 100, true, ""}, {10, 20, false, ""}}, "overlaps"},
		{"two writers", Shape{Kind: RWLock}, []lease{{0, 100, true, ""}, {50, 150, true, ""}}, "overlaps"},
		{"one owner re-enters", Shape{Kind: ReentrantLock}, []lease{{0, 100, false, "job-0"}, {10, 50, false, "job-0"}, {100, 200, false, "job-1"}}, ""},
		{"two owners", Shape{Kind: ReentrantLock}, []lease{{0, 100, false, "job-0"}, {10, 50, false, "job-0"}, {40, 200, false, "job-1"}}, "overlaps"},
		{"K places", Shape{Kind: SemaphoreLock, K: 2}, []lease{{0, 100, false, ""}, {50, 150, false, ""}, {100, 200, false, ""}, {150, 250, false, ""}}, ""},
		{"K+1 places", Shape{Kind: SemaphoreLock, K: 2}, []lease{{0, 100, false, ""}, {50, 150, false, ""}, {99, 200, false, ""}}, "3 valid leases of a semaphore with K=2"},
		{"K+1 places at one instant", Shape{Kind: SemaphoreLock, K: 2}, []lease{{0, 100, false, ""}, {0, 100, false, ""}, {0, 100, false, ""}}, "3 valid leases"},
		{"mutex", Shape{}, []lease{{0, 100, false, ""}, {50, 150, false, ""}}, "overlaps"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &world{plan: Plan{Names: []string{"lock-0"}, Shapes: []Shape{c.shape}, Masters: 3}, t0: t0}
			for i, l := range c.leases {
				w.holds = append(w.holds, &hold{idx: i, client: i, name: "lock-0", start: ms(l.start), end: ms(l.end), write: l.write, owner: l.owner})
			}
			r := w.result()
			got := strings.Join(r.Violations, "\n")
			switch {
			case c.want == "" && r.Outcome != Pass:
				t.Errorf("%v: want pass, got %v: %s", c.shape, r.Outcome, got)
			case c.want != "" && (r.Outcome != Fail || !strings.Contains(got, c.want)):
				t.Errorf("%v: want a violation with %q, got %v: %s", c.shape, c.want, r.Outcome, got)
			}
		})
	}
}
