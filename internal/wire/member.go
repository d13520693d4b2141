package wire

import (
	"strconv"
	"strings"
)

// A shared lock (reentrant, read-write, semaphore) is a sorted set of holds
// on each node, whose members are Member(group, id) and whose scores are
// the holds' expiries in server milliseconds. Holds of one group share the
// lock, holds of different groups exclude each other. acquire_hold.lua and
// release_hold.lua build the same member in Lua (ARGV[1] .. '\n' ..
// ARGV[2]).

// Member is the sorted-set member of a hold of group with id:
// group+"\n"+id. id has no newline (the nodes refuse one); group may hold
// any byte.
func Member(group, id string) string { return group + "\n" + id }

// ParseMember splits a Member into its group and id, at its last newline
// (a group may contain newlines, an id cannot); ok is false when m has no
// newline.
func ParseMember(m string) (group, id string, ok bool) {
	i := strings.LastIndexByte(m, '\n')
	if i < 0 {
		return "", "", false
	}
	return m[:i], m[i+1:], true
}

// InGroup reports whether m is the Member of a hold of group (without
// allocating).
func InGroup(m, group string) bool {
	g, _, ok := ParseMember(m)
	return ok && g == group
}

// The groups of redlock's lock shapes.
const (
	ReaderGroup = "r" // a read-write lock's readers
	WriterGroup = "w" // a read-write lock's writer
)

// OwnerGroup is the group of a reentrant mutex's holds by owner: "o:"+owner.
func OwnerGroup(owner string) string { return "o:" + owner }

// SemaphoreGroup is the group of the holds of a semaphore of k places:
// "s:"+k. Semaphores with different k exclude each other.
func SemaphoreGroup(k int) string { return "s:" + strconv.Itoa(k) }

// GroupOwner returns the owner of an OwnerGroup, ok false for another group.
func GroupOwner(group string) (owner string, ok bool) {
	return strings.CutPrefix(group, "o:")
}

// GroupPlaces returns the k of a SemaphoreGroup as it is written, ok false
// for another group.
func GroupPlaces(group string) (k string, ok bool) {
	return strings.CutPrefix(group, "s:")
}
