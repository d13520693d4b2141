package nodetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// The checks of the capability behind Lock's wake-ups and WithFairQueue,
// redlock.QueueNode: a waiting line per lock (only its first live fair
// waiter may take a free key; a plain waiter in line may take it whatever
// its place, a newcomer only when nobody else is in line; a release hands
// the key to the line's first live waiter: handoff.go) and Watch (a
// notification with the line's first waiter after each release that
// removed something while someone waited). A key is free while waiters
// are in line only once it expired (expire), when nobody was handed it, or
// when a release of a handed value found its waiter first (it keeps its
// place, and its record went with the hand-over). A notification's
// absence is proved by order, never by waiting: a check makes the absent
// notification and a real one whose content differs, and the first
// notification received must be the real one.

func (c *checker) needQueue() {
	if c.qn == nil {
		panic(skipCheck{fmt.Sprintf("%T is not a redlock.QueueNode", c.n)})
	}
}

func (c *checker) needWatch() {
	if c.wn == nil {
		panic(skipCheck{fmt.Sprintf("%T is not a redlock.QueueNode (Watch)", c.n)})
	}
}

// arrivalBase is the checks' time of arrival: waiters arrive ms after it.
var arrivalBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// waiterAt is fair waiter id, arrived ms milliseconds after arrivalBase,
// whose entry lives ttl.
func waiterAt(id string, ms int, ttl time.Duration) redlock.Waiter {
	return redlock.Waiter{ID: id, Arrival: arrivalBase.Add(time.Duration(ms) * time.Millisecond), TTL: ttl, Fair: true}
}

// lineAt is waiterAt for a plain lock's waiter (not Fair).
func lineAt(id string, ms int, ttl time.Duration) redlock.Waiter {
	w := waiterAt(id, ms, ttl)
	w.Fair = false
	return w
}

func waiterString(w redlock.Waiter) string {
	return fmt.Sprintf("Waiter{ID: %s, Arrival: +%v, TTL: %v, Fair: %v}", q(w.ID), w.Arrival.Sub(arrivalBase), w.TTL, w.Fair)
}

func (c *checker) tryAcquireQueued(key, value string, ttl time.Duration, w redlock.Waiter) (fenced, error) {
	c.last = fmt.Sprintf("AcquireQueued(%s, %s, %v, %s)", q(key), q(value), ttl, waiterString(w))
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, fence, err := c.qn.AcquireQueued(ctx, key, value, ttl, w)
	c.zero(err, ok || fence != 0)
	return fenced{ok, fence}, err
}

func (c *checker) acquireQueued(key, value string, ttl time.Duration, w redlock.Waiter) fenced {
	r, err := c.tryAcquireQueued(key, value, ttl, w)
	c.must(err)
	return r
}

func (c *checker) leaveQueue(key string, w redlock.Waiter) {
	c.last = fmt.Sprintf("LeaveQueue(%s, %s)", q(key), waiterString(w))
	ctx, cancel := c.callCtx()
	defer cancel()
	c.must(c.qn.LeaveQueue(ctx, key, w))
}

// watched records the notifications of one Watch.
type watched struct {
	key   string
	mu    sync.Mutex
	notes []string
	stop  func()
}

func (w *watched) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.notes)
}

// watch starts a watch of key (group "") that records its notifications;
// it stops when the check ends.
func (c *checker) watch(key string) *watched { return c.watchGroup(key, "") }

// watchGroup is watch of group's notifications.
func (c *checker) watchGroup(key, group string) *watched {
	w := &watched{key: key}
	c.last = fmt.Sprintf("Watch(%s, %s, fn)", q(key), q(group))
	ctx, cancel := c.callCtx()
	defer cancel()
	stop, err := c.wn.Watch(ctx, key, group, func(next string) {
		if next == "\n" {
			return // a reconnect's word that some may be lost (QueueNode.Watch), not a release
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.notes = append(w.notes, next)
	})
	c.must(err)
	if stop == nil {
		c.fatalf("%s returned a nil stop function and no error", c.last)
	}
	w.stop = stop
	c.atEnd(stop)
	return w
}

// note waits for the i-th notification (from 0) of w and returns it; what
// is the call that should have caused it.
func (c *checker) note(w *watched, i int, what string) string {
	last := c.last
	c.eventually(fmt.Sprintf("notification #%d of Watch(%s) after %s (got %d)", i+1, q(w.key), what, w.count()),
		func() bool { return w.count() > i })
	c.last = last
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.notes[i]
}

// wantNote records a failure when notification i of w is not want.
func (c *checker) wantNote(w *watched, i int, want, what, why string) {
	if got := c.note(w, i, what); got != want {
		c.errorf("Watch(%s): notification #%d = %q, want %q (after %s): %s", q(w.key), i+1, got, want, what, why)
	}
}

// ---- Queue ----

func queueOrder(c *checker) {
	c.needQueue()
	early, late := waiterAt("early", 1, long), waiterAt("late", 2, long)
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "vl", long, late), fenced{false, 0}, "the key is held: late enters the queue")
	c.want(c.acquireQueued("lock", "ve", long, early), fenced{false, 0}, "the key is held: early enters the queue")
	c.want(c.release("lock", "holder", 0), true, "the holder releases its key")
	c.holds("lock", "ve", "early arrived 1ms before late: the queue is ordered by Arrival, not by entry, and the release handed the key to early")
	c.want(c.acquireQueued("lock", "vl", long, late), fenced{false, 0}, "the key was handed to early")
	c.want(c.acquireQueued("lock", "ve", long, early), fenced{true, 0}, "the key holds ve, the value the release handed early (its AcquireQueued's): acquired, and early leaves the queue")
	c.want(c.release("lock", "ve", 0), true, "early holds the key")
	c.holds("lock", "vl", "early left the queue when its AcquireQueued found the key at its value: late is first, and the release handed it the key")
	c.want(c.acquireQueued("lock", "vl", long, late), fenced{true, 0}, "the release handed the key to late at this value: acquired")
}

func queueTies(c *checker) {
	c.needQueue()
	a, b := waiterAt("a", 1, long), waiterAt("B", 1, long)
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "va", long, a), fenced{false, 0}, "the key is held: a enters the queue")
	c.want(c.acquireQueued("lock", "vb", long, b), fenced{false, 0}, "the key is held: B enters the queue")
	c.want(c.release("lock", "holder", 0), true, "the holder releases its key")
	c.holds("lock", "vb", "a and B arrived in the same millisecond: the tie is broken by ID in byte order, and \"B\" < \"a\": the release handed the key to B")
	c.want(c.acquireQueued("lock", "va", long, a), fenced{false, 0}, "the key was handed to B")
	c.want(c.acquireQueued("lock", "vb", long, b), fenced{true, 0}, "the release handed the key to B at this value: acquired")
}

func queueKeepsArrival(c *checker) {
	c.needQueue()
	first, second := waiterAt("first", 5, long), waiterAt("second", 3, long)
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "v1", long, first), fenced{false, 0}, "the key is held: first enters at +5ms")
	c.want(c.acquireQueued("lock", "v2", long, second), fenced{false, 0}, "the key is held: second enters at +3ms")
	moved := first
	moved.Arrival = arrivalBase // a later call of the same waiter claiming an earlier arrival
	c.want(c.acquireQueued("lock", "v1", long, moved), fenced{false, 0}, "the key is held")
	c.want(c.release("lock", "holder", 0), true, "the holder releases its key")
	c.holds("lock", "v2", "an entry keeps its first arrival (+5ms): second (+3ms) is first, and the release handed it the key")
	c.want(c.acquireQueued("lock", "v1", long, moved), fenced{false, 0}, "the key was handed to second")
	c.want(c.acquireQueued("lock", "v2", long, second), fenced{true, 0}, "the release handed the key to second at this value: acquired")
}

func queuePlainAcquire(c *checker) {
	c.needQueue()
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "v", long, waiterAt("w1", 1, long)), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.expire("lock", "holder")
	c.want(c.acquire("lock", "plain", long), true, "the key expired (handing nothing over): Acquire ignores the queue (only AcquireQueued is fair)")
	c.want(c.release("lock", "plain", 0), true, "the plain holder releases its key")
	c.holds("lock", "v", "the release of a plain Acquire's key hands it to the line's first waiter too")
}

func queuePerLock(c *checker) {
	c.needQueue()
	c.want(c.acquire("a", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("a", "v", long, waiterAt("w1", 1, long)), fenced{false, 0}, "the key is held: w1 enters a's queue")
	c.want(c.acquireQueued("b", "v", long, waiterAt("w2", 2, long)), fenced{true, 0}, "a queue is per lock: w2 is first in b's")
}

func queueEntryExpires(c *checker) {
	c.needQueue()
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "expiring" + attempt
		early, late := waiterAt("early", 1, ttl), waiterAt("late", 2, long)
		c.acquire(k, "holder", long)
		quick := stopwatch()
		entered := c.rec(c.acquireQueued(k, "ve", long, early))
		c.expire(k, "holder")
		refused := c.rec(c.acquireQueued(k, "vl", long, late))
		if !quick(ttl) {
			return false
		}
		c.wantRec(entered, fenced{false, 0}, "the key is held: early enters the queue")
		c.wantRec(refused, fenced{false, 0}, fmt.Sprintf("the key is free, but early's entry (TTL %v) lives and it arrived first", ttl))
		c.eventually(fmt.Sprintf("early's entry in the queue of %s, with TTL %v, expires: late takes the free key", q(k), ttl),
			func() bool { return c.acquireQueued(k, "vl", long, late).ok })
		return true
	})
}

func queueLeave(c *checker) {
	c.needQueue()
	early, late := waiterAt("early", 1, long), waiterAt("late", 2, long)
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "ve", long, early), fenced{false, 0}, "the key is held: early enters the queue")
	c.expire("lock", "holder")
	c.want(c.acquireQueued("lock", "vl", long, late), fenced{false, 0}, "the key expired (handing nothing over), but early is first")
	c.leaveQueue("lock", waiterAt("absent", 0, long)) // no error: nothing to remove
	c.want(c.acquireQueued("lock", "vl", long, late), fenced{false, 0}, "LeaveQueue of another waiter left early first")
	c.leaveQueue("lock", early)
	c.holds("lock", "vl", "early, first, left the key free: late is first, and the LeaveQueue handed it the key")
	c.want(c.acquireQueued("lock", "vl", long, late), fenced{true, 0}, "the LeaveQueue handed the key to late at this value: acquired")
}

func queueFence(c *checker) {
	c.needQueue()
	c.want(c.acquireQueued("lock", "v", long, waiterAt("w1", 1, long)), fenced{true, 0}, "the only waiter takes the free key; no counter reads 0")
	if c.f == nil {
		return
	}
	c.want(c.raiseFence("lock", "v", 7), true, "the holder raises the counter")
	c.want(c.acquireQueued("lock", "x", long, waiterAt("w3", 3, long)), fenced{false, 7}, "a refused AcquireQueued reads the counter too")
	c.want(c.release("lock", "v", 0), true, "the holder releases its key")
	c.want(c.acquireQueued("lock", "y", long, waiterAt("w3", 3, long)), fenced{true, 7}, "the release handed the key to w3: its take-over reads the counter too")
	c.want(c.release("lock", "y", 0), true, "w3 holds the key")
	c.want(c.acquireQueued("lock", "w", long, waiterAt("w2", 2, long)), fenced{true, 7}, "AcquireQueued reads the counter as AcquireFenced does")
}

func queueGuard(c *checker) {
	c.needQueue()
	w := waiterAt("w1", 1, long)
	c.want(c.release("lock", "late", long), false, "nothing to release: a guard is left")
	c.want(c.acquireQueued("lock", "late", long, w), fenced{false, 0}, "the guard of key and value refuses, though w1 would be the only waiter and the key is free")
	c.want(c.acquireQueued("lock", "late", long, w), fenced{false, 0}, "the guard stays")
	c.want(c.acquireQueued("lock", "x", long, waiterAt("w2", 2, long)), fenced{true, 0}, "w1, refused by its guard, never entered the queue (it arrived 1ms before w2): w2 is first")
	c.want(c.release("lock", "x", 0), true, "w2 holds the key")
	c.want(c.acquireQueued("lock", "other", long, w), fenced{true, 0}, "the guard refuses no other value")
}

func queueRetriedCopy(c *checker) {
	c.needQueue()
	first, second := waiterAt("first", 1, long), waiterAt("second", 2, long)
	c.want(c.acquireQueued("lock", "v", long, first), fenced{true, 0}, "the only waiter takes the free key")
	c.want(c.acquireQueued("lock", "v", long, first), fenced{true, 0}, "a retried copy reports the key held")
	c.want(c.acquireQueued("lock", "w", long, second), fenced{false, 0}, "v holds the key: second enters the queue")
	c.want(c.acquireQueued("lock", "v", long, first), fenced{true, 0}, "a retried copy reports the key held, also with another waiter in the queue")
	c.want(c.release("lock", "v", 0), true, "the holder releases its key")
	c.holds("lock", "w", "the retried copy left first out of the queue (key held by its value): second is first, and the release handed it the key")
	c.want(c.acquireQueued("lock", "w", long, second), fenced{true, 0}, "the release handed the key to second at this value: acquired")
}

func queueLeavesOnSuccess(c *checker) {
	c.needQueue()
	w1, w2 := waiterAt("w1", 1, long), waiterAt("w2", 2, long)
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the queue")
	c.want(c.release("lock", "holder", 0), true, "the holder releases its key")
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{true, 0}, "the release handed w1 the key at v1: its AcquireQueued of v1 is acquired")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{false, 0}, "w1 holds the key")
	c.want(c.release("lock", "v1", 0), true, "w1 holds the key")
	c.holds("lock", "v2", "w1 left the queue when it acquired: w2 is first, and the release handed it the key")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{true, 0}, "the release handed the key to w2 at this value: acquired")
}

// ---- A plain lock's line ----

// lineNewcomer: a plain waiter that arrives while another is in line joins
// the line behind it, though the key is free; in line, it takes a free key
// whatever its place (a key is free with waiters in line once it expired:
// a release would have handed it to the first).
func lineNewcomer(c *checker) {
	c.needQueue()
	w1, w2 := lineAt("w1", 1, long), lineAt("w2", 2, long)
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{false, 0}, "the key is held: w1 joins the line")
	c.expire("lock", "holder")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{false, 0}, "the key is free, but w2 is a newcomer while w1 waits: it joins the line behind w1")
	c.want(c.acquire("lock", "plain", long), true, "a plain Acquire (a TryLock) ignores the line")
	c.expire("lock", "plain")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{true, 0}, "w2 is in line now: it takes the free key whatever its place (the line binds nobody)")
	c.want(c.release("lock", "v2", 0), true, "w2 holds the key")
	c.holds("lock", "v1", "w1 is in line, first: the release handed it the key")
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{true, 0}, "the release handed the key to w1 at this value: acquired")
}

// lineAlone: a plain waiter alone takes a free key; one that finds the key
// held joins the line, and once nobody else is in line takes the key as a
// newcomer would.
func lineAlone(c *checker) {
	c.needQueue()
	w1, w2 := lineAt("w1", 1, long), lineAt("w2", 2, long)
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{true, 0}, "nobody in line: w1 takes the free key")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{false, 0}, "v1 holds the key: w2 joins the line")
	c.expire("lock", "v1")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{true, 0}, "the key expired (handing nothing over): w2 is in line, alone: it takes the free key")
}

// lineLeavesNoTrace: a waiter, plain or fair, that takes the key with
// nobody in line writes no line keys; one that acquires from the line
// leaves it without a tombstone (a later call of it enters it again).
func lineLeavesNoTrace(c *checker) {
	c.needQueue()
	w1 := lineAt("w1", 1, long)
	c.want(c.acquireQueued("a", "v1", long, w1), fenced{true, 0}, "nobody in line: w1 takes the free key")
	for _, name := range []string{wire.QueueKey("a"), wire.QueueTTLKey("a"), wire.QueueValKey("a"), wire.GrantKey("a")} {
		c.want(c.acquire(name, "probe", long), true, "nobody waited: no line key was written (a plain SET NX of its name succeeds)")
		c.want(c.release(name, "probe", 0), true, "the probe holds the key")
	}
	c.want(c.release("a", "v1", 0), true, "w1 holds the key")
	w2 := waiterAt("f1", 1, long)
	c.want(c.acquireQueued("b", "v2", long, w2), fenced{true, 0}, "nobody in line: the fair waiter takes the free key")
	for _, name := range []string{wire.QueueKey("b"), wire.QueueTTLKey("b"), wire.QueueValKey("b"), wire.GrantKey("b")} {
		c.want(c.acquire(name, "probe", long), true, "a fair waiter that takes a free key nobody waits for leaves no line key, no tombstone")
		c.want(c.release(name, "probe", 0), true, "the probe holds the key")
	}
	c.want(c.acquire("c", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("c", "v3", long, w1), fenced{false, 0}, "the key is held: w1 joins the line")
	c.want(c.release("c", "holder", 0), true, "the holder releases its key")
	c.holds("c", "v3", "w1 is in line, alone: the release handed it the key")
	c.want(c.acquireQueued("c", "v3b", long, w1), fenced{true, 0}, "w1 takes over the key the release handed it")
	c.want(c.release("c", "v3b", 0), true, "w1 holds the key")
	for _, name := range []string{wire.QueueKey("c"), wire.QueueTTLKey("c"), wire.QueueValKey("c"), wire.GrantKey("c")} {
		c.want(c.acquire(name, "probe", long), true, "the waiter handed the key left the line with no trace at its take-over, which deleted the grant record: no line key is left (a plain SET NX of its name succeeds)")
		c.want(c.release(name, "probe", 0), true, "the probe holds the key")
	}
	c.want(c.acquireQueued("c", "v4", long, w1), fenced{true, 0}, "w1 left no tombstone: a later call of it takes the free key as a newcomer alone")
}

// ---- Waiters that left stay out for their TTL ----

func queueLateCopyAfterLeave(c *checker) {
	c.needQueue()
	w1, w2 := waiterAt("w1", 1, long), waiterAt("w2", 2, long)
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the queue")
	c.want(c.release("lock", "holder", 0), true, "the holder releases its key")
	c.leaveQueue("lock", w1)
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{false, 0}, "w1 left the queue (releasing the key handed to it, handed on to w2): a late copy of its AcquireQueued does not enter it again and takes nothing")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{true, 0}, "w1's LeaveQueue handed the key on to w2 at this value: acquired")
	c.want(c.release("lock", "v2", 0), true, "w2 holds the key")
	c.want(c.acquire("lock", "other", long), true, "the late copy of w1 entered nothing (its old arrival would have been first): the release found nobody in line and left the key free")
}

func queueLeaveBeforeEntry(c *checker) {
	c.needQueue()
	w1, w2 := waiterAt("w1", 1, long), waiterAt("w2", 2, long)
	c.leaveQueue("lock", w1) // overtook w1's first AcquireQueued
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{false, 0}, "w1's LeaveQueue came before its first AcquireQueued: w1 stays out, though the key is free and nobody else waits")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{true, 0}, "w1 entered nothing: w2 is the only waiter")
}

// queueRejoinsAfterGrant: a fair waiter that acquires leaves no tombstone
// (the client sends no later call of an ID whose copy may still be on the
// network): after a rollback its next call enters it again at its first
// arrival, ahead of a waiter that came after it.
func queueRejoinsAfterGrant(c *checker) {
	c.needQueue()
	w1, w2 := waiterAt("w1", 1, long), waiterAt("w2", 2, long)
	c.want(c.acquireQueued("lock", "v1", long, w1), fenced{true, 0}, "the only waiter takes the free key")
	c.want(c.release("lock", "v1", 0), true, "w1 holds the key (its attempt is rolled back)")
	c.want(c.acquire("lock", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the queue")
	c.want(c.acquireQueued("lock", "v1b", long, w1), fenced{false, 0}, "the key is held: w1 enters the queue again, at its arrival")
	c.want(c.release("lock", "holder", 0), true, "the holder releases its key")
	c.holds("lock", "v1b", "w1 (arrived 1ms before w2) is first again: a grant leaves no tombstone, and the release handed w1 the key")
	c.want(c.acquireQueued("lock", "v2", long, w2), fenced{false, 0}, "the key was handed to w1")
	c.want(c.acquireQueued("lock", "v1b", long, w1), fenced{true, 0}, "the release handed the key to w1 at this value: acquired")
}

func queueRejoinsAfterTTL(c *checker) {
	c.needQueue()
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "rejoining" + attempt
		w := waiterAt("w1", 1, ttl)
		quick := stopwatch()
		c.leaveQueue(k, w)
		out := c.rec(c.acquireQueued(k, "v", long, w))
		if !quick(ttl) {
			return false
		}
		c.wantRec(out, fenced{false, 0}, fmt.Sprintf("w1 left the queue of %s (TTL %v): it stays out", q(k), ttl))
		c.eventually(fmt.Sprintf("w1, which left the queue of %s with TTL %v, enters it again and takes the free key", q(k), ttl),
			func() bool { return c.acquireQueued(k, "v", long, w).ok })
		return true
	})
}

// ---- Watch ----

func watchRelease(c *checker) {
	c.needWatch()
	c.needQueue()
	const k = "watched release" // released by no other check (see above)
	w := c.watch(k)
	c.want(c.acquire(k, "v", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "x", long, lineAt("w1", 1, long)), fenced{false, 0}, "v holds the key: w1 joins the line")
	c.want(c.acquireQueued(k, "y", long, lineAt("w2", 2, long)), fenced{false, 0}, "v holds the key: w2 joins the line")
	c.want(c.release(k, "v", 0), true, "the holder releases its key")
	c.wantNote(w, 0, wire.Grant("w1", "x"), c.last, "a release names the line's first waiter (and the value it handed it the key at)")
	c.want(c.acquireQueued(k, "x2", long, lineAt("w1", 1, long)), fenced{true, 0}, "the key was handed to w1: it takes it over, and leaves the line")
	c.want(c.release(k, "x2", 0), true, "w1 holds the key")
	c.wantNote(w, 1, wire.Grant("w2", "y"), c.last, "w2 is still in line: each release while someone waits is reported (w1 left the line when it took the key over)")
}

// watchNobodyWaits: a release that deletes a key while nobody is in its
// line is not reported; proved by order: a later release with a waiter in
// line reports its ID, and the first notification must be that one. While
// someone is in line, every release is reported.
func watchNobodyWaits(c *checker) {
	c.needWatch()
	c.needQueue()
	const k = "watched idle" // released by no other check (see above)
	w := c.watch(k)
	c.want(c.acquire(k, "v", long), true, "a free key is taken")
	c.want(c.release(k, "v", 0), true, "the holder releases its key; nobody waited")
	c.want(c.acquire(k, "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "x", long, waiterAt("w1", 1, long)), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.want(c.acquireQueued(k, "x2", long, waiterAt("w2", 2, long)), fenced{false, 0}, "the key is held: w2 enters the queue")
	c.want(c.release(k, "holder", 0), true, "the holder releases its key")
	c.wantNote(w, 0, wire.Grant("w1", "x"), c.last+" (after a release of v, which nobody waited for)", "a release nobody waited for is not reported: v's would have reported \"\"")
	c.expire(k, "x")
	c.want(c.acquire(k, "holder", long), true, "the key handed to w1 expired: a free key is taken")
	c.want(c.release(k, "holder", 0), true, "the holder releases its key; w1 and w2 are still in line")
	c.wantNote(w, 1, "w1", c.last, "while someone is in line, every release is reported: w1, whose handed key expired, kept its place, first (its record went with the hand-over: handed nothing, it is named alone)")
}

func watchNextWaiter(c *checker) {
	c.needWatch()
	c.needQueue()
	const k = "watched next" // released by no other check (see above)
	w := c.watch(k)
	c.want(c.acquire(k, "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "v2", long, waiterAt("w2", 2, long)), fenced{false, 0}, "the key is held: w2 enters the queue")
	c.want(c.acquireQueued(k, "v1", long, waiterAt("w1", 1, long)), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.want(c.release(k, "holder", 0), true, "the holder releases its key")
	c.wantNote(w, 0, wire.Grant("w1", "v1"), c.last, "the first live waiter after the release")
}

func watchNothingDeleted(c *checker) {
	c.needWatch()
	c.needQueue()
	const k = "watched nothing" // released by no other check (see above)
	w := c.watch(k)
	c.want(c.release(k, "nobody", 0), false, "nothing to release")
	c.want(c.release(k, "nobody", long), false, "nothing to release: a guard is left")
	c.want(c.acquire(k, "v", long), true, "a free key is taken")
	c.want(c.release(k, "other", 0), false, "v holds the key")
	c.want(c.extend(k, "v", long), true, "the holder extends its key")
	c.want(c.acquireQueued(k, "x", long, waiterAt("w1", 1, long)), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.want(c.release(k, "v", 0), true, "the holder releases its key")
	c.wantNote(w, 0, wire.Grant("w1", "x"), c.last+" (after Releases that deleted nothing, with no waiter then)", "only a release that deleted something is reported: the ones before would have reported \"\"")
}

func watchReleaseHold(c *checker) {
	c.needWatch()
	c.needShapes()
	const k = "watched hold" // released by no other check (see above)
	w := c.watch(k)
	c.want(c.acquireHold(k, reader("r1"), long), 1, "a free lock is taken")
	c.want(c.acquireHold(k, reader("r2"), long), 2, "holds of one group share the lock")
	c.want(c.releaseHold(k, reader("r1"), 0), true, "the hold is released")
	c.wantNote(w, 0, "", c.last, "a released hold is reported, also when others remain; no queue: no next waiter")
	if c.qn == nil {
		return
	}
	// A queue of w1 (the mutex that held the key expires: a release would
	// hand it to w1), then a release that removes nothing (it would report
	// w1), w1 leaving while the lock is held (nothing to report), and a
	// real release (reporting "").
	c.want(c.releaseHold(k, reader("r2"), 0), true, "the hold is released")
	c.wantNote(w, 1, "", c.last, "a released hold is reported")
	c.want(c.acquire(k, "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "v", long, waiterAt("w1", 1, long)), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.expire(k, "holder")
	c.want(c.acquireHold(k, reader("r3"), long), 1, "AcquireHold ignores the queue")
	c.want(c.releaseHold(k, reader("absent"), 0), false, "nothing to release")
	c.leaveQueue(k, waiterAt("w1", 1, long))
	c.want(c.releaseHold(k, reader("r3"), 0), true, "the hold is released")
	c.wantNote(w, 2, "", c.last+" (after a ReleaseHold that removed nothing while w1 waited, and the expiry of a mutex's key)", "only a release that removed a hold is reported: the one before would have reported \"w1\"")
}

func watchLeaveQueue(c *checker) {
	c.needWatch()
	c.needQueue()
	const k = "watched leave" // released by no other check (see above)
	w := c.watch(k)
	w1, w2, w3 := waiterAt("w1", 1, long), waiterAt("w2", 2, long), waiterAt("w3", 3, long)
	c.want(c.acquire(k, "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "v1", long, w1), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "the key is held: w2 enters the queue")
	c.want(c.release(k, "holder", 0), true, "the holder releases its key")
	c.wantNote(w, 0, wire.Grant("w1", "v1"), c.last, "the first live waiter after the release")
	c.leaveQueue(k, w2)
	c.want(c.acquireQueued(k, "v2", long, w2), fenced{false, 0}, "w2 left: a late copy of its AcquireQueued does not enter it again")
	c.want(c.acquireQueued(k, "v3", long, w3), fenced{false, 0}, "the key was handed to w1: w3 enters the queue")
	c.leaveQueue(k, w1)
	c.wantNote(w, 1, wire.Grant("w3", "v3"), c.last+" (after LeaveQueue of w2, with the key handed to w1)", "w1 left, releasing the key handed to it: the waiter it is handed on to is reported (w3: w2 stayed out); w2's leaving, with the key held, reported nothing (it would have said \"w1\" or \"w3\")")
	// The first waiter leaving a key that expired (no release, nothing
	// handed over) reports the next; one that is not first reports nothing;
	// w3, handed the key, is first until it leaves.
	w4, w5, w6 := waiterAt("w4", 4, long), waiterAt("w5", 5, long), waiterAt("w6", 6, long)
	c.want(c.acquireQueued(k, "v4", long, w4), fenced{false, 0}, "the key was handed to w3: w4 enters the queue")
	c.want(c.acquireQueued(k, "v5", long, w5), fenced{false, 0}, "the key was handed to w3: w5 enters the queue")
	c.want(c.acquireQueued(k, "v6", long, w6), fenced{false, 0}, "the key was handed to w3: w6 enters the queue")
	c.expire(k, "v3")
	c.leaveQueue(k, w4)
	c.leaveQueue(k, w5)
	c.leaveQueue(k, w3)
	c.wantNote(w, 2, wire.Grant("w6", "v6"), c.last+" (after the expiry of the key handed to w3, and LeaveQueue of w4 and w5)", "w3 kept its place when the key was handed to it: w4 and w5 were not first when they left, and reported nothing (w4 first would have said \"w5\"); w3, first, left a free key: the next, w6, is reported; the expiry reported nothing")
}

// watchGroup: a notification naming a waiter whose ID has a group
// ("g1.w1") reaches that group's watches only; one naming an ID without a
// group reaches the watches of group "". Absence proved by order: each
// watch's first notification must be the one meant for it.
func watchGroupOnly(c *checker) {
	c.needWatch()
	c.needQueue()
	const k = "watched group" // released by no other check (see above)
	g1, g2, plain := c.watchGroup(k, "g1"), c.watchGroup(k, "g2"), c.watch(k)
	// Each group's waiter is named by a release (the key handed to it,
	// taken over, then released with nobody in line: no notification);
	// then it waits again on a key that expires and leaves first, with
	// nobody behind it: "" goes to group "".
	for i, id := range []string{"g1.w1", "g2.w2"} {
		wt := lineAt(id, i+1, long)
		ch := []*watched{g1, g2}[i]
		c.want(c.acquire(k, "v", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "x", long, wt), fenced{false, 0}, "v holds the key: "+id+" waits in line")
		c.want(c.release(k, "v", 0), true, "the holder releases its key")
		what := c.last
		if i > 0 {
			what += " (after a release naming g1.w1)"
		}
		c.wantNote(ch, 0, wire.Grant(id, "x"), what, "the release names "+id+", on its group's channel only")
		c.want(c.acquireQueued(k, "x2", long, wt), fenced{true, 0}, "the release handed the key to "+id+": it takes it over, and leaves the line")
		c.want(c.release(k, "x2", 0), true, id+" took the key over; nobody waits now")
		c.want(c.acquire(k, "v", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "y", long, wt), fenced{false, 0}, "v holds the key: "+id+" waits in line again")
		c.expire(k, "v")
		c.leaveQueue(k, wt)
		c.wantNote(plain, i, "", c.last+" (after a release naming "+id+")", "the first waiter left a free key with nobody behind it: \"\" goes to group \"\"; the release naming "+id+" did not")
	}
	c.want(c.acquire(k, "v", long), true, "a free key is taken")
	c.want(c.acquireQueued(k, "z", long, lineAt("w3", 3, long)), fenced{false, 0}, "v holds the key: w3 (no group) waits in line")
	c.want(c.release(k, "v", 0), true, "the holder releases its key")
	c.wantNote(plain, 2, wire.Grant("w3", "z"), c.last, "a waiter without a group is named to group \"\"")
	if n := g1.count(); n != 1 {
		c.errorf("Watch(%s, \"g1\"): %d notifications, want 1: another group's waiters were reported to it", q(k), n)
	}
}

func watchPerKey(c *checker) {
	c.needWatch()
	c.needQueue()
	w := c.watch("watched a")
	c.want(c.acquire("watched b", "v", long), true, "a free key is taken")
	c.want(c.acquireQueued("watched b", "x", long, lineAt("w0", 0, long)), fenced{false, 0}, "v holds the key: w0 waits in b's line")
	c.want(c.release("watched b", "v", 0), true, "the holder releases its key")
	c.want(c.acquire("watched a", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("watched a", "v", long, waiterAt("w1", 1, long)), fenced{false, 0}, "the key is held: w1 enters the queue")
	c.want(c.release("watched a", "holder", 0), true, "the holder releases its key")
	c.wantNote(w, 0, wire.Grant("w1", "v"), c.last+" (after a release of \"watched b\")", "a watch is for one key: the other key's release would have reported \"\"")
}

func watchStop(c *checker) {
	c.needWatch()
	c.needQueue()
	const k = "watched stop" // released by no other check (see above)
	stopped, control := c.watch(k), c.watch(k)
	// A cycle's release is reported; the release of the key w1 took over
	// is not (nobody waits).
	cycle := func() {
		c.want(c.acquire(k, "v", long), true, "a free key is taken")
		c.want(c.acquireQueued(k, "x", long, lineAt("w1", 1, long)), fenced{false, 0}, "v holds the key: w1 is in line")
		c.want(c.release(k, "v", 0), true, "the holder releases its key")
		c.want(c.acquireQueued(k, "x2", long, lineAt("w1", 1, long)), fenced{true, 0}, "the release handed the key to w1: it takes it over")
		c.want(c.release(k, "x2", 0), true, "w1 holds the key")
	}
	cycle()
	c.note(stopped, 0, c.last)
	c.note(control, 0, c.last)
	stopped.stop()
	stopped.stop() // stop may be called more than once
	cycle()
	c.note(control, 1, c.last)
	cycle()
	c.note(control, 2, c.last)
	if n := stopped.count(); n != 1 {
		c.errorf("Watch(%q): %d notifications, want 1: two releases after stop were reported (another watch of the key got them)", k, n)
	}
}

func watchContext(c *checker) {
	c.needWatch()
	const k = "watched ctx" // released by no other check (see above)
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	c.last = fmt.Sprintf("Watch(%q, fn) with a cancelled context", k)
	stop, err := c.wn.Watch(ctx, k, "", func(string) {})
	switch {
	case err == nil:
		if stop != nil {
			stop()
		}
		c.errorf("%s returned no error, want one wrapping context.Canceled", c.last)
	case !errors.Is(err, context.Canceled):
		c.errorf("%s returned %v: want an error wrapping ctx.Err() (context.Canceled)", c.last, err)
	}
}

// ---- Derived keys of the queue ----

// queueName: the keys "{k}:queue" and "{k}:queue:ttl" hold k's queue (and
// "{k}:queue:val" its entries' values, a hash); a lock named like one of
// them meets a sorted set or a hash (Redis: WRONGTYPE), and its failures
// leave k's queue as it was.
func queueName(c *checker) {
	c.needQueue()
	w1, w2 := waiterAt("w1", 1, long), waiterAt("w2", 2, long)
	c.want(c.acquire("k", "holder", long), true, "a free key is taken")
	c.want(c.acquireQueued("k", "x", long, w1), fenced{false, 0}, "the key is held: w1 enters k's queue")
	for _, name := range []string{wire.QueueKey("k"), wire.QueueTTLKey("k"), wire.QueueValKey("k")} {
		_, err := c.tryAcquire(name, "y", long)
		c.wantErr(err, "the name holds k's queue, a sorted set or a hash: Redis's SET NX refuses and its GET answers WRONGTYPE")
	}
	c.want(c.release("k", "holder", 0), true, "the holder releases its key")
	c.holds("k", "x", "k's queue is intact: w1 is first, and the release handed it the key at its recorded value")
	c.want(c.acquireQueued("k", "z", long, w2), fenced{false, 0}, "the key was handed to w1")
	c.want(c.acquireQueued("k", "x", long, w1), fenced{true, 0}, "the release handed the key to w1 at this value: acquired")
	for i, key := range []func(string) string{wire.QueueKey, wire.QueueTTLKey} {
		m := fmt.Sprint("m", i)
		name := key(m)
		c.want(c.acquire(name, "x", long), true, "a free key is taken")
		_, err := c.tryAcquireQueued(m, "v", long, w1)
		c.wantErr(err, fmt.Sprintf("the key of %s's queue holds a mutex: Redis's script answers WRONGTYPE", q(m)))
		c.want(c.acquire(m, "other", long), true, "the failed AcquireQueued took nothing: its queue steps come first")
		c.want(c.acquire(name, "y", long), false, "x still holds the name")
		c.want(c.release(name, "x", 0), true, "x still holds the name")
	}
	// "q" and "{q}" share their queue, {q}:queue.
	c.want(c.acquire("q", "h1", long), true, "a free key is taken")
	c.want(c.acquire("{q}", "h2", long), true, "\"{q}\" is another lock key than \"q\"")
	c.want(c.acquireQueued("q", "a", long, w1), fenced{false, 0}, "the key is held: w1 enters q's queue")
	c.expire("{q}", "h2")
	c.want(c.acquireQueued("{q}", "b", long, w2), fenced{false, 0}, "\"q\" and \"{q}\" share the queue {q}:queue: w1 is first")
	c.leaveQueue("q", w1)
	c.want(c.acquireQueued("{q}", "b", long, w2), fenced{true, 0}, "w1 left the shared queue: w2 is first")
}
