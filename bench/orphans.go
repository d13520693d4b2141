package bench

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
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

// leftovers scans every server for the run's keys and counts them per
// entry ID. Fencing counters (keys ending in ":fence", kept without a TTL by
// design) are not counted.
func leftovers(ctx context.Context, addrs []string, run string) (map[string]int, error) {
	counts := map[string]int{}
	prefix := keyPrefix(run)
	for _, a := range addrs {
		c := redis.NewClient(GoRedisOptions(a, nil))
		it := c.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			k := it.Val()
			if strings.HasSuffix(k, ":fence") {
				continue
			}
			_, rest, _ := strings.Cut(k, prefix)
			parts := strings.SplitN(rest, ":", 4)
			if len(parts) < 3 {
				counts[rest]++
				continue
			}
			// quorumlock's release guards are "{name}:release-guard:...".
			parts[2] = strings.TrimSuffix(parts[2], "}")
			counts[strings.Join(parts[:3], ":")]++
		}
		if err := errors.Join(it.Err(), c.Close()); err != nil {
			return nil, err
		}
	}
	return counts, nil
}
