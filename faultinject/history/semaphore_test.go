package history

import (
	"strings"
	"testing"
)

// TestSemaphoreBoundReportsEachExcess: the first moment of each excess,
// with the leases valid then; a hand-over at one instant is none.
func TestSemaphoreBoundReportsEachExcess(t *testing.T) {
	p := func(s, e int) shaped { return shaped{start: s, end: e, limit: 2} }
	f := Check(shapedHistory([]shaped{p(0, 50), p(10, 60), p(20, 30), p(50, 70), p(100, 200), p(110, 200), p(120, 130)}))
	vs := f.Of(&SemaphoreBound)
	if len(vs) != 2 || len(f.Violations) != 2 {
		t.Fatalf("want two excesses (20ms and 120ms), got:\n%s", whats(f.Violations))
	}
	if vs[0].At != 20*ms || vs[1].At != 120*ms || !strings.Contains(vs[0].What, "3 valid leases of a semaphore with K=2 at 20ms: c0 [0s, 50ms], c1 [10ms, 60ms], c2 [20ms, 30ms]") {
		t.Errorf("excesses:\n%s", whats(vs))
	}
}
