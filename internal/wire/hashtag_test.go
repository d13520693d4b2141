package wire

import "testing"

// TestHashTagRule: Redis Cluster's rule (cluster.c keyHashSlot): the bytes
// between the first '{' and the first '}' after it, when there are any.
func TestHashTagRule(t *testing.T) {
	for _, c := range []struct {
		key            string
		tag, slottable bool
		base           string
	}{
		{"lock", false, true, "{lock}"},
		{"{t}", true, true, "{t}"},
		{"a{t}b", true, true, "a{t}b"},
		{"locks:{x}:y", true, true, "locks:{x}:y"},
		{"{t}{u}", true, true, "{t}{u}"},
		{"a{b", false, true, "{a{b}"},
		{"a{}b", false, false, "{a{}b}"},
		{"{}x}", false, false, "{{}x}}"},
		{"a}b", false, false, "{a}b}"},
		{"}{x}", true, true, "}{x}"},
		{"", false, true, "{}"},
	} {
		if got := HasTag(c.key); got != c.tag {
			t.Errorf("HasTag(%q) = %v, want %v", c.key, got, c.tag)
		}
		if got := Slottable(c.key); got != c.slottable {
			t.Errorf("Slottable(%q) = %v, want %v", c.key, got, c.slottable)
		}
		if got := Base(c.key); got != c.base {
			t.Errorf("Base(%q) = %q, want %q", c.key, got, c.base)
		}
	}
}
