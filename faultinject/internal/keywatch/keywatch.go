// Package keywatch watches a key expire on a Redis server, for the tests of
// skewed clocks: when exactly the server let it go, bounded by the calls
// that saw it before and after.
package keywatch

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Expiry polls key (EXISTS, every millisecond) until it is gone and returns
// when the last call that still found it was sent and when the first that
// did not came back: the key expired on the server between the two. It fails
// t after limit, or on an error.
func Expiry(ctx context.Context, t testing.TB, rdb *redis.Client, key string, limit time.Duration) (lastSeen, goneBy time.Time) {
	t.Helper()
	begin := time.Now()
	for {
		sent := time.Now()
		n, err := rdb.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return lastSeen, time.Now()
		}
		lastSeen = sent
		if time.Since(begin) > limit {
			t.Fatalf("key %q still there after %v", key, limit)
		}
		time.Sleep(time.Millisecond) // the polling interval
	}
}
