package redisnode

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

var _ redlock.QueueNode = (*Node)(nil)

// AcquireQueued is the acquire of waiter w (acquire_queued.lua): in one
// atomic step it takes a free key at once when nobody is in key's waiting
// line; otherwise it drops expired waiters, enters w in the line when
// absent, sets w's entry to expire w.TTL from now, and acquires as Acquire
// does when w's turn has come: with w.Fair only as the line's first live
// waiter, else whatever w's place once w was in line before this call (a
// newcomer only when nobody else is in line). It also reads the fencing
// counter (as AcquireFenced does). When key holds value afterwards w leaves
// the line. A fair waiter that left (by acquiring, or by LeaveQueue) and
// any waiter that gave up (LeaveQueue) stays out for w.TTL: an
// AcquireQueued of it executed before then (a late copy) enters nothing
// and changes nothing; after the release-guard check it reports true only
// when key already holds value. The line is two sorted sets in key's
// Cluster slot, "{key}:queue" (waiter ID -> arrival in Unix milliseconds;
// ties in ID order) and "{key}:queue:ttl" (waiter ID -> expiry in server
// milliseconds), or "key:queue" and "key:queue:ttl" when key has a hash
// tag; a waiter that left keeps its entry in the second only (a
// tombstone); both expire with their last entry. ttl and w.TTL are rounded
// down to whole milliseconds and must be at least one; w.ID must be
// non-empty without a newline. It implements redlock.QueueNode.
func (n *Node) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, w redlock.Waiter) (bool, int64, error) {
	cfg := n.config.Load()
	ms, err := n.keyMillis(cfg, ttl)
	if err != nil {
		return false, 0, err
	}
	wms, err := checkWaiter(w)
	if err != nil {
		return false, 0, err
	}
	a, err := argsFor(key, value, ms)
	if err != nil {
		return false, 0, err
	}
	wa := waiterArgsFor(w.ID, w.Arrival.UnixMilli(), wms, w.Fair)
	s := queuedFast
	var acquired, counter int64
	err = n.evalCmdWith(ctx, cfg, s, []any{"evalsha", s.hashArg, s.keysArg, a.keyArg, a.guardArg, a.fenceArg, a.queueArg, a.qttlArg, a.qvalArg, a.grantArg,
		a.valueArg, a.ms(ms), wa.idArg, wa.arrArg, wa.ttlArg, wa.modeArg,
		testFlags(knobs.NoRunStamp.Load(), "anyrun", knobs.NoGrantTakeover.Load(), "notakeover", knobs.NoConfigStamp.Load(), "nostamp"), cfg.epochArg()}, func(cmd *redis.Cmd) error {
		res, err := cmd.Slice()
		if err != nil {
			return err
		}
		var ok bool
		if acquired, counter, ok = twoInts(res); !ok {
			return fmt.Errorf("redisnode: %s: acquire_queued.lua returned %v, want [int, int]", n.addr, res)
		}
		return nil
	})
	if err != nil {
		return false, 0, err
	}
	return acquired == 1, counter, nil
}

// LeaveQueue removes w from key's queue (leave_queue.lua); when w was its
// first live waiter and key is free, it tells the lock's watchers (Watch)
// the next waiter, as a release does. w then stays out for w.TTL, whether
// or not it was queued: its entry in "{key}:queue:ttl" is kept as a
// tombstone expiring w.TTL from now, and an AcquireQueued of w executed
// before that enters nothing (see there). Leaving a queue w is not in is
// no error. w.ID must be non-empty without a newline and w.TTL at least
// one millisecond (rounded down). It implements redlock.QueueNode.
func (n *Node) LeaveQueue(ctx context.Context, key string, w redlock.Waiter) error {
	wms, err := checkWaiter(w)
	if err != nil {
		return err
	}
	a, err := lineArgsFor(key)
	if err != nil {
		return err
	}
	wa := waiterArgsFor(w.ID, w.Arrival.UnixMilli(), wms, w.Fair)
	s := leaveFast
	_, err = n.eval(ctx, s, []any{"evalsha", s.hashArg, s.keysArg, a.keyArg, a.queueArg, a.qttlArg, a.qvalArg, a.grantArg, wa.idArg, a.chArg, wa.ttlArg,
		testFlags(knobs.NoLeaveTombstone.Load(), "notomb", knobs.NoGrant.Load(), "nogrant", knobs.NoGrantLeaveRelease.Load(), "norelease")})
	return err
}

// checkWaiter checks w and returns its TTL in milliseconds.
func checkWaiter(w redlock.Waiter) (int64, error) {
	if err := checkWaiterID(w.ID); err != nil {
		return 0, err
	}
	ms := w.TTL.Milliseconds()
	if ms < 1 {
		return 0, fmt.Errorf("redisnode: %w: waiter TTL %v is below one millisecond", redlock.ErrNotSent, w.TTL)
	}
	return ms, nil
}

func checkWaiterID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("redisnode: %w: empty waiter ID", redlock.ErrNotSent)
	case !wire.ValidWaiterID(id):
		return fmt.Errorf("redisnode: %w: waiter ID %s contains a newline", redlock.ErrNotSent, quote(id))
	}
	return nil
}

// twoInts reads a script's [int, int] reply.
func twoInts(res []any) (int64, int64, bool) {
	if len(res) != 2 {
		return 0, 0, false
	}
	a, ok1 := res[0].(int64)
	b, ok2 := res[1].(int64)
	return a, b, ok1 && ok2
}
