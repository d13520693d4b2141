package main

// A lock that run keeps for --cooldown after its command exited: how run
// marks it in the owner label it stores, and how status tells, from that
// mark, the holder's pid and the keys' TTL, that run is gone and only the
// cooldown holds the lock.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// cooldownMark is what run appends to the owner label it stores when it
// runs with --cooldown: the cooldown and the TTL, which status needs to
// tell a lock kept by its cooldown from one still renewed.
const cooldownMark = "; cooldown="

// cooldownLabel is label with run's cooldown mark.
func cooldownLabel(label string, cooldown, ttl time.Duration) string {
	return fmt.Sprintf("%s%s%v ttl=%v", label, cooldownMark, cooldown, ttl)
}

// parseCooldownLabel splits a stored label into the label given to run and
// the cooldown and TTL of its mark; ok is false for a label without a
// (well-formed) mark, which is returned whole.
func parseCooldownLabel(stored string) (label string, cooldown, ttl time.Duration, ok bool) {
	i := strings.LastIndex(stored, cooldownMark)
	if i < 0 {
		return stored, 0, 0, false
	}
	cd, t, found := strings.Cut(stored[i+len(cooldownMark):], " ttl=")
	if !found {
		return stored, 0, 0, false
	}
	c, err1 := time.ParseDuration(cd)
	d, err2 := time.ParseDuration(t)
	if err1 != nil || err2 != nil || c <= 0 || d <= 0 {
		return stored, 0, 0, false
	}
	return stored[:i], c, d, true
}

// cooldownStat is what status says of a holder that run took with
// --cooldown.
type cooldownStat struct {
	// ForS and TTLS are run's --cooldown and --ttl, in seconds.
	ForS float64 `json:"for_s"`
	TTLS float64 `json:"ttl_s"`
	// Ended: run is gone (its command exited 0, or it died) and the
	// lock is kept by the cooldown alone, until its keys expire. Why says
	// how status knows; LeftMS is the longest TTL left of its keys.
	Ended  bool   `json:"ended"`
	Why    string `json:"why,omitempty"`
	LeftMS int64  `json:"left_ms"`
}

// judgeCooldown fills h.Cooldown when h's label carries run's cooldown
// mark. ttlLeft is the longest TTL left of h's keys on the masters. Run is
// gone when its pid no longer runs on this host (when the holder's host is
// this one), or when its keys have not been renewed for half a TTL: while
// run lives it renews them every third of the TTL, to TTL + cooldown
// (a little more: the lock-delay allows for drift).
func (h *holderStat) judgeCooldown(ttlLeft time.Duration, localHost string) {
	label, cd, ttl, ok := parseCooldownLabel(h.Label)
	if !ok {
		return
	}
	h.Label = label
	c := &cooldownStat{ForS: cd.Seconds(), TTLS: ttl.Seconds(), LeftMS: ttlLeft.Milliseconds()}
	switch {
	case h.Host != "" && h.Host == localHost && h.PID > 0 && !pidRuns(h.PID):
		c.Ended, c.Why = true, fmt.Sprintf("pid %d has exited", h.PID)
	case ttlLeft < ttl/2+cd:
		c.Ended, c.Why = true, fmt.Sprintf("its keys have not been renewed for more than half its TTL (%v)", ttl)
	}
	h.Cooldown = c
}

// pidRuns reports whether a process with this pid runs on this host (or
// may: one of another user answers EPERM).
func pidRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// localHostname is this host's name as the library stores it, "" when it
// cannot be read.
func localHostname() string {
	h, _ := os.Hostname()
	return h
}

// cooldownNote is status's line on a holder taken with --cooldown.
func (h holderStat) cooldownNote() string {
	c := h.Cooldown
	cd := time.Duration(c.ForS * float64(time.Second))
	if c.Ended {
		return fmt.Sprintf("in its cooldown: %s; run --cooldown %v keeps the lock held until its keys expire (%v left), then it is free",
			c.Why, cd, (time.Duration(c.LeftMS) * time.Millisecond).Round(time.Millisecond))
	}
	return fmt.Sprintf("run with --cooldown %v: renewed while its command runs; after the command exits 0 the lock stays held %v more, with no process", cd, cd)
}
