package nodetest

import (
	"fmt"
	"time"
)

// The checks of the two capabilities an election and the fence counter
// cleanup rely on: redlock.FenceExpiryNode (a counter lives keep after the
// last write-back: never less, which the epoch rule's safety needs, and not
// for ever, which keeps the counters of names no longer used from piling
// up) and redlock.PeekNode (a read that changes nothing).

func (c *checker) needKeep() {
	c.needFencing()
	if c.k == nil {
		panic(skipCheck{fmt.Sprintf("%T is not a redlock.FenceExpiryNode", c.n)})
	}
}

func (c *checker) needPeek() {
	if c.p == nil {
		panic(skipCheck{fmt.Sprintf("%T is not a redlock.PeekNode", c.n)})
	}
}

func (c *checker) tryRaiseFenceKeep(key, value string, token int64, keep time.Duration) (bool, error) {
	c.last = fmt.Sprintf("RaiseFenceKeep(%s, %s, %d, %v)", q(key), q(value), token, keep)
	ctx, cancel := c.callCtx()
	defer cancel()
	ok, err := c.k.RaiseFenceKeep(ctx, key, value, token, keep)
	c.zero(err, ok)
	return ok, err
}

func (c *checker) raiseFenceKeep(key, value string, token int64, keep time.Duration) bool {
	ok, err := c.tryRaiseFenceKeep(key, value, token, keep)
	c.must(err)
	return ok
}

// peeked is Peek's result.
type peeked struct {
	value string
	fence int64
}

func (p peeked) String() string { return fmt.Sprintf("(%s, %d)", q(p.value), p.fence) }

func (c *checker) tryPeek(key string) (peeked, error) {
	c.last = fmt.Sprintf("Peek(%s)", q(key))
	ctx, cancel := c.callCtx()
	defer cancel()
	v, f, err := c.p.Peek(ctx, key)
	c.zero(err, v != "" || f != 0)
	return peeked{v, f}, err
}

func (c *checker) peek(key string) peeked {
	r, err := c.tryPeek(key)
	c.must(err)
	return r
}

// counterOf reads key's fencing counter through AcquireFenced, taking the
// key for a moment with a value of its own (the key must be free).
func (c *checker) counterOf(key string) int64 {
	c.seq++
	probe := fmt.Sprintf("probe-%d", c.seq)
	r := c.acquireFenced(key, probe, long)
	read := c.last
	if !r.ok {
		c.fatalf("%s = %v: the probe of the counter found the key held", c.last, r)
	}
	c.want(c.release(key, probe, 0), true, "the probe holds the key")
	c.last = read // the call that read the counter, for messages
	return r.fence
}

// ---- Fencing: retention ----

// fenceRetention: RaiseFenceKeep keeps the counter keep after it, and the
// counter then goes; a raise by a value that does not hold the key changes
// nothing.
func fenceRetention(c *checker) {
	c.needKeep()
	c.want(c.acquireFenced("lock", "v", long), fenced{true, 0}, "a free key is taken")
	c.want(c.raiseFenceKeep("lock", "v", 5, long), true, "the holder raises the counter")
	c.want(c.release("lock", "v", 0), true, "the holder releases its key")
	c.want(c.acquireFenced("lock", "w", long), fenced{true, 5}, "the counter outlives the key")
	c.want(c.raiseFenceKeep("lock", "x", 9, time.Millisecond), false, "another value holds the key")
	c.want(c.release("lock", "w", 0), true, "the holder releases its key")
	c.want(c.counterOf("lock"), int64(5), "a refused RaiseFenceKeep changes neither the counter nor its time to live")
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "kept" + attempt
		quick := stopwatch()
		c.acquireFenced(k, "v", long)
		raised := c.rec(c.raiseFenceKeep(k, "v", 5, ttl))
		c.release(k, "v", 0)
		kept := c.rec(c.counterOf(k))
		if !quick(ttl) {
			return false
		}
		c.wantRec(raised, true, "the holder raises the counter")
		c.wantRec(kept, int64(5), "the counter lives keep after the write-back")
		c.eventually(fmt.Sprintf("the counter of %s, kept %v, is gone after it", q(k), ttl),
			func() bool { return c.counterOf(k) == 0 })
		return true
	})
}

// fenceRetentionRenewed: a write-back that does not raise the counter
// (its token is lower) still renews it for its keep, and keep 0 keeps it
// for ever: a counter never goes sooner than keep after the last
// acquisition that wrote it back, which the epoch rule needs.
func fenceRetentionRenewed(c *checker) {
	c.needKeep()
	c.timed(func(ttl time.Duration, attempt string) bool {
		renewed, forever, control := "renewed"+attempt, "forever"+attempt, "control"+attempt
		quick := stopwatch()
		var raises []rec
		for _, k := range []string{renewed, forever, control} {
			c.acquireFenced(k, "v", long)
			raises = append(raises, c.rec(c.raiseFenceKeep(k, "v", 5, ttl)))
		}
		lower := c.rec(c.raiseFenceKeep(renewed, "v", 3, long))
		zero := c.rec(c.raiseFenceKeep(forever, "v", 5, 0))
		for _, k := range []string{renewed, forever, control} {
			c.release(k, "v", 0)
		}
		if !quick(ttl) {
			return false
		}
		for _, r := range raises {
			c.wantRec(r, true, "the holder raises the counter")
		}
		c.wantRec(lower, true, "RaiseFenceKeep reports the key held, also when it does not raise the counter")
		c.wantRec(zero, true, "the holder keeps the counter for ever")
		c.eventually(fmt.Sprintf("the control counter %s, kept %v, is gone after it", q(control), ttl),
			func() bool { return c.counterOf(control) == 0 })
		c.want(c.counterOf(renewed), int64(5), "the write-back with token 3 and keep 1h did not raise the counter but renewed it for 1h")
		c.want(c.counterOf(forever), int64(5), "the write-back with keep 0 keeps the counter for ever")
		return true
	})
}

// ---- Peek ----

// peekReads: Peek reads the key's value and the counter, and changes
// nothing.
func peekReads(c *checker) {
	c.needPeek()
	c.want(c.peek("lock"), peeked{"", 0}, "a free key without a counter")
	c.want(c.acquire("lock", "v", long), true, "a free key is taken")
	c.want(c.peek("lock"), peeked{"v", 0}, "the key's value, no counter")
	c.want(c.acquire("lock", "w", long), false, "Peek left the key to v")
	if c.f != nil {
		c.want(c.raiseFence("lock", "v", 6), true, "the holder raises the counter")
		c.want(c.peek("lock"), peeked{"v", 6}, "the key's value and its counter")
	}
	c.want(c.release("lock", "v", 0), true, "the holder releases its key")
	if c.f != nil {
		c.want(c.peek("lock"), peeked{"", 6}, "the counter outlives the key")
	}
	c.timed(func(ttl time.Duration, attempt string) bool {
		k := "expiring" + attempt
		quick := stopwatch()
		c.acquire(k, "v", ttl)
		held := c.rec(c.peek(k))
		if !quick(ttl) {
			return false
		}
		c.wantRec(held, peeked{"v", 0}, "the key's value")
		c.eventually(fmt.Sprintf("key %s, set with TTL %v, reads empty after it", q(k), ttl),
			func() bool { return c.peek(k) == peeked{} })
		return true
	})
}

// peekSharedLock: Peek of a shared lock's key fails, as GET does on Redis
// (WRONGTYPE), and changes nothing.
func peekSharedLock(c *checker) {
	c.needPeek()
	c.needShapes()
	c.want(c.acquireHold("shared", reader("r1"), long), 1, "a free lock is taken")
	_, err := c.tryPeek("shared")
	c.wantErr(err, "the key holds a shared lock's holds, not a value (Redis: WRONGTYPE)")
	c.want(c.acquireHold("shared", reader("r2"), long), 2, "Peek left the holds as they were")
}
