package wire

import (
	"strings"
	"testing"
)

// TestWaiterID: a waiter ID carries its group (as release.lua's channel()
// reads it: the part before the first "."), and is taken by the nodes.
func TestWaiterID(t *testing.T) {
	id := NewWaiterID("0a1b2c3d")
	if g, rest, _ := strings.Cut(id, "."); g != "0a1b2c3d" || len(rest) != 24 || strings.Trim(rest, "0123456789abcdef") != "" {
		t.Errorf("NewWaiterID = %q, want the group, \".\" and 24 hex digits", id)
	}
	if a, b := NewWaiterID("g"), NewWaiterID("g"); a == b {
		t.Error("two waiter IDs are the same")
	}
	if !ValidWaiterID(id) || ValidWaiterID("") || ValidWaiterID("a\nb") {
		t.Error("ValidWaiterID: a new ID is valid; an empty one or one with a newline is not")
	}
	for id, want := range map[string]string{
		"g.123": "g", "g.1.2": "g", "nogroup": "", ".123": "", "": "", "a b.c": "a b",
	} {
		if got := WaiterGroup(id); got != want {
			t.Errorf("WaiterGroup(%q) = %q, want %q", id, got, want)
		}
	}
	if Channel("k", WaiterGroup("g.1")) != "{k}:released:g" || Channel("k", WaiterGroup("x")) != "{k}:released" {
		t.Error("Channel(k, WaiterGroup(id)): a waiter's notifications go to its group's channel")
	}
}
