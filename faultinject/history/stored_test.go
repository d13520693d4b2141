package history

import (
	"testing"
	"time"
)

// TestStoredWriteOrder: the resource's own record, in its commit order:
// an older lease's write kept after a newer one's breaks it (whatever the
// harness's timestamps say), as does a write of a token that never held
// the lock; writes kept in lease order do not, nor writes with equal
// tokens in lease order.
func TestStoredWriteOrder(t *testing.T) {
	acq := func(c int, tok string, at int, fence int64) Event {
		return Event{Client: c, Kind: Acquired, At: 100 * ms * time.Duration(at), Until: 100*ms*time.Duration(at) + 50*ms, Token: tok, Fence: fence, Holds: 1}
	}
	stored := func(tok string, seq, fence int64) Event {
		return Event{Kind: Stored, Token: tok, Seq: seq, Fence: fence}
	}
	for _, c := range []struct {
		name string
		ev   []Event
		want int
	}{
		{"in lease order", []Event{acq(0, "a", 0, 1), acq(1, "b", 1, 2), stored("a", 1, 1), stored("b", 2, 2)}, 0},
		{"equal tokens, in lease order", []Event{acq(0, "a", 0, 3), acq(1, "b", 1, 3), stored("a", 1, 3), stored("b", 2, 3)}, 0},
		{"older lease kept last", []Event{acq(0, "a", 0, 3), acq(1, "b", 1, 3), stored("b", 1, 3), stored("a", 2, 3)}, 1},
		{"recorded out of order, kept in order", []Event{acq(0, "a", 0, 1), acq(1, "b", 1, 2), stored("b", 2, 2), stored("a", 1, 1)}, 0},
		{"a token that never held it", []Event{acq(0, "a", 0, 1), stored("x", 1, 9)}, 1},
	} {
		f := Check(c.ev)
		if got := len(f.Of(&StoredWriteOrder)); got != c.want {
			t.Errorf("%s: %d violations, want %d:\n%s", c.name, got, c.want, whats(f.Violations))
		}
	}
}
