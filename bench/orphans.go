package bench

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/wire"
)

// keyPrefix is the start of every lock name of a run.
func keyPrefix(run string) string { return "qlbench:" + run + ":" }

// lockKey is the lock name of one entry of a run: every key the entry's
// locker writes contains it.
func lockKey(run, contender string, n int, cond string) string {
	return keyPrefix(run) + entryID(contender, n, cond)
}

// entryID names an entry: "contender:nN:condition".
func entryID(contender string, n int, cond string) string {
	return contender + ":n" + strconv.Itoa(n) + ":" + cond
}

// leftover counts one entry's keys left on the masters.
type leftover struct{ keys, guards, queue int }

// leftovers scans every master for the run's keys and counts them per
// entry ID. Fencing counters (kept without a TTL by design) are not
// counted; release guards and the waiting bookkeeping (the waiting lines'
// keys; they expire) are counted apart. quorumlock's derived keys are
// told and traced to their lock by internal/wire.
func leftovers(ctx context.Context, ms []Master, run string) (map[string]leftover, error) {
	counts := map[string]leftover{}
	err := scanRun(ctx, ms, run, func(_ *redis.Client, k string) error {
		lock, kind := wire.Parse(k)
		if kind == wire.Fence {
			return nil
		}
		_, rest, _ := strings.Cut(lock, keyPrefix(run))
		id := rest
		if parts := strings.SplitN(rest, ":", 4); len(parts) >= 3 {
			id = strings.Join(parts[:3], ":") // a peer's own suffixes cut
		}
		c := counts[id]
		switch kind {
		case wire.Guard:
			c.guards++
		case wire.Queue, wire.QueueTTL, wire.QueueVal, wire.GrantRecord:
			c.queue++
		default:
			c.keys++
		}
		counts[id] = c
		return nil
	})
	return counts, err
}

// deleteRun deletes every key of the run (fencing counters included) from
// the masters, which are the user's.
func deleteRun(ctx context.Context, ms []Master, run string) error {
	return scanRun(ctx, ms, run, func(c *redis.Client, k string) error {
		return c.Del(ctx, k).Err()
	})
}

// scanRun calls fn for every key of the run on every master.
func scanRun(ctx context.Context, ms []Master, run string, fn func(*redis.Client, string) error) error {
	for _, m := range ms {
		c := redis.NewClient(m.GoRedisOptions(nil))
		it := c.Scan(ctx, 0, "*"+keyPrefix(run)+"*", 1000).Iterator()
		var err error
		for err == nil && it.Next(ctx) {
			err = fn(c, it.Val())
		}
		if err := errors.Join(err, it.Err(), c.Close()); err != nil {
			return err
		}
	}
	return nil
}
