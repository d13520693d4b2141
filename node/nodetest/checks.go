package nodetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// groups lists the suite's checks. A check that needs a capability the
// node lacks calls needFencing, needShapes, needQueue (...), which skip it.
func groups() []group {
	return []group{
		{"Mutex", []check{
			{"AcquireFree", acquireFree},
			{"AcquireRetriedCopy", acquireRetriedCopy},
			{"TTL", ttlHonoured},
			{"Extend", extendHeld},
			{"ExtendOtherValue", extendOtherValue},
			{"ExtendNeverCreates", extendNeverCreates},
			{"Release", releaseHeld},
			{"ReleaseGuard", releaseGuard},
			{"ReleaseLeavesNoGuard", releaseLeavesNoGuard},
			{"ReleaseGuardExpires", releaseGuardExpires},
			{"Concurrent", concurrentAcquire},
		}},
		{"Fencing", []check{
			{"StartsAtZero", fenceStartsAtZero},
			{"RaiseWhileHeld", raiseWhileHeld},
			{"RaiseOnlyWhileHeld", raiseOnlyWhileHeld},
			{"Max", fenceMax},
			{"ReadWhenRefused", fenceReadWhenRefused},
			{"Retention", fenceRetention},
			{"RetentionRenewed", fenceRetentionRenewed},
		}},
		{"Peek", []check{
			{"Reads", peekReads},
			{"SharedLock", peekSharedLock},
		}},
		{"Shapes", []check{
			{"SharedGroup", sharedGroup},
			{"Exclusion", groupExclusion},
			{"RetriedCopy", holdRetriedCopy},
			{"Limit", holdLimit},
			{"Waiter", waiter},
			{"WaitTTL", waitTTL},
			{"WaiterRefusedByGuard", waiterRefusedByGuard},
			{"WaitingIsPerLock", waitingIsPerLock},
			{"ExtendHold", extendHoldHeld},
			{"ExtendHoldNeverCreates", extendHoldNeverCreates},
			{"ReleaseHold", releaseHoldHeld},
			{"ReleaseHoldGuard", releaseHoldGuard},
			{"HoldsExpireOnTheirOwn", holdsExpireOnTheirOwn},
			{"GroupWithNewline", groupWithNewline},
			{"Concurrent", concurrentHolds},
		}},
		{"Queue", []check{
			{"Order", queueOrder},
			{"Ties", queueTies},
			{"KeepsArrival", queueKeepsArrival},
			{"PlainAcquire", queuePlainAcquire},
			{"PerLock", queuePerLock},
			{"EntryExpires", queueEntryExpires},
			{"Leave", queueLeave},
			{"Fence", queueFence},
			{"Guard", queueGuard},
			{"RetriedCopy", queueRetriedCopy},
			{"LeavesOnSuccess", queueLeavesOnSuccess},
			{"LateCopyAfterLeave", queueLateCopyAfterLeave},
			{"LeaveBeforeEntry", queueLeaveBeforeEntry},
			{"RejoinsAfterGrant", queueRejoinsAfterGrant},
			{"RejoinsAfterTTL", queueRejoinsAfterTTL},
			{"LineNewcomer", lineNewcomer},
			{"LineAlone", lineAlone},
			{"LineLeavesNoTrace", lineLeavesNoTrace},
			{"HandOver", handOver},
			{"HandOverKeepsPlace", handOverKeepsPlace},
			{"HandedReleaseRetires", handedReleaseRetires},
			{"HandOverRecordsLatestValue", handOverRecordsLatestValue},
			{"HandOverTTL", handOverTTL},
			{"HandOverSkipsExpired", handOverSkipsExpired},
			{"TakeOver", takeOver},
			{"TakeOverLeavesLine", takeOverLeavesLine},
			{"HandedValueAcquired", handedValueAcquired},
			{"TakeOverTTL", takeOverTTL},
			{"TakeOverGuardFirst", takeOverGuardFirst},
			{"LeaveReleasesHandOver", leaveReleasesHandOver},
			{"LeaveKeepsTakenOver", leaveKeepsTakenOver},
			{"LeaveHandsToNext", leaveHandsToNext},
		}},
		{"Watch", []check{
			{"Release", watchRelease},
			{"NextWaiter", watchNextWaiter},
			{"NothingDeleted", watchNothingDeleted},
			{"NobodyWaits", watchNobodyWaits},
			{"ReleaseHold", watchReleaseHold},
			{"LeaveQueue", watchLeaveQueue},
			{"PerKey", watchPerKey},
			{"Group", watchGroupOnly},
			{"HandOverNamesWaiter", watchHandOver},
			{"Stop", watchStop},
			{"Context", watchContext},
		}},
		{"Info", []check{
			{"Consistent", infoConsistent},
		}},
		{"Context", []check{
			{"Cancelled", contextCancelled},
			{"DeadlinePassed", deadlinePassed},
		}},
		{"Names", []check{
			{"LongName", longName},
			{"InvalidUTF8", invalidUTF8},
			{"Newline", newlineName},
			{"NUL", nulName},
			{"HashTags", hashTags},
			{"BraceWithoutTag", braceWithoutTag},
			{"OddValues", oddValues},
		}},
		{"Kinds", []check{
			{"MutexThenHold", mutexThenHold},
			{"HoldThenMutex", holdThenMutex},
		}},
		{"DerivedKeys", []check{
			{"FenceCounterName", fenceCounterName},
			{"FenceCounterNameTakenFirst", fenceCounterNameTakenFirst},
			{"WaitingMarkName", waitingMarkName},
			{"TaggedName", taggedName},
			{"GuardKeyName", guardKeyName},
			{"QueueName", queueName},
			{"GrantKeyName", grantKeyName},
		}},
		{"Down", []check{
			{"Down", downServer},
		}},
	}
}

// skipCheck skips a check (needFencing, needShapes, needDown); run
// recovers it.
type skipCheck struct{ why string }

func (c *checker) needFencing() {
	if c.f == nil {
		panic(skipCheck{fmt.Sprintf("%T is not a redlock.FencingNode", c.n)})
	}
}

func (c *checker) needShapes() {
	if c.s == nil {
		panic(skipCheck{fmt.Sprintf("%T is not a redlock.ShapeNode", c.n)})
	}
}

func (c *checker) needDown() {
	if c.down == nil {
		panic(skipCheck{"no down function given to nodetest.Run"})
	}
}

// rec is a call's result kept for a later judgement (see timed checks).
type rec struct {
	got  any
	call string
}

func (c *checker) rec(got any) rec { return rec{got, c.last} }

func (c *checker) wantRec(r rec, want any, why string) {
	if r.got != want {
		c.errorf("%s = %v, want %v: %s", r.call, r.got, want, why)
	}
}

// Holds used by the shape checks.
func reader(id string) redlock.Hold { return redlock.Hold{Group: "readers", ID: id} }

func yieldingReader(id string) redlock.Hold {
	return redlock.Hold{Group: "readers", ID: id, Yield: true}
}

func writer(id string) redlock.Hold { return redlock.Hold{Group: "writer " + id, ID: id, Limit: 1} }

// waitingWriter leaves a waiting mark named after it, for waitTTL, when
// refused.
func waitingWriter(id string, waitTTL time.Duration) redlock.Hold {
	h := writer(id)
	h.Waiter, h.WaitTTL = id, waitTTL
	return h
}

// ---- Mutex ----

func acquireFree(c *checker) {
	c.want(c.acquire("lock", "v", long), true, "a free key is taken")
	c.want(c.acquire("lock", "w", long), false, "a key held by another value is refused")
	c.want(c.acquire("other", "w", long), true, "another key is another lock")
	c.want(c.release("lock", "v", 0), true, "the first value still holds the key")
}

func acquireRetriedCopy(c *checker) {
	c.want(c.acquire("lock", "v", long), true, "a free key is taken")
	c.want(c.acquire("lock", "v", long), true, "a retried copy of the acquire reports the key held")
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "retried" + attempt
		quick := stopwatch()
		first := c.rec(c.acquire(k, "v", ttl))
		again := c.rec(c.acquire(k, "v", long))
		other := c.rec(c.acquire(k, "w", long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, true, "a free key is taken")
		c.wantRec(again, true, "a retried copy reports the key held")
		c.wantRec(other, false, "the key is held within its TTL")
		c.eventually(fmt.Sprintf("key %s, set with TTL %v and acquired again by the same value with TTL %v, is free after the first TTL (a retried copy leaves the TTL as it was)", q(k), ttl, long),
			func() bool { return c.acquire(k, "w", long) })
		return true
	})
}

func ttlHonoured(c *checker) {
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "ttl" + attempt
		quick := stopwatch()
		first := c.rec(c.acquire(k, "v", ttl))
		other := c.rec(c.acquire(k, "w", long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, true, "a free key is taken")
		c.wantRec(other, false, "the key is held within its TTL (TTLs are durations, not seconds or microseconds)")
		c.eventually(fmt.Sprintf("key %s, set with TTL %v, is free after it", q(k), ttl),
			func() bool { return c.acquire(k, "w", long) })
		c.want(c.release(k, "v", 0), false, "the expired value no longer holds the key")
		c.want(c.release(k, "w", 0), true, "the key is the new holder's")
		return true
	})
}

func extendHeld(c *checker) {
	c.timed(func(ttl time.Duration, attempt string) bool {
		k, s := "{extend"+attempt+"}", "{extend"+attempt+"}sentinel" // one hash tag: one Cluster shard, one clock
		quick := stopwatch()
		first := c.rec(c.acquire(k, "v", ttl))
		sentinel := c.rec(c.acquire(s, "v", ttl))
		extended := c.rec(c.extend(k, "v", long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, true, "a free key is taken")
		c.wantRec(sentinel, true, "a free key is taken")
		c.wantRec(extended, true, "the holder extends its key")
		c.eventually(fmt.Sprintf("sentinel key %s, set with TTL %v after %s, is free after it", q(s), ttl, q(k)),
			func() bool { return c.acquire(s, "probe", long) })
		c.want(c.acquire(k, "w", long), false, "the extended key outlives the TTL it was set with")
		c.want(c.release(k, "v", 0), true, "the extended key is still the holder's")
		return true
	})
}

func extendOtherValue(c *checker) {
	c.want(c.acquire("lock", "v", long), true, "a free key is taken")
	c.want(c.extend("lock", "w", long), false, "only the holder extends a key")
	c.want(c.release("lock", "v", 0), true, "another value's Extend leaves the key to its holder")
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "other" + attempt
		quick := stopwatch()
		first := c.rec(c.acquire(k, "v", ttl))
		extended := c.rec(c.extend(k, "w", long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, true, "a free key is taken")
		c.wantRec(extended, false, "only the holder extends a key")
		c.eventually(fmt.Sprintf("key %s, set with TTL %v, is free after it (another value's Extend did not extend it)", q(k), ttl),
			func() bool { return c.acquire(k, "w", long) })
		return true
	})
}

func extendNeverCreates(c *checker) {
	c.want(c.extend("absent", "v", long), false, "nothing to extend")
	c.want(c.acquire("absent", "w", long), true, "Extend did not create the key")
	c.timed(func(ttl time.Duration, attempt string) bool {
		k, s := "{expired"+attempt+"}", "{expired"+attempt+"}sentinel" // one hash tag: one Cluster shard, one clock
		quick := stopwatch()
		first := c.rec(c.acquire(k, "v", ttl))
		sentinel := c.rec(c.acquire(s, "v", ttl))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, true, "a free key is taken")
		c.wantRec(sentinel, true, "a free key is taken")
		c.eventually(fmt.Sprintf("sentinel key %s, set with TTL %v after %s, is free after it", q(s), ttl, q(k)),
			func() bool { return c.acquire(s, "probe", long) })
		c.want(c.extend(k, "v", long), false, "an expired key is not extended")
		c.want(c.acquire(k, "w", long), true, "Extend did not bring the expired key back")
		return true
	})
}

func releaseHeld(c *checker) {
	c.want(c.acquire("lock", "v", long), true, "a free key is taken")
	c.want(c.release("lock", "w", 0), false, "only the holder releases a key")
	c.want(c.acquire("lock", "w", long), false, "another value's Release left the key to its holder")
	c.want(c.release("lock", "v", 0), true, "the holder releases its key")
	c.want(c.release("lock", "v", 0), false, "the key is released already")
	c.want(c.acquire("lock", "w", long), true, "a released key is free")
}

func releaseGuard(c *checker) {
	c.want(c.release("lock", "late", long), false, "nothing to release: a guard is left")
	c.want(c.acquire("lock", "late", long), false, "the guard refuses a later acquire of the same key and value")
	c.want(c.acquire("lock", "late", long), false, "the guard stays")
	c.want(c.acquire("lock", "w", long), true, "the guard refuses no other value")
	c.want(c.acquire("elsewhere", "late", long), true, "a guard is for one key")
	c.want(c.release("lock", "x", long), false, "w holds the key: x's Release leaves a guard")
	c.want(c.acquire("lock", "probe", long), false, "w still holds the key")
	c.want(c.release("lock", "w", 0), true, "w still holds the key")
	c.want(c.acquire("lock", "x", long), false, "the guard left while w held the key refuses x")
	c.want(c.acquire("lock", "y", long), true, "and no other value")
}

func releaseLeavesNoGuard(c *checker) {
	c.want(c.acquire("lock", "v", long), true, "a free key is taken")
	c.want(c.release("lock", "v", long), true, "the holder releases its key")
	c.want(c.acquire("lock", "v", long), true, "a Release that deleted the key leaves no guard")
	c.want(c.release("free", "v", 0), false, "nothing to release")
	c.want(c.acquire("free", "v", long), true, "a Release with guard 0 leaves no guard")
}

func releaseGuardExpires(c *checker) {
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "guarded" + attempt
		quick := stopwatch()
		released := c.rec(c.release(k, "v", ttl))
		refused := c.rec(c.acquire(k, "v", long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(released, false, "nothing to release: a guard is left")
		c.wantRec(refused, false, "the guard refuses the same value within its TTL")
		c.eventually(fmt.Sprintf("the guard of key %s, left for %v, ends after it", q(k), ttl),
			func() bool { return c.acquire(k, "v", long) })
		return true
	})
}

// concurrently runs f(i) for i in [0, n) on n goroutines and waits for them.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

const racers = 8

func concurrentAcquire(c *checker) {
	for round := range 5 {
		k := fmt.Sprintf("race%d", round)
		oks := make([]bool, racers)
		errs := make([]error, racers)
		concurrently(racers, func(i int) {
			ctx, cancel := c.callCtx()
			defer cancel()
			oks[i], errs[i] = c.n.Acquire(ctx, k, fmt.Sprint("v", i), long)
		})
		var winners []string
		for i := range racers {
			if errs[i] != nil {
				c.fatalf("Acquire(%s, %q, %v) on one of %d goroutines at once: unexpected error: %v", q(k), fmt.Sprint("v", i), long, racers, errs[i])
			}
			if oks[i] {
				winners = append(winners, fmt.Sprint("v", i))
			}
		}
		if len(winners) != 1 {
			c.fatalf("%d goroutines called Acquire(%s, v<i>, %v) at once: %d got the key (%v), want exactly 1", racers, q(k), long, len(winners), winners)
		}
		c.want(c.release(k, winners[0], 0), true, "the winner holds the key")
	}
}

// ---- Fencing ----

func fenceStartsAtZero(c *checker) {
	c.needFencing()
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 0}, "a lock without a counter reads 0")
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 0}, "a retried copy reports the key held")
	c.want(c.acquireFenced("lock", "w", long), fenced{false, 0}, "a key held by another value is refused")
	c.want(c.acquire("lock", "w", long), false, "AcquireFenced's key is the lock's key")
	c.want(c.release("lock", "v", 0), true, "Release releases AcquireFenced's key")
}

func raiseWhileHeld(c *checker) {
	c.needFencing()
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 0}, "a free key is taken")
	c.want(c.raiseFence("lock", "v", 5), true, "the holder raises the counter")
	c.want(c.release("lock", "v", 0), true, "the holder releases its key")
	c.want(c.acquireFenced("lock", "w", long), fenced{true, 5}, "the counter outlives the key")
	c.want(c.acquireFenced("other", "w", long), fenced{true, 0}, "a counter is per lock")
}

func raiseOnlyWhileHeld(c *checker) {
	c.needFencing()
	c.want(c.raiseFence("lock", "v", 5), false, "a free key: nothing held")
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 0}, "a refused raise changes no counter and creates no key")
	c.want(c.raiseFence("lock", "w", 9), false, "another value holds the key")
	c.want(c.raiseFence("lock", "v", 3), true, "the holder raises the counter")
	c.want(c.acquireFenced("lock", "w", long), fenced{false, 3}, "the refused raise of another value left the counter")
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "expiring" + attempt
		quick := stopwatch()
		first := c.rec(c.acquireFenced(k, "v", ttl))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, fenced{true, 0}, "a free key is taken")
		c.eventually(fmt.Sprintf("key %s, set with TTL %v, is free after it", q(k), ttl),
			func() bool { return c.acquire(k, "probe", long) })
		c.want(c.release(k, "probe", 0), true, "the probe holds the key")
		c.want(c.raiseFence(k, "v", 7), false, "an expired key is not held")
		c.want(c.acquireFenced(k, "w", long), fenced{true, 0}, "the raise on an expired key left the counter")
		return true
	})
}

func fenceMax(c *checker) {
	c.needFencing()
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 0}, "a free key is taken")
	c.want(c.raiseFence("lock", "v", 7), true, "the holder raises the counter")
	c.want(c.raiseFence("lock", "v", 3), true, "RaiseFence reports the key held, also when it does not lower the counter")
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 7}, "the counter is max(counter, token): never lowered")
	c.want(c.raiseFence("lock", "v", 1<<40), true, "the holder raises the counter")
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 1 << 40}, "the counter is max(counter, token)")
}

func fenceReadWhenRefused(c *checker) {
	c.needFencing()
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 0}, "a free key is taken")
	c.want(c.raiseFence("lock", "v", 4), true, "the holder raises the counter")
	c.want(c.acquireFenced("lock", "w", long), fenced{false, 4}, "a refused acquire reads the counter too")
	c.want(c.release("lock", "v", 0), true, "the holder releases its key")
	c.want(c.release("lock", "x", long), false, "nothing to release: a guard is left")
	c.want(c.acquireFenced("lock", "x", long), fenced{false, 4}, "the guard refuses AcquireFenced too, which reads the counter")
	c.want(c.acquire("lock", "y", long), true, "a free key is taken")
	c.want(c.acquireFenced("lock", "y", long), fenced{true, 4}, "Acquire's key is a retried copy for AcquireFenced of the same value")
}

// ---- Shapes ----

func sharedGroup(c *checker) {
	c.needShapes()
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "a free lock is taken: 1 live hold of the group")
	c.want(c.acquireHold("lock", reader("r2"), long), 2, "holds of one group share the lock")
	c.want(c.acquireHold("lock", reader("r3"), long), 3, "holds of one group share the lock")
	c.want(c.releaseHold("lock", reader("r2"), 0), true, "the hold is released")
	c.want(c.acquireHold("lock", reader("r4"), long), 3, "r1, r3 and r4 are live")
}

func groupExclusion(c *checker) {
	c.needShapes()
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "a free lock is taken")
	c.want(c.acquireHold("lock", writer("w1"), long), 0, "the readers hold the lock: another group is refused")
	c.want(c.acquireHold("lock", redlock.Hold{Group: "other", ID: "o1"}, long), 0, "another group is refused, limit or not")
	c.want(c.releaseHold("lock", reader("r1"), 0), true, "the hold is released")
	c.want(c.acquireHold("lock", writer("w1"), long), 1, "the lock is free with its last hold gone")
	c.want(c.acquireHold("lock", reader("r1"), long), 0, "the writer holds the lock")
	c.want(c.acquireHold("lock", writer("w2"), long), 0, "the writer holds the lock")
}

func holdRetriedCopy(c *checker) {
	c.needShapes()
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "a free lock is taken")
	c.want(c.acquireHold("lock", reader("r2"), long), 2, "holds of one group share the lock")
	c.want(c.acquireHold("lock", reader("r1"), long), 2, "a retried copy reports the group's live holds, adding none")
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "retried" + attempt
		quick := stopwatch()
		first := c.rec(c.acquireHold(k, reader("r1"), ttl))
		again := c.rec(c.acquireHold(k, reader("r1"), long))
		other := c.rec(c.acquireHold(k, writer("w1"), long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, 1, "a free lock is taken")
		c.wantRec(again, 1, "a retried copy reports the hold")
		c.wantRec(other, 0, "the reader holds the lock within its TTL")
		c.eventually(fmt.Sprintf("lock %s, held with TTL %v and acquired again by the same hold with TTL %v, is free after the first TTL (a retried copy leaves the expiry as it was)", q(k), ttl, long),
			func() bool { return c.acquireHold(k, writer("w1"), long) > 0 })
		return true
	})
}

func holdLimit(c *checker) {
	c.needShapes()
	sem := func(id string, limit int) redlock.Hold { return redlock.Hold{Group: "sem", ID: id, Limit: limit} }
	c.want(c.acquireHold("lock", sem("s1", 2), long), 1, "a free lock is taken")
	c.want(c.acquireHold("lock", sem("s2", 2), long), 2, "below the limit")
	c.want(c.acquireHold("lock", sem("s3", 2), long), 0, "the limit of 2 live holds is reached")
	c.want(c.acquireHold("lock", sem("s1", 2), long), 2, "a retried copy is not refused by the limit")
	c.want(c.releaseHold("lock", sem("s1", 2), 0), true, "the hold is released")
	c.want(c.acquireHold("lock", sem("s3", 2), long), 2, "below the limit again")
	c.want(c.acquireHold("lock", sem("s4", 3), long), 3, "a hold's own limit counts (3 here)")
	c.want(c.acquireHold("lock", sem("s5", 0), long), 4, "limit 0: no limit")
}

func waiter(c *checker) {
	c.needShapes()
	wr := waitingWriter("w1", long)
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "a free lock is taken")
	c.want(c.acquireHold("lock", wr, long), 0, "the readers hold the lock: the writer is refused, leaving a waiting mark")
	c.want(c.acquireHold("lock", yieldingReader("r2"), long), 0, "a yielding reader is refused while a writer waits")
	c.want(c.acquireHold("lock", reader("r3"), long), 2, "a reader that does not yield still shares")
	c.want(c.releaseHold("lock", reader("r1"), 0), true, "the hold is released")
	c.want(c.releaseHold("lock", reader("r3"), 0), true, "the hold is released")
	c.want(c.acquireHold("lock", wr, long), 1, "the waiting writer takes the free lock, and its mark goes")
	c.want(c.releaseHold("lock", wr, 0), true, "the hold is released")
	c.want(c.acquireHold("lock", yieldingReader("r2"), long), 1, "no waiting mark is left once the writer acquired")
}

func waitTTL(c *checker) {
	c.needShapes()
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "waited" + attempt
		held := c.rec(c.acquireHold(k, reader("r1"), long))
		quick := stopwatch()
		refused := c.rec(c.acquireHold(k, waitingWriter("w1", ttl), long))
		yielded := c.rec(c.acquireHold(k, yieldingReader("r2"), long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(held, 1, "a free lock is taken")
		c.wantRec(refused, 0, "the readers hold the lock: the writer is refused, leaving a waiting mark")
		c.wantRec(yielded, 0, "a yielding reader is refused while the mark lives")
		c.eventually(fmt.Sprintf("the waiting mark on %s, left for %v, ends after it", q(k), ttl),
			func() bool { return c.acquireHold(k, yieldingReader("r2"), long) > 0 })
		return true
	})
}

func waiterRefusedByGuard(c *checker) {
	c.needShapes()
	wr := waitingWriter("w1", long)
	c.want(c.releaseHold("lock", wr, long), false, "nothing to release: a guard is left")
	c.want(c.acquireHold("lock", wr, long), 0, "the guard refuses the hold")
	c.want(c.acquireHold("lock", yieldingReader("r1"), long), 1, "an acquire refused by a guard leaves no waiting mark")
}

func waitingIsPerLock(c *checker) {
	c.needShapes()
	c.want(c.acquireHold("a", reader("r1"), long), 1, "a free lock is taken")
	c.want(c.acquireHold("a", waitingWriter("w1", long), long), 0, "the readers hold the lock: the writer leaves a waiting mark")
	c.want(c.acquireHold("b", yieldingReader("r2"), long), 1, "a waiting mark is for one lock")
	c.want(c.acquireHold("yield without marks", yieldingReader("r3"), long), 1, "a yielding reader takes a lock nobody waits for")
}

func extendHoldHeld(c *checker) {
	c.needShapes()
	c.timed(func(ttl time.Duration, attempt string) bool {
		k, s := "{extend"+attempt+"}", "{extend"+attempt+"}sentinel" // one hash tag: one Cluster shard, one clock
		quick := stopwatch()
		first := c.rec(c.acquireHold(k, reader("r1"), ttl))
		second := c.rec(c.acquireHold(k, reader("r2"), ttl))
		sentinel := c.rec(c.acquireHold(s, reader("r1"), ttl))
		extended := c.rec(c.extendHold(k, reader("r1"), long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, 1, "a free lock is taken")
		c.wantRec(second, 2, "holds of one group share the lock")
		c.wantRec(sentinel, 1, "a free lock is taken")
		c.wantRec(extended, true, "the hold is extended")
		c.eventually(fmt.Sprintf("sentinel lock %s, held with TTL %v after %s, is free after it", q(s), ttl, q(k)),
			func() bool { return c.acquireHold(s, writer("w1"), long) > 0 })
		c.want(c.acquireHold(k, reader("r3"), long), 2, "r1 was extended and r2 expired: r1 and r3 are live")
		c.want(c.acquireHold(k, writer("w1"), long), 0, "the extended hold still holds the lock")
		return true
	})
}

func extendHoldNeverCreates(c *checker) {
	c.needShapes()
	c.want(c.extendHold("lock", reader("r1"), long), false, "nothing to extend")
	c.want(c.acquireHold("lock", writer("w1"), long), 1, "ExtendHold created no hold")
	c.want(c.extendHold("lock", reader("r1"), long), false, "another group holds the lock")
	c.want(c.releaseHold("lock", writer("w1"), 0), true, "the hold is released")
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "a free lock is taken")
	c.want(c.extendHold("lock", reader("r2"), long), false, "r2 is not held: holding the group is not enough")
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "ExtendHold of r2 created no hold (a retried copy counts the group's holds)")
	c.timed(func(ttl time.Duration, attempt string) bool {
		k, s := "{expired"+attempt+"}", "{expired"+attempt+"}sentinel" // one hash tag: one Cluster shard, one clock
		quick := stopwatch()
		first := c.rec(c.acquireHold(k, reader("r1"), ttl))
		sentinel := c.rec(c.acquireHold(s, reader("r1"), ttl))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, 1, "a free lock is taken")
		c.wantRec(sentinel, 1, "a free lock is taken")
		c.eventually(fmt.Sprintf("sentinel lock %s, held with TTL %v after %s, is free after it", q(s), ttl, q(k)),
			func() bool { return c.acquireHold(s, writer("w1"), long) > 0 })
		c.want(c.extendHold(k, reader("r1"), long), false, "an expired hold is not extended")
		c.want(c.acquireHold(k, writer("w1"), long), 1, "ExtendHold did not bring the expired hold back")
		return true
	})
}

func releaseHoldHeld(c *checker) {
	c.needShapes()
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "a free lock is taken")
	c.want(c.acquireHold("lock", reader("r2"), long), 2, "holds of one group share the lock")
	c.want(c.releaseHold("lock", reader("r1"), 0), true, "the hold is released")
	c.want(c.releaseHold("lock", reader("r1"), 0), false, "the hold is released already")
	c.want(c.acquireHold("lock", reader("r3"), long), 2, "r2 and r3 are live: a release removes one hold")
	c.want(c.releaseHold("lock", writer("w1"), 0), false, "w1 holds nothing")
	c.want(c.acquireHold("lock", writer("w1"), long), 0, "the readers still hold the lock")
	c.want(c.releaseHold("lock", reader("r2"), 0), true, "the hold is released")
	c.want(c.releaseHold("lock", reader("r3"), 0), true, "the hold is released")
	c.want(c.acquireHold("lock", writer("w1"), long), 1, "the lock is free with its last hold gone")
}

func releaseHoldGuard(c *checker) {
	c.needShapes()
	c.want(c.releaseHold("lock", reader("r1"), long), false, "nothing to release: a guard is left")
	c.want(c.acquireHold("lock", reader("r1"), long), 0, "the guard refuses a later acquire of the same hold")
	c.want(c.acquireHold("lock", reader("r2"), long), 1, "the guard refuses no other hold of the group")
	c.want(c.acquireHold("lock", reader("r1"), long), 0, "the guard stays")
	c.want(c.acquireHold("elsewhere", reader("r1"), long), 1, "a guard is for one lock")
	c.want(c.releaseHold("lock", reader("r2"), long), true, "the hold is released")
	c.want(c.acquireHold("lock", reader("r2"), long), 1, "a ReleaseHold that removed the hold leaves no guard")
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "guarded" + attempt
		quick := stopwatch()
		released := c.rec(c.releaseHold(k, reader("r1"), ttl))
		refused := c.rec(c.acquireHold(k, reader("r1"), long))
		if !quick(ttl) {
			return false
		}
		c.wantRec(released, false, "nothing to release: a guard is left")
		c.wantRec(refused, 0, "the guard refuses the same hold within its TTL")
		c.eventually(fmt.Sprintf("the guard of a hold of %s, left for %v, ends after it", q(k), ttl),
			func() bool { return c.acquireHold(k, reader("r1"), long) > 0 })
		return true
	})
}

func holdsExpireOnTheirOwn(c *checker) {
	c.needShapes()
	c.timed(func(ttl time.Duration, attempt string) bool {
		k, s := "{expiring"+attempt+"}", "{expiring"+attempt+"}sentinel" // one hash tag: one Cluster shard, one clock
		quick := stopwatch()
		first := c.rec(c.acquireHold(k, reader("r1"), ttl))
		second := c.rec(c.acquireHold(k, reader("r2"), long))
		sentinel := c.rec(c.acquireHold(s, reader("r1"), ttl))
		if !quick(ttl) {
			return false
		}
		c.wantRec(first, 1, "a free lock is taken")
		c.wantRec(second, 2, "holds of one group share the lock")
		c.wantRec(sentinel, 1, "a free lock is taken")
		c.eventually(fmt.Sprintf("sentinel lock %s, held with TTL %v after %s, is free after it", q(s), ttl, q(k)),
			func() bool { return c.acquireHold(s, writer("w1"), long) > 0 })
		c.want(c.acquireHold(k, reader("r3"), long), 2, "r1 expired on its own; r2 and r3 are live")
		c.want(c.acquireHold(k, writer("w1"), long), 0, "r2 still holds the lock")
		return true
	})
}

func groupWithNewline(c *checker) {
	c.needShapes()
	g, gx := redlock.Hold{Group: "g", ID: "1"}, redlock.Hold{Group: "g\nx", ID: "2"}
	c.want(c.acquireHold("lock", g, long), 1, "a free lock is taken")
	c.want(c.acquireHold("lock", gx, long), 0, "group \"g\\nx\" is another group than \"g\" (holds are stored as group + \"\\n\" + ID)")
	c.want(c.acquireHold("other", gx, long), 1, "a free lock is taken")
	c.want(c.acquireHold("other", g, long), 0, "group \"g\" is another group than \"g\\nx\"")
	nul := redlock.Hold{Group: "g\x00", ID: "3"}
	c.want(c.acquireHold("lock", nul, long), 0, "group \"g\\x00\" is another group than \"g\"")
}

func concurrentHolds(c *checker) {
	c.needShapes()
	race := func(k string, hold func(i int) redlock.Hold) []int {
		counts := make([]int, racers)
		errs := make([]error, racers)
		concurrently(racers, func(i int) {
			ctx, cancel := c.callCtx()
			defer cancel()
			counts[i], errs[i] = c.s.AcquireHold(ctx, k, hold(i), long)
		})
		for i, err := range errs {
			if err != nil {
				c.fatalf("AcquireHold(%s, %s, %v) on one of %d goroutines at once: unexpected error: %v", q(k), holdString(hold(i)), long, racers, err)
			}
		}
		return counts
	}
	counts := race("writers", func(i int) redlock.Hold { return writer(fmt.Sprint("w", i)) })
	if slices.Sort(counts); !slices.Equal(counts, append(make([]int, racers-1), 1)) {
		c.errorf("%d writers (limit 1, each its own group) called AcquireHold on one lock at once: counts %v (sorted), want one 1 and the rest 0", racers, counts)
	}
	counts = race("semaphore", func(i int) redlock.Hold { return redlock.Hold{Group: "sem", ID: fmt.Sprint("s", i), Limit: 3} })
	if slices.Sort(counts); !slices.Equal(counts, append(make([]int, racers-3), 1, 2, 3)) {
		c.errorf("%d holders of one group (limit 3) called AcquireHold on one lock at once: counts %v (sorted), want 1, 2 and 3 once each and the rest 0", racers, counts)
	}
}

// ---- Info ----

func infoConsistent(c *checker) {
	first, err := c.tryInfo()
	c.must(err)
	if first.RunID == "" {
		c.errorf("Info() = %+v: the RunID is empty", first)
	}
	if first.Uptime < 0 {
		c.errorf("Info() = %+v: the Uptime is negative", first)
	}
	c.want(c.acquire("lock", "v", long), true, "a free key is taken")
	second, err := c.tryInfo()
	c.must(err)
	if second.RunID != first.RunID {
		c.errorf("Info() = %+v, then %+v: the same server's RunID changed", first, second)
	}
	if second.Uptime < first.Uptime {
		c.errorf("Info() = %+v, then %+v: the same server's Uptime went back", first, second)
	}
}

// ---- Context, Down ----

// failure is one call made while calls must fail, and how to check later
// that it had no effect when its error wrapped redlock.ErrNotSent.
type failure struct {
	call   func() error
	verify func()
}

// failures sets up state with working calls, and returns calls that change
// it, each with its verification of "no effect".
func (c *checker) failures(ctxFor func() (context.Context, context.CancelFunc)) []failure {
	c.want(c.acquire("held for Release", "v", long), true, "a free key is taken")
	c.want(c.acquire("held for Extend", "v", long), true, "a free key is taken")
	// Each call of fail runs with ctxFor's context and returns its error.
	call := func(f func(ctx context.Context) (nonZero bool, err error)) func() error {
		return func() error {
			ctx, cancel := ctxFor()
			defer cancel()
			nonZero, err := f(ctx)
			c.zero(err, nonZero)
			return err
		}
	}
	fs := []failure{
		{call(func(ctx context.Context) (bool, error) {
			c.last = fmt.Sprintf("Acquire(%q, %q, %v)", "new", "v", long)
			return c.n.Acquire(ctx, "new", "v", long)
		}), func() {
			c.want(c.acquire("new", "w", long), true, "the failed Acquire wrapped redlock.ErrNotSent: it took nothing")
		}},
		{call(func(ctx context.Context) (bool, error) {
			c.last = fmt.Sprintf("Extend(%q, %q, %v)", "held for Extend", "v", time.Millisecond)
			return c.n.Extend(ctx, "held for Extend", "v", time.Millisecond)
		}), func() {
			c.want(c.acquire("held for Extend", "w", long), false, "the failed Extend to 1ms wrapped redlock.ErrNotSent: the key keeps its TTL")
		}},
		{call(func(ctx context.Context) (bool, error) {
			c.last = fmt.Sprintf("Release(%q, %q, %v)", "held for Release", "v", 0)
			return c.n.Release(ctx, "held for Release", "v", 0)
		}), func() {
			c.want(c.acquire("held for Release", "w", long), false, "the failed Release wrapped redlock.ErrNotSent: the key is still held")
		}},
		{call(func(ctx context.Context) (bool, error) {
			c.last = fmt.Sprintf("Release(%q, %q, %v)", "guard", "v", long)
			return c.n.Release(ctx, "guard", "v", long)
		}), func() {
			c.want(c.acquire("guard", "v", long), true, "the failed Release wrapped redlock.ErrNotSent: it left no guard")
		}},
		{call(func(ctx context.Context) (bool, error) {
			c.last = "Info()"
			si, err := c.n.Info(ctx)
			return si.RunID != "" || si.Uptime != 0 || si.Settings != nil, err
		}), nil},
	}
	if c.f != nil {
		c.want(c.acquireFenced("fenced", "v", long), fenced{true, 0}, "a free key is taken")
		c.want(c.raiseFence("fenced", "v", 5), true, "the holder raises the counter")
		before, _ := c.tryInfo() // the run that wrote the counter
		fs = append(fs,
			failure{call(func(ctx context.Context) (bool, error) {
				c.last = fmt.Sprintf("AcquireFenced(%q, %q, %v)", "new fenced", "v", long)
				ok, fence, err := c.f.AcquireFenced(ctx, "new fenced", "v", long)
				return ok || fence != 0, err
			}), func() {
				c.want(c.acquire("new fenced", "w", long), true, "the failed AcquireFenced wrapped redlock.ErrNotSent: it took nothing")
			}},
			failure{call(func(ctx context.Context) (bool, error) {
				c.last = fmt.Sprintf("RaiseFence(%q, %q, %d)", "fenced", "v", 9)
				return c.f.RaiseFence(ctx, "fenced", "v", 9)
			}), func() {
				// 5 when the server kept its run; 0 only when it came back
				// as a new run (its counter, of the old run, reads as lost).
				after, _ := c.tryInfo()
				restarted := before.RunID == "" || after.RunID != before.RunID
				if got := c.acquireFenced("fenced", "v", long); !got.ok || got.fence != 5 && !(got.fence == 0 && restarted) {
					c.errorf("AcquireFenced(%q, %q, %v) = %+v, want (true, 5), or (true, 0) after a restart (run %q, then %q): the failed RaiseFence wrapped redlock.ErrNotSent, so the counter was not raised to 9", "fenced", "v", long, got, before.RunID, after.RunID)
				}
			}})
	}
	if c.s != nil {
		c.want(c.acquireHold("shared for ReleaseHold", reader("r1"), long), 1, "a free lock is taken")
		c.want(c.acquireHold("shared for ExtendHold", reader("r1"), long), 1, "a free lock is taken")
		fs = append(fs,
			failure{call(func(ctx context.Context) (bool, error) {
				c.last = fmt.Sprintf("AcquireHold(%q, %s, %v)", "new shared", holdString(reader("r1")), long)
				n, err := c.s.AcquireHold(ctx, "new shared", reader("r1"), long)
				return n != 0, err
			}), func() {
				c.want(c.acquireHold("new shared", writer("w1"), long), 1, "the failed AcquireHold wrapped redlock.ErrNotSent: it took nothing")
			}},
			failure{call(func(ctx context.Context) (bool, error) {
				c.last = fmt.Sprintf("ExtendHold(%q, %s, %v)", "shared for ExtendHold", holdString(reader("r1")), time.Millisecond)
				return c.s.ExtendHold(ctx, "shared for ExtendHold", reader("r1"), time.Millisecond)
			}), func() {
				c.want(c.acquireHold("shared for ExtendHold", writer("w1"), long), 0, "the failed ExtendHold to 1ms wrapped redlock.ErrNotSent: the hold keeps its expiry")
			}},
			failure{call(func(ctx context.Context) (bool, error) {
				c.last = fmt.Sprintf("ReleaseHold(%q, %s, %v)", "shared for ReleaseHold", holdString(reader("r1")), 0)
				return c.s.ReleaseHold(ctx, "shared for ReleaseHold", reader("r1"), 0)
			}), func() {
				c.want(c.acquireHold("shared for ReleaseHold", writer("w1"), long), 0, "the failed ReleaseHold wrapped redlock.ErrNotSent: the hold is still there")
			}},
			failure{call(func(ctx context.Context) (bool, error) {
				c.last = fmt.Sprintf("ReleaseHold(%q, %s, %v)", "guarded shared", holdString(reader("r1")), long)
				return c.s.ReleaseHold(ctx, "guarded shared", reader("r1"), long)
			}), func() {
				c.want(c.acquireHold("guarded shared", reader("r1"), long), 1, "the failed ReleaseHold wrapped redlock.ErrNotSent: it left no guard")
			}})
	}
	if c.qn != nil {
		c.want(c.acquire("queued for LeaveQueue", "holder", long), true, "a free key is taken")
		c.want(c.acquireQueued("queued for LeaveQueue", "v", long, waiterAt("q1", 1, long)), fenced{false, 0}, "the key is held: q1 enters the queue")
		c.want(c.release("queued for LeaveQueue", "holder", 0), true, "the holder releases its key")
		fs = append(fs,
			failure{call(func(ctx context.Context) (bool, error) {
				w := waiterAt("f1", 1, long)
				c.last = fmt.Sprintf("AcquireQueued(%q, %q, %v, %s)", "new queued", "v", long, waiterString(w))
				ok, fence, err := c.qn.AcquireQueued(ctx, "new queued", "v", long, w)
				return ok || fence != 0, err
			}), func() {
				c.want(c.acquireQueued("new queued", "w", long, waiterAt("f2", 2, long)), fenced{true, 0}, "the failed AcquireQueued wrapped redlock.ErrNotSent: it took nothing and entered no waiter")
			}},
			failure{call(func(ctx context.Context) (bool, error) {
				w := waiterAt("q1", 1, long)
				c.last = fmt.Sprintf("LeaveQueue(%q, %s)", "queued for LeaveQueue", waiterString(w))
				return false, c.qn.LeaveQueue(ctx, "queued for LeaveQueue", w)
			}), func() {
				c.want(c.acquireQueued("queued for LeaveQueue", "w", long, waiterAt("q2", 2, long)), fenced{false, 0}, "the failed LeaveQueue wrapped redlock.ErrNotSent: q1 still holds the key the release handed it (a LeaveQueue would have released it)")
			}})
	}
	return fs
}

// failAll makes every call of fs, checks each failed as judge says, and
// returns the verifications owed to errors wrapping redlock.ErrNotSent.
func (c *checker) failAll(fs []failure, judge func(err error) string) []func() {
	var owed []func()
	for _, f := range fs {
		err := f.call()
		if err == nil {
			c.errorf("%s returned no error, want one: %s", c.last, judge(nil))
			continue
		}
		if why := judge(err); why != "" {
			c.errorf("%s returned %v: %s", c.last, err, why)
		}
		if isNotSent(err) && f.verify != nil {
			owed = append(owed, f.verify)
		}
	}
	return owed
}

func contextEnded(c *checker, ctxFor func() (context.Context, context.CancelFunc), want error) {
	owed := c.failAll(c.failures(ctxFor), func(err error) string {
		if !errors.Is(err, want) {
			return fmt.Sprintf("a call whose context has ended returns an error wrapping ctx.Err() (%v)", want)
		}
		return ""
	})
	c.verify(owed)
}

// verify runs the verifications owed to errors wrapping redlock.ErrNotSent.
func (c *checker) verify(owed []func()) {
	for _, verify := range owed {
		verify()
	}
	c.t.Logf("%d calls failed with an error wrapping redlock.ErrNotSent; the suite checked that each had no effect", len(owed))
}

func contextCancelled(c *checker) {
	contextEnded(c, func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(c.ctx)
		cancel()
		return ctx, cancel
	}, context.Canceled)
}

func deadlinePassed(c *checker) {
	contextEnded(c, func() (context.Context, context.CancelFunc) {
		return context.WithDeadline(c.ctx, time.Now().Add(-time.Second))
	}, context.DeadlineExceeded)
}

func downServer(c *checker) {
	c.needDown()
	fs := c.failures(c.callCtx)
	up := c.down(c.t, c.n)
	if up == nil {
		c.fatalf("the down function given to nodetest.Run returned a nil up function")
	}
	isUp := false
	c.atEnd(func() {
		if !isUp {
			up()
		}
	})
	owed := c.failAll(fs, func(err error) string {
		if err == nil {
			return "every call fails while the server is down"
		}
		return ""
	})
	up()
	isUp = true
	// The first calls after up may meet connections left over from before.
	c.eventually("the node serves again after up (Acquire of a new key succeeds)", func() bool {
		ok, err := c.tryAcquire("after up", "v", long)
		return err == nil && ok
	})
	c.verify(owed)
	si, err := c.tryInfo()
	c.must(err)
	if si.RunID == "" {
		c.errorf("Info() = %+v after up: the RunID is empty", si)
	}
}

// ---- Names ----

// independent checks that a and b are two locks: what is done to one, the
// other does not see.
func (c *checker) independent(a, b string) {
	c.want(c.acquire(a, "v", long), true, "a free key is taken")
	c.want(c.acquire(b, "w", long), true, fmt.Sprintf("%s is another lock than %s", q(b), q(a)))
	c.want(c.acquire(a, "w", long), false, "the key is held by v")
	c.want(c.acquire(b, "v", long), false, "the key is held by w")
	c.want(c.extend(a, "v", long), true, "the holder extends its key")
	c.want(c.release(b, "w", 0), true, "the holder releases its key")
	c.want(c.release(a, "v", 0), true, "the holder releases its key")
	c.seq++
	g := fmt.Sprint("guarded", c.seq) // a value new to both names
	c.want(c.release(a, g, long), false, "nothing to release: a guard is left")
	c.want(c.acquire(b, g, long), true, fmt.Sprintf("the guard left on %s is not %s's", q(a), q(b)))
	c.want(c.release(b, g, 0), true, "the holder releases its key")
	if c.f != nil {
		fa := c.acquireFenced(a, "v", long)
		c.want(fa.ok, true, "a free key is taken")
		fb := c.acquireFenced(b, "v", long)
		c.want(fb.ok, true, "a free key is taken")
		c.want(c.raiseFence(a, "v", fa.fence+fb.fence+3), true, "the holder raises the counter")
		c.want(c.acquireFenced(b, "v", long), fenced{true, fb.fence}, fmt.Sprintf("%s's counter is not %s's", q(b), q(a)))
		c.want(c.release(a, "v", 0), true, "the holder releases its key")
		c.want(c.release(b, "v", 0), true, "the holder releases its key")
	}
	if c.s != nil {
		wr := waitingWriter("w1", long)
		c.want(c.acquireHold(a, reader("r1"), long), 1, "a free lock is taken")
		c.want(c.acquireHold(a, wr, long), 0, "the readers hold the lock: the writer leaves a waiting mark")
		c.want(c.acquireHold(b, writer("w2"), long), 1, fmt.Sprintf("%s is another lock than %s", q(b), q(a)))
		c.want(c.releaseHold(b, writer("w2"), 0), true, "the hold is released")
		c.want(c.acquireHold(b, yieldingReader("r2"), long), 1, fmt.Sprintf("the waiting mark of %s is not %s's", q(a), q(b)))
		c.want(c.releaseHold(a, reader("r1"), 0), true, "the hold is released")
		c.want(c.releaseHold(b, yieldingReader("r2"), 0), true, "the hold is released")
		c.want(c.acquireHold(a, wr, long), 1, "the waiting writer takes the free lock, and its mark goes")
		c.want(c.releaseHold(a, wr, 0), true, "the hold is released")
	}
}

func longName(c *checker) {
	a := strings.Repeat("n", 1<<20)
	b := a[:len(a)-1] + "m"
	c.independent(a, b)
	c.independent(a, a[:len(a)-1])
}

func invalidUTF8(c *checker) {
	c.independent("\xff\xfe", "\uFFFD\uFFFD")
	c.independent("\xff\xfe", "\xff\xfd")
}

func newlineName(c *checker) {
	c.independent("a\nb", "a b")
	c.independent("a\r\nb", "a\nb")
}

func nulName(c *checker) {
	c.independent("a\x00b", "a")
	c.want(c.release("a\x00b", "c", long), false, "nothing to release: a guard is left")
	c.want(c.acquire("a", "b\x00c", long), true, "the guard of key \"a\\x00b\" and value \"c\" is not key \"a\"'s for value \"b\\x00c\"")
	c.want(c.acquire("a\x00b", "c", long), false, "the guard refuses its own key and value")
}

func hashTags(c *checker) {
	c.independent("{t}a", "{t}b")
	c.independent("a{b", "a{b}c")
	c.independent("{t}", "{t}{t}")
}

// braceWithoutTag: package redisnode refuses a name whose keys could not
// share one Redis Cluster slot (a '}' without a valid hash tag) with an
// error; a node may also take such a name as any other.
func braceWithoutTag(c *checker) {
	for _, name := range []string{"a}b", "{}x"} {
		ok, err := c.tryAcquire(name, "v", long)
		if err != nil {
			continue // refused; an ErrNotSent claim is checked by Context and Down
		}
		c.want(ok, true, "a free key is taken")
		c.want(c.acquire(name, "w", long), false, "the key is held by v")
		c.want(c.release(name, "v", 0), true, "the holder releases its key")
	}
}

func oddValues(c *checker) {
	c.want(c.acquire("lock", "v\x00x", long), true, "a free key is taken")
	c.want(c.acquire("lock", "v", long), false, "value \"v\" is not \"v\\x00x\"")
	c.want(c.release("lock", "v", 0), false, "value \"v\" is not \"v\\x00x\"")
	c.want(c.extend("lock", "v\x00x\x00", long), false, "value \"v\\x00x\\x00\" is not \"v\\x00x\"")
	c.want(c.release("lock", "v\x00x", 0), true, "the holder releases its key")
	big := strings.Repeat("v", 1<<20)
	c.want(c.acquire("big", big, long), true, "a free key is taken")
	c.want(c.acquire("big", big, long), true, "a retried copy compares the whole value")
	c.want(c.acquire("big", big[:len(big)-1]+"w", long), false, "another value")
	c.want(c.release("big", big, 0), true, "the holder releases its key")
}

// ---- Kinds ----

func mutexThenHold(c *checker) {
	c.needShapes()
	c.want(c.acquire("lock", "v", long), true, "a free key is taken")
	_, err := c.tryAcquireHold("lock", reader("r1"), long)
	c.wantErr(err, "the name is a mutex: Redis answers WRONGTYPE, an error, not a refusal")
	_, err = c.tryExtendHold("lock", reader("r1"), long)
	c.wantErr(err, "the name is a mutex: Redis answers WRONGTYPE")
	_, err = c.tryReleaseHold("lock", reader("r1"), long)
	c.wantErr(err, "the name is a mutex: Redis answers WRONGTYPE")
	c.want(c.acquire("lock", "w", long), false, "the mutex still holds the name")
	c.want(c.release("lock", "v", 0), true, "the mutex is intact")
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "the name is free once the mutex is gone; the failed ReleaseHold left no guard")
}

func holdThenMutex(c *checker) {
	c.needShapes()
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "a free lock is taken")
	_, err := c.tryAcquire("lock", "v", long)
	c.wantErr(err, "the name is a shared lock: Redis answers WRONGTYPE, an error, not a refusal")
	_, err = c.tryExtend("lock", "v", long)
	c.wantErr(err, "the name is a shared lock: Redis answers WRONGTYPE")
	_, err = c.tryRelease("lock", "v", 0)
	c.wantErr(err, "the name is a shared lock: Redis answers WRONGTYPE")
	_, err = c.tryRelease("lock", "v", long)
	c.wantErr(err, "the name is a shared lock: Redis answers WRONGTYPE")
	if c.f != nil {
		_, err = c.tryAcquireFenced("lock", "v", long)
		c.wantErr(err, "the name is a shared lock: Redis answers WRONGTYPE")
		_, err = c.tryRaiseFence("lock", "v", 3)
		c.wantErr(err, "the name is a shared lock: Redis answers WRONGTYPE")
	}
	c.want(c.acquireHold("lock", reader("r1"), long), 1, "the shared lock is intact")
	c.want(c.releaseHold("lock", reader("r1"), 0), true, "the hold is released")
	c.want(c.acquire("lock", "v", long), true, "the name is free once the last hold is gone; the failed Release left no guard")
	if c.f != nil {
		c.want(c.acquireFenced("lock", "v", long), fenced{true, 0}, "a retried copy; the failed RaiseFence left no counter")
	}
}

// ---- Derived keys: names that are keys the Redis scripts derive from
// another lock's name (see the package doc) ----

func fenceCounterName(c *checker) {
	c.needFencing()
	fk := wire.FenceKey("k") // k's fencing counter
	c.want(c.acquireFenced("k", "v", long), fenced{true, 0}, "a free key is taken")
	c.want(c.raiseFence("k", "v", 7), true, "the holder raises the counter")
	c.want(c.acquire(fk, "x", long), false, "the name is the key of k's fencing counter, which holds \"7:<run>\"")
	c.want(c.release(fk, "7", 0), false, "the counter holds 7 and the server's run, not \"7\"")
	c.want(c.release("k", "v", 0), true, "the holder releases its key")
	c.want(c.acquireFenced("k", "w", long), fenced{true, 7}, "the counter is intact")
	c.want(c.release("k", "w", 0), true, "the holder releases its key")
}

func fenceCounterNameTakenFirst(c *checker) {
	c.needFencing()
	fk := wire.FenceKey("k") // k's fencing counter
	c.want(c.acquire(fk, "x", long), true, "a free key is taken")
	_, err := c.tryAcquireFenced("k", "v", long)
	c.wantErr(err, "k's counter key holds \"x\", no counter: the script fails before it takes anything")
	c.want(c.acquire("k", "v", long), true, "the failed AcquireFenced took nothing")
	_, err = c.tryRaiseFence("k", "v", 5)
	c.wantErr(err, "k's counter key holds \"x\", no counter: the script fails reading it")
	c.want(c.acquire(fk, "y", long), false, "x still holds the name: the failed RaiseFence wrote nothing")
	c.want(c.release(fk, "x", 0), true, "x still holds the name")
	c.want(c.release("k", "v", 0), true, "the holder releases its key")
	// A name that holds a number: a counter of no server run (as written
	// before counters carried their run). An acquire reads it as lost (0);
	// a write-back raises from it, with Lua's tonumber truncated.
	for i, tc := range []struct {
		value string
		fence int64
	}{{"12.7", 12}, {"-3.5", 3}, {" 0x10 ", 16}} {
		k := fmt.Sprintf("n%d", i)
		fk := wire.FenceKey(k)
		c.want(c.acquire(fk, tc.value, long), true, "a free key is taken")
		c.want(c.acquireFenced(k, "v", long), fenced{true, 0}, fmt.Sprintf("%s holds %q, a counter of no run: it reads as lost", fk, tc.value))
		c.want(c.raiseFence(k, "v", 3), true, "the holder raises the counter")
		c.want(c.acquireFenced(k, "v", long), fenced{true, tc.fence}, fmt.Sprintf("the write-back raised %q to max(its number, 3), of this run", tc.value))
		c.want(c.release(k, "v", 0), true, "the holder releases its key")
		c.want(c.release(fk, tc.value, 0), false, "the write-back replaced the number with a counter of this run")
	}
	// A number Lua's doubles no longer count by one (2^53 or more) is no
	// counter: the scripts fail before they take or write anything.
	for i, big := range []string{"99999999999999999999:ab", "9007199254740992"} {
		k := fmt.Sprintf("b%d", i)
		fk := wire.FenceKey(k)
		c.want(c.acquire(fk, big, long), true, "a free key is taken")
		_, err := c.tryAcquireFenced(k, "v", long)
		c.wantErr(err, fmt.Sprintf("%s holds %q, past 2^53: no counter", fk, big))
		c.want(c.acquire(k, "v", long), true, "the failed AcquireFenced took nothing")
		_, err = c.tryRaiseFence(k, "v", 5)
		c.wantErr(err, fmt.Sprintf("%s holds %q, past 2^53: no counter", fk, big))
		c.want(c.release(fk, big, 0), true, "the failed RaiseFence wrote nothing")
		c.want(c.release(k, "v", 0), true, "the holder releases its key")
	}
	if c.s != nil {
		hk := wire.FenceKey("h") // h's fencing counter
		c.want(c.acquireHold(hk, reader("r1"), long), 1, "a free lock is taken")
		_, err = c.tryAcquireFenced("h", "v", long)
		c.wantErr(err, "h's counter key holds a shared lock: Redis answers WRONGTYPE")
		c.want(c.acquire("h", "w", long), true, "the failed AcquireFenced took nothing: it failed reading the counter, first")
	}
}

func waitingMarkName(c *checker) {
	c.needShapes()
	wk := wire.WaitingKey("w") // w's waiting marks
	c.want(c.acquire(wk, "x", long), true, "a free key is taken")
	_, err := c.tryAcquireHold("w", reader("r1"), long)
	c.wantErr(err, "the key of w's waiting marks holds a mutex: Redis's script prunes it and answers WRONGTYPE")
	c.want(c.extendHold("w", reader("r1"), long), false, "ExtendHold reads no waiting marks: nothing to extend")
	c.want(c.releaseHold("w", reader("r2"), 0), false, "ReleaseHold reads no waiting marks: nothing to release")
	c.want(c.release(wk, "x", 0), true, "the holder releases its key")
	c.want(c.acquireHold("w", reader("r1"), long), 1, "a free lock is taken")
	c.want(c.acquireHold("w", waitingWriter("wr", long), long), 0, "the readers hold the lock: the writer leaves a waiting mark")
	_, err = c.tryAcquire(wk, "x", long)
	c.wantErr(err, "the name holds w's waiting marks: Redis answers WRONGTYPE")
	_, err = c.tryExtend(wk, "x", long)
	c.wantErr(err, "the name holds w's waiting marks: Redis answers WRONGTYPE")
	_, err = c.tryRelease(wk, "x", 0)
	c.wantErr(err, "the name holds w's waiting marks: Redis answers WRONGTYPE")
	c.want(c.acquireHold(wire.WaitingKey("v"), redlock.Hold{Group: "g", ID: "1"}, long), 1, "a free lock is taken")
	c.want(c.acquireHold("v", yieldingReader("r1"), long), 0, "the holds of the shared lock named {v}:waiting are v's waiting marks")
	c.want(c.acquireHold("v", reader("r2"), long), 1, "a reader that does not yield is not refused")
}

func taggedName(c *checker) {
	// "x" and "{x}" are two lock keys whose derived keys are the same:
	// {x}:release-guard:<hash>, {x}:fence, {x}:waiting.
	c.want(c.acquire("x", "v", long), true, "a free key is taken")
	c.want(c.acquire("{x}", "w", long), true, "\"{x}\" is another lock key than \"x\"")
	c.want(c.release("{x}", "u", long), false, "u holds nothing: a guard is left")
	c.want(c.acquire("x", "u", long), false, "\"x\" and \"{x}\" share their release guards' keys: the guard of \"{x}\" refuses \"x\"")
	c.want(c.release("x", "v", 0), true, "the holder releases its key")
	c.want(c.release("{x}", "w", 0), true, "the holder releases its key")
	if c.f != nil {
		c.want(c.acquireFenced("y", "v", long), fenced{true, 0}, "a free key is taken")
		c.want(c.raiseFence("y", "v", 4), true, "the holder raises the counter")
		c.want(c.acquireFenced("{y}", "w", long), fenced{true, 4}, "\"y\" and \"{y}\" share the fencing counter {y}:fence")
	}
	if c.s != nil {
		c.want(c.acquireHold("z", reader("r1"), long), 1, "a free lock is taken")
		c.want(c.acquireHold("z", waitingWriter("wr", long), long), 0, "the readers hold the lock: the writer leaves a waiting mark")
		c.want(c.acquireHold("{z}", yieldingReader("r2"), long), 0, "\"z\" and \"{z}\" share the waiting marks {z}:waiting")
	}
}

func guardKeyName(c *checker) {
	// The key of the release guard of key k and value v, as redisnode names it.
	gk := wire.GuardKey("k", "v")
	c.want(c.acquire(gk, "x", long), true, "a free key is taken")
	c.want(c.acquire("k", "v", long), false, "the name is the key of the release guard of k and v: it refuses v as the guard would")
	c.want(c.acquire("k", "w", long), true, "and no other value")
	c.want(c.release("k", "w", 0), true, "the holder releases its key")
	c.want(c.release("k", "v", long), false, "nothing to release: a guard is left")
	c.want(c.release(gk, "x", 0), false, "the guard left by Release of k and v replaced x's key of the same name")
}
