package wire

import "testing"

// TestMember: a member splits at its last newline, since a group may hold
// newlines and an id may not (nodetest's group "g\nx" is not group "g").
func TestMember(t *testing.T) {
	for _, c := range []struct{ group, id string }{
		{"r", "tok?pid=1"}, {"g\nx", "2"}, {"", "id"}, {"g\x00", "3"}, {"o:me", ""},
	} {
		m := Member(c.group, c.id)
		g, id, ok := ParseMember(m)
		if !ok || g != c.group || id != c.id {
			t.Errorf("ParseMember(Member(%q, %q)) = %q, %q, %v", c.group, c.id, g, id, ok)
		}
		if !InGroup(m, c.group) {
			t.Errorf("InGroup(%q, %q) = false", m, c.group)
		}
	}
	if Member("r", "x") != "r\nx" {
		t.Errorf("Member(r, x) = %q, want %q", Member("r", "x"), "r\nx")
	}
	if InGroup(Member("g\nx", "2"), "g") || InGroup("g\n", "h") || InGroup("no newline", "no newline") {
		t.Error("InGroup: a member of group g\\nx, or of group g, is in no other group; a string without a newline is no member")
	}
	if _, _, ok := ParseMember("plain"); ok {
		t.Error("ParseMember(plain): a string without a newline is no member")
	}
}

// TestGroups: the groups of redlock's shapes, and their parsing for
// quorumlock status.
func TestGroups(t *testing.T) {
	if OwnerGroup("job 7") != "o:job 7" || SemaphoreGroup(3) != "s:3" || ReaderGroup != "r" || WriterGroup != "w" {
		t.Errorf("groups: %q %q %q %q", OwnerGroup("job 7"), SemaphoreGroup(3), ReaderGroup, WriterGroup)
	}
	if o, ok := GroupOwner(OwnerGroup("job 7")); !ok || o != "job 7" {
		t.Errorf("GroupOwner = %q, %v", o, ok)
	}
	if k, ok := GroupPlaces(SemaphoreGroup(12)); !ok || k != "12" {
		t.Errorf("GroupPlaces = %q, %v", k, ok)
	}
	for _, g := range []string{ReaderGroup, WriterGroup, "other"} {
		if _, ok := GroupOwner(g); ok {
			t.Errorf("GroupOwner(%q): not an owner's group", g)
		}
		if _, ok := GroupPlaces(g); ok {
			t.Errorf("GroupPlaces(%q): not a semaphore's group", g)
		}
	}
}
