package wire

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// A waiter ID names one waiting Lock call in a lock's waiting line
// (QueueKey) and in a shared lock's waiting marks (WaitingKey): its
// client's group, ".", and random digits. A release notification naming a
// waiter goes to the Channel of its group, so that only its client hears
// of it (release.lua's channel(): the group is the part before the first
// ".").

// NewWaiterID returns a fresh waiter ID of group: group, ".", 24 random
// hexadecimal digits. group must not contain "." or a newline.
func NewWaiterID(group string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails: Go 1.24+ crashes the program instead
	return group + "." + hex.EncodeToString(b[:])
}

// WaiterGroup returns the group of waiter ID id, the part before its first
// ".", or "" when it has none (then notifications naming it go to the
// lock's Channel without a group).
func WaiterGroup(id string) string {
	g, _, _ := strings.Cut(id, ".")
	if len(g) == len(id) {
		return ""
	}
	return g
}

// ValidWaiterID reports whether the nodes take id as a waiter ID: not
// empty, no newline (a member of the waiting marks must not read as a
// hold's Member).
func ValidWaiterID(id string) bool {
	return id != "" && strings.IndexByte(id, '\n') < 0
}
