package nodetest

import (
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// The checks of the one-round-trip handoff (redlock.QueueNode,
// docs/handoff.md): each entry of a lock's line records the value and TTL
// of its waiter's latest AcquireQueued; a Release that deletes the key, or
// a LeaveQueue that leaves it free, hands the key to the line's first live
// waiter (the key is set to its recorded value for its recorded TTL, the
// record is deleted, a grant record names it; the waiter keeps its place);
// that waiter's next AcquireQueued with another value takes the key over
// and takes it out of the line; its LeaveQueue releases it and hands it
// on. The checks see who holds a key through Extend, which reports
// whether the key holds a value and never creates it, and through a
// refused Acquire of another value.

// waiterKind makes the waiters of one kind: fair (WithFairQueue) or plain.
type waiterKind struct {
	name string
	at   func(id string, ms int, ttl time.Duration) redlock.Waiter
}

// waiterKinds are both kinds: the handoff is the same for both.
var waiterKinds = []waiterKind{{"fair", waiterAt}, {"plain", lineAt}}

// holds records a failure unless key holds value (an Extend of it, to
// long, succeeds).
func (c *checker) holds(key, value, why string) {
	c.want(c.extend(key, value, long), true, why)
}

// holdsNot records a failure when key holds value (an Extend of it
// succeeds; a failed Extend changes nothing).
func (c *checker) holdsNot(key, value, why string) {
	c.want(c.extend(key, value, long), false, why)
}

// expire makes key, held by value, expire now (an Extend to a millisecond)
// and waits until it is gone. A key that expires hands nothing over, so
// this frees a key whose line has waiters.
func (c *checker) expire(key, value string) {
	c.want(c.extend(key, value, time.Millisecond), true, fmt.Sprintf("%s holds the key", q(value)))
	c.eventually(fmt.Sprintf("%s, held by %s with a TTL of 1ms, expires", q(key), q(value)),
		func() bool { return !c.extend(key, value, time.Millisecond) })
}

// handOver: a release that deletes the key hands it to the line's first
// waiter at the value its AcquireQueued recorded; the others wait on, a
// plain waiter as a fair one (the key is not free). The waiter's
// take-over takes it out of the line with no tombstone: the release of the
// key it took over hands the key to the next waiter, and its next
// AcquireQueued enters the line again at its arrival.
func handOver(c *checker) {
	c.needQueue()
	for _, kind := range waiterKinds {
		k := "handed " + kind.name
		w1, w2 := kind.at("w1", 1, long), kind.at("w2", 2, long)
		c.want(c.acquire(k, "holder", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line (nobody was in it)")
		c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the line behind w1")
		c.want(c.release(k, "holder", 0), true, "the holder releases its key")
		c.holds(k, "v1", "the release handed the key to the line's first waiter, w1, at the value its AcquireQueued recorded")
		c.want(c.acquire(k, "other", long), false, "the key was handed to w1: a plain Acquire finds it held")
		c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the release handed the key to w1: w2, in line behind it, finds it held ("+kind.name+" or not)")
		c.want(c.acquireQueued(k, "v1b", long, w1), fenced{true, 0}, "the key holds v1, which the release handed w1: w1 takes it over")
		c.want(c.release(k, "v1b", 0), true, "w1 took the key over at v1b")
		c.holds(k, "v2", "w1 left the line when it took the key over: the release of v1b handed the key to w2")
		c.want(c.acquireQueued(k, "v1c", long, w1), fenced{false, 0}, "v2 holds the key: w1, which left no tombstone, enters the line again")
		c.want(c.release(k, "v2", 0), true, "the key handed to w2 holds v2")
		c.holds(k, "v1c", "w1 left no tombstone when it took the key over: its next AcquireQueued entered the line again at its arrival (ahead of w2, which keeps its place), and the release handed it the key at its new value")
	}
}

// handedToFirst watches k, has a holder take it with w1 (v1) and w2 (v2,
// behind it) in its line, and releases it: the release hands the key to
// w1 (checked by the caller).
func (c *checker) handedToFirst(k string) (*watched, redlock.Waiter, redlock.Waiter) {
	w := c.watch(k)
	w1, w2 := waiterAt("w1", 1, long), waiterAt("w2", 2, long)
	c.want(c.acquire(k, "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
	c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the line behind w1")
	c.want(c.release(k, "holder", 0), true, "the holder releases its key")
	return w, w1, w2
}

// handOverKeepsPlace: the waiter a release hands the key to keeps its
// place in the line until it takes the key over, leaves, or releases the
// handed value: when the handed key expires (nobody came for it), the key
// is free, and a fair waiter behind it cannot take it while its entry
// lives; its next AcquireQueued takes the free key in its turn.
func handOverKeepsPlace(c *checker) {
	c.needQueue()
	c.needWatch()
	const k = "watched keeps place" // a Watch check's key: released by no other check
	w, w1, w2 := c.handedToFirst(k)
	c.wantNote(w, 0, wire.Grant("w1", "v1"), c.last, "the release handed the key to w1 at v1: the notification names it and the value")
	c.holds(k, "v1", "the release handed the key to w1")
	c.expire(k, "v1")
	c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key handed to w1 expired, but w1's entry lives, first in line: fair w2 waits")
	c.want(c.acquireQueued(k, "v1b", long, w1), fenced{true, 0}, "w1 is still first in line: it takes the free key")
	c.want(c.release(k, "v1b", 0), true, "w1 holds the key")
	c.wantNote(w, 1, wire.Grant("w2", "v2"), c.last, "w1 left the line when it acquired: the release hands the key to w2 and names it (the expiry reported nothing)")
	c.holds(k, "v2", "w1 left the line when it acquired: the release handed the key to w2")
}

// handedReleaseRetires: a release of the value a release handed a waiter
// (whose call held the lock with the hand-overs it heard: docs/handoff.md)
// takes that waiter out of the line, as an acquire does, and hands the key
// to the next one: the holder is not named again.
func handedReleaseRetires(c *checker) {
	c.needQueue()
	c.needWatch()
	const k = "watched retires" // a Watch check's key: released by no other check
	w, _, _ := c.handedToFirst(k)
	c.wantNote(w, 0, wire.Grant("w1", "v1"), c.last, "the release handed the key to w1 at v1")
	c.want(c.release(k, "v1", 0), true, "the key handed to w1 holds v1 (its call held with it)")
	c.wantNote(w, 1, wire.Grant("w2", "v2"), c.last, "the release of the handed value took w1 out of the line: the key goes to w2, and the notification names w2, not w1")
	c.holds(k, "v2", "the release of the handed value handed the key on to w2")
	c.want(c.release(k, "v2", 0), true, "the key handed to w2 holds v2 (its call held with it)")
	c.want(c.acquire(k, "other", long), true, "w1 and w2 left the line at the releases of the values handed to them: the last release handed nobody the key")
}

// handOverRecordsLatestValue: the hand-over uses the value of the waiter's
// latest AcquireQueued, not its first.
func handOverRecordsLatestValue(c *checker) {
	c.needQueue()
	for _, kind := range waiterKinds {
		k := "recorded " + kind.name
		w1, w2 := kind.at("w1", 1, long), kind.at("w2", 2, long)
		c.want(c.acquire(k, "holder", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the line")
		c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line, first")
		c.want(c.acquireQueued(k, "v1b", long, w1), fenced{false, 0}, "the key is held: w1 waits on")
		c.want(c.acquireQueued(k, "v2b", long, w2), fenced{false, 0}, "the key is held: w2 waits on")
		c.want(c.release(k, "holder", 0), true, "the holder releases its key")
		c.holdsNot(k, "v1", "the entry records the value of its waiter's latest AcquireQueued: v1 was replaced by v1b")
		c.holds(k, "v1b", "the release handed the key to w1 at the value of its latest AcquireQueued")
		c.want(c.acquireQueued(k, "v1c", long, w1), fenced{true, 0}, "the key holds v1b, which the release handed w1: w1 takes it over (and leaves the line)")
		c.want(c.release(k, "v1c", 0), true, "w1 took the key over at v1c")
		c.holdsNot(k, "v2", "the entry records the value of its waiter's latest AcquireQueued: v2 was replaced by v2b")
		c.holds(k, "v2b", "the release of the key w1 took over handed it to w2 at the value of its latest AcquireQueued")
	}
}

// handOverTTL: the key handed over lives the TTL of its waiter's latest
// AcquireQueued (a TTL that would not end during the check otherwise).
func handOverTTL(c *checker) {
	c.needQueue()
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "handed for a while" + attempt
		w1 := waiterAt("w1", 1, long)
		c.acquire(k, "holder", long)
		entered := c.rec(c.acquireQueued(k, "v1", long, w1))
		renewed := c.rec(c.acquireQueued(k, "v1", ttl, w1))
		quick := stopwatch()
		c.release(k, "holder", 0)
		held := c.rec(c.acquire(k, "other", long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(entered, fenced{false, 0}, "the key is held: w1 enters the line")
		c.wantRec(renewed, fenced{false, 0}, "the key is held: w1 waits on, its entry now recording a TTL of "+ttl.String())
		c.wantRec(held, false, fmt.Sprintf("the release handed the key to w1 for the TTL its latest AcquireQueued recorded (%v), which has not passed", ttl))
		c.eventually(fmt.Sprintf("the key %s handed to w1 expires after the TTL of w1's latest AcquireQueued (%v, the first recorded %v): another value takes it", q(k), ttl, long),
			func() bool { return c.acquire(k, "other", long) })
		return true
	})
}

// handOverSkipsExpired: the hand-over goes to the line's first live
// waiter; an entry that expired is passed over. A second lock, whose
// entries expire no sooner than the first lock's, tells when the expiry
// has come (its name has the same hash tag: on a cluster both live on one
// master, on one clock).
func handOverSkipsExpired(c *checker) {
	c.needQueue()
	const k, clock = "{handoff}past expired", "{handoff}expiry clock"
	ttl := shortTTLs[0]
	w1, w2 := waiterAt("w1", 1, ttl), waiterAt("w2", 2, long)
	c.want(c.acquire(k, "holder", long), true, "a free key is taken")
	c.want(c.acquire(clock, "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, fmt.Sprintf("the key is held: w1 enters the line, its entry living %v", ttl))
	c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the line behind w1")
	// The clock's line: c1 entered after w1, with the same TTL, so its
	// entry expires no sooner than w1's; c2 takes the free key once it has.
	c1, c2 := waiterAt("c1", 1, ttl), waiterAt("c2", 2, long)
	c.want(c.acquireQueued(clock, "c1", long, c1), fenced{false, 0}, "the key is held: c1 enters the line")
	c.want(c.acquireQueued(clock, "c2", long, c2), fenced{false, 0}, "the key is held: c2 enters the line")
	c.expire(clock, "holder")
	c.eventually(fmt.Sprintf("c1's entry in the line of %s (TTL %v) expires: c2 takes the free key", q(clock), ttl),
		func() bool { return c.acquireQueued(clock, "c2", long, c2).ok })
	c.want(c.release(k, "holder", 0), true, "the holder releases its key")
	c.holdsNot(k, "v1", "w1's entry had expired (it entered before c1, with the same TTL): the release hands nothing to it")
	c.holds(k, "v2", "the release handed the key to the line's first live waiter, w2")
}

// takeOver: the AcquireQueued of a waiter that finds the key a release
// handed it sets the key to its new value and reports it acquired, also
// when another waiter is first in line by then (fair or not); it needs
// that grant: a later AcquireQueued of the same waiter finds the key its
// own take-over set, not one a release handed it, and is refused.
func takeOver(c *checker) {
	c.needQueue()
	for _, kind := range waiterKinds {
		k := "taken over " + kind.name
		w0, w1 := kind.at("w0", 0, long), kind.at("w1", 1, long)
		c.want(c.acquire(k, "holder", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
		c.want(c.release(k, "holder", 0), true, "the holder releases its key")
		c.holds(k, "v1", "the release handed the key to w1")
		c.want(c.acquireQueued(k, "v0", long, w0), fenced{false, 0}, "the key was handed to w1: w0 enters the line, first (it arrived first)")
		c.want(c.acquireQueued(k, "v1b", long, w1), fenced{true, 0}, "the key holds v1, which a release handed w1: w1 takes it over (though w0 is first in line now, ahead of w1)")
		c.holdsNot(k, "v1", "the take-over set the key to w1's new value")
		c.holds(k, "v1b", "the take-over set the key to w1's new value")
		c.want(c.acquireQueued(k, "v1c", long, w1), fenced{false, 0}, "v1b holds the key, set by w1's take-over, not by a release: no take-over without a grant")
		c.want(c.release(k, "v1b", 0), true, "w1 holds the key")
		c.holds(k, "v0", "the release of the key w1 took over hands it to the line's first waiter, w0")
	}
}

// takeOverLeavesLine: the take-over takes its waiter out of the line (it
// kept its place from the hand-over until then): the release of the key
// it took over hands the key to the waiter behind it, fair or not.
func takeOverLeavesLine(c *checker) {
	c.needQueue()
	for _, kind := range waiterKinds {
		k := "taken over, out " + kind.name
		w1, w2 := kind.at("w1", 1, long), kind.at("w2", 2, long)
		c.want(c.acquire(k, "holder", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
		c.want(c.release(k, "holder", 0), true, "the holder releases its key")
		c.holds(k, "v1", "the release handed the key to w1")
		c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key was handed to w1: w2 enters the line behind it")
		c.want(c.acquireQueued(k, "v1b", long, w1), fenced{true, 0}, "the key holds v1, which a release handed w1: w1 takes it over")
		c.want(c.release(k, "v1b", 0), true, "w1 took the key over at v1b")
		c.holds(k, "v2", "w1 left the line when it took the key over: the release handed the key to w2 (had w1 stayed, first and without a record, the release would have handed nothing)")
	}
}

// handedValueAcquired: an AcquireQueued of the waiter with the very value
// a release handed it (a retried copy of the call whose value was handed)
// is acquired and changes nothing (the key keeps the value, the grant
// record stays); as any AcquireQueued that finds the key at its value, it
// takes the waiter out of the line: the release of that value hands the
// key to the next waiter.
func handedValueAcquired(c *checker) {
	c.needQueue()
	w1, w2 := waiterAt("w1", 1, long), waiterAt("w2", 2, long)
	c.want(c.acquire("k", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("k", "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
	c.want(c.acquireQueued("k", "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the line behind w1")
	c.want(c.release("k", "holder", 0), true, "the holder releases its key")
	c.want(c.acquireQueued("k", "v1", long, w1), fenced{true, 0}, "the key holds v1, the value the release handed w1: acquired (a retried copy)")
	c.holds("k", "v1", "an AcquireQueued of the handed value changes nothing")
	c.want(c.extend(wire.GrantKey("k"), wire.Grant("w1", "v1"), long), true, "an AcquireQueued of the handed value is no take-over: the grant record stays")
	c.want(c.release("k", "v1", 0), true, "w1 holds the key")
	c.holds("k", "v2", "w1 left the line when its AcquireQueued found the key at its value: the release handed the key to w2")
}

// takeOverTTL: the take-over sets the key for the new AcquireQueued's TTL
// (the hand-over's, recorded before, would not end during the check).
func takeOverTTL(c *checker) {
	c.needQueue()
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "taken over for a while" + attempt
		w1 := waiterAt("w1", 1, long)
		c.acquire(k, "holder", long)
		entered := c.rec(c.acquireQueued(k, "v1", long, w1))
		c.release(k, "holder", 0)
		quick := stopwatch()
		took := c.rec(c.acquireQueued(k, "v1b", ttl, w1))
		held := c.rec(c.acquire(k, "other", long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(entered, fenced{false, 0}, "the key is held: w1 enters the line, recording a TTL of "+long.String())
		c.wantRec(took, fenced{true, 0}, "the release handed the key to w1: w1 takes it over")
		c.wantRec(held, false, fmt.Sprintf("w1 took the key over for %v, which has not passed", ttl))
		c.eventually(fmt.Sprintf("the key %s that w1 took over for %v (handed to it for %v) expires: another value takes it", q(k), ttl, long),
			func() bool { return c.acquire(k, "other", long) })
		return true
	})
}

// takeOverGuardFirst: a release guard of the new value refuses the
// take-over before anything changes; the grant stays, and an
// AcquireQueued of another value takes the key over.
func takeOverGuardFirst(c *checker) {
	c.needQueue()
	w1 := waiterAt("w1", 1, long)
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
	c.want(c.release("lock", "holder", 0), true, "the holder releases its key")
	c.want(c.release("lock", "late", long), false, "the key was handed to w1 at v1: a release of another value leaves a guard")
	c.holds("lock", "v1", "a release that deletes nothing hands nothing over")
	c.want(c.acquireQueued("lock", "late", long, w1), fenced{false, 0}, "the guard of the key and the new value refuses before the take-over")
	c.holds("lock", "v1", "the refused take-over changed nothing")
	c.want(c.acquireQueued("lock", "v1c", long, w1), fenced{true, 0}, "the refused take-over left the grant: w1 takes the key over with another value")
	c.holds("lock", "v1c", "the take-over set the key to w1's new value")
}

// leaveReleasesHandOver: a LeaveQueue of a waiter whose handed key is still
// there deletes it and hands it to the next waiter; the LeaveQueue of a
// waiter that holds no handed key leaves the key as it is; with nobody
// left in line the key is free.
func leaveReleasesHandOver(c *checker) {
	c.needQueue()
	for _, kind := range waiterKinds {
		k := "left handed " + kind.name
		w1, w2, w3 := kind.at("w1", 1, long), kind.at("w2", 2, long), kind.at("w3", 3, long)
		c.want(c.acquire(k, "holder", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
		c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the line")
		c.want(c.acquireQueued(k, "v3", long, w3), fenced{false, 0}, "the key is held: w3 enters the line")
		c.want(c.release(k, "holder", 0), true, "the holder releases its key")
		c.holds(k, "v1", "the release handed the key to w1")
		c.leaveQueue(k, w3)
		c.holds(k, "v1", "w3, which was handed nothing, left: the key handed to w1 stays")
		c.leaveQueue(k, w1)
		c.holdsNot(k, "v1", "w1 left while the key handed to it was still there: LeaveQueue deletes it")
		c.holds(k, "v2", "w1's LeaveQueue handed the key it released to the line's next waiter, w2 (w3 left)")
		c.want(c.acquireQueued(k, "v2b", long, w2), fenced{true, 0}, "the key was handed to w2: it takes it over")
		c.want(c.release(k, "v2b", 0), true, "w2 holds the key")
		c.want(c.acquireQueued(k, "v4", long, kind.at("w4", 4, long)), fenced{true, 0}, "nobody is in line (w2 took the key over, w1 and w3 left): w4 takes the free key")
		c.want(c.acquireQueued(k, "v5", long, kind.at("w5", 5, long)), fenced{false, 0}, "w4 holds the key: w5 enters the line")
		c.want(c.release(k, "v4", 0), true, "w4 holds the key")
		c.holds(k, "v5", "the release handed the key to w5")
		c.leaveQueue(k, kind.at("w5", 5, long))
		c.want(c.acquire(k, "other", long), true, "w5 left and released the key handed to it, with nobody behind it: the key is free")
	}
}

// leaveKeepsTakenOver: once its waiter took the key over, the key is no
// longer the one a release handed it: a LeaveQueue of that waiter leaves
// it (the holder releases it with Release).
func leaveKeepsTakenOver(c *checker) {
	c.needQueue()
	for _, kind := range waiterKinds {
		k := "taken over, left " + kind.name
		w1 := kind.at("w1", 1, long)
		c.want(c.acquire(k, "holder", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
		c.want(c.release(k, "holder", 0), true, "the holder releases its key")
		c.want(c.acquireQueued(k, "v1b", long, w1), fenced{true, 0}, "the release handed the key to w1: it takes it over")
		c.leaveQueue(k, w1)
		c.holds(k, "v1b", "the key w1 took over holds its new value, which no release handed it: its LeaveQueue leaves it")
	}
}

// leaveHandsToNext: a key that expires hands nothing over; the LeaveQueue
// of the line's first waiter that leaves the key free hands it to the
// next waiter, at its recorded value; a LeaveQueue of a waiter that is not
// first hands nothing over.
func leaveHandsToNext(c *checker) {
	c.needQueue()
	for _, kind := range waiterKinds {
		k := "left free " + kind.name
		w1, w2, w3 := kind.at("w1", 1, long), kind.at("w2", 2, long), kind.at("w3", 3, long)
		c.want(c.acquire(k, "holder", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
		c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the line")
		c.want(c.acquireQueued(k, "v3", long, w3), fenced{false, 0}, "the key is held: w3 enters the line")
		c.expire(k, "holder")
		c.holdsNot(k, "v1", "a key that expires hands nothing over")
		c.leaveQueue(k, w2)
		c.holdsNot(k, "v3", "w2, not first, left: its LeaveQueue hands nothing over")
		c.holdsNot(k, "v1", "w2, not first, left: its LeaveQueue hands nothing over")
		c.leaveQueue(k, w1)
		c.holds(k, "v3", "w1, first, left the key free: its LeaveQueue handed it to the next waiter, w3 (w2 left), at its recorded value")
		c.want(c.acquireQueued(k, "v3b", long, w3), fenced{true, 0}, "the key was handed to w3: it takes it over")
	}
}

// grantKeyName: the grant record lives at wire.GrantKey(k), holding
// wire.Grant(waiter ID, value), from the hand-over until the take-over.
func grantKeyName(c *checker) {
	c.needQueue()
	w1 := waiterAt("w1", 1, long)
	c.want(c.acquire("k", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("k", "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line")
	c.want(c.acquire(wire.GrantKey("k"), "probe", long), true, "nothing was handed over yet: no grant record (a plain SET NX of its name succeeds)")
	c.want(c.release(wire.GrantKey("k"), "probe", 0), true, "the probe holds the key")
	c.want(c.release("k", "holder", 0), true, "the holder releases its key")
	c.want(c.extend(wire.GrantKey("k"), wire.Grant("w1", "v1"), long), true, "the release handed k to w1 at v1: the grant record holds wire.Grant(\"w1\", \"v1\")")
	c.want(c.acquireQueued("k", "v1b", long, w1), fenced{true, 0}, "the release handed the key to w1: it takes it over")
	c.want(c.acquire(wire.GrantKey("k"), "probe", long), true, "the take-over deleted the grant record (a plain SET NX of its name succeeds)")
}

// watchHandOver: a hand-over's notification names the waiter the key was
// handed to; a LeaveQueue that releases a handed key names the waiter it
// hands the key on to, and, as a release nobody waits for, reports nothing
// when nobody is left in line (proved by order: the next notification is a
// later release's, naming a waiter).
func watchHandOver(c *checker) {
	c.needWatch()
	c.needQueue()
	const k = "watched hand-over" // released by no other check (see above)
	w := c.watch(k)
	w1, w2 := waiterAt("w1", 1, long), waiterAt("w2", 2, long)
	c.want(c.acquire(k, "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the line")
	c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the line, first")
	c.want(c.release(k, "holder", 0), true, "the holder releases its key")
	c.wantNote(w, 0, wire.Grant("w1", "v1"), c.last, "the release handed the key to w1 at v1: the notification names it and the value")
	c.holds(k, "v1", "the key was handed to the waiter the notification named")
	c.leaveQueue(k, w1)
	c.wantNote(w, 1, wire.Grant("w2", "v2"), c.last, "w1's LeaveQueue released the key handed to it and handed it on to w2 at v2: the notification names w2 and the value")
	c.holds(k, "v2", "the key was handed on to the waiter the notification named")
	c.leaveQueue(k, w2)
	c.want(c.acquire(k, "other", long), true, "w2 left and released the key handed to it: the key is free")
	c.want(c.acquireQueued(k, "v3", long, waiterAt("w3", 3, long)), fenced{false, 0}, "the key is held: w3 enters the line")
	c.want(c.release(k, "other", 0), true, "the holder releases its key")
	c.wantNote(w, 2, wire.Grant("w3", "v3"), c.last+" (after LeaveQueue of w2, which released the key handed to it with nobody in line)", "a LeaveQueue that releases a handed key with nobody left in line is a release nobody waits for: not reported (it would have said \"\")")
}
