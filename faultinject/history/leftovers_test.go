package history

import (
	"strings"
	"testing"
)

// TestLeftovers: a leftover is excused only by a refused release or a
// straggler past the guard of the same value on the same master; anything
// one TTL later breaks KeysExpire.
func TestLeftovers(t *testing.T) {
	refused := Event{Kind: ReleaseRefused, At: 100 * ms, Token: "v", Node: 1}
	left := Event{Kind: Leftover, At: 900 * ms, Lock: "l", Token: "v", Node: 2, Note: "key l"}
	f := Check([]Event{refused, left})
	vs := f.Of(&NoOrphans)
	if len(vs) != 1 || vs[0].What != "orphan key l on m2 after every client closed" {
		t.Fatalf("a release refused by another master excuses nothing; got:\n%s", whats(f.Violations))
	}
	left.Node = 1
	if f := Check([]Event{refused, left}); len(f.Violations) != 0 {
		t.Errorf("a release refused on that master: %s", whats(f.Violations))
	}
	out := Check([]Event{refused, {Kind: Outlived, At: 2000 * ms, Lock: "l", Token: "v", Node: 1, Note: "key l"}})
	if vs := out.Of(&KeysExpire); len(vs) != 1 || !strings.Contains(vs[0].What, "one TTL after") {
		t.Errorf("a key one TTL later, excused or not: got:\n%s", whats(out.Violations))
	}
}

// TestLeftoverOfARestoredEntry: a line entry that came back with a lost AOF
// tail excuses its own value on its own master, nothing else.
func TestLeftoverOfARestoredEntry(t *testing.T) {
	restored := Event{Kind: Restored, At: 100 * ms, Lock: "l", Token: "v", Node: 1, Note: "waiter c1.0001, removed at 60ms"}
	for _, c := range []struct {
		node  int
		token string
		want  int
	}{{1, "v", 0}, {2, "v", 1}, {1, "w", 1}} {
		left := Event{Kind: Leftover, At: 900 * ms, Lock: "l", Token: c.token, Node: c.node, Note: "key l"}
		f := Check([]Event{restored, left})
		if got := len(f.Of(&NoOrphans)); got != c.want || len(f.Violations) != c.want {
			t.Errorf("%s on m%d after %s on m1: %d no-orphans violations, want %d:\n%s", c.token, c.node, restored.Token, got, c.want, whats(f.Violations))
		}
	}
}
