package redisguard_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumlock/quorumlock/fence"
	"github.com/quorumlock/quorumlock/fence/redisguard"
	"github.com/redis/go-redis/v9"
)

// A fenced write to a Redis key: the holder of token 42 writes, the holder
// of an earlier lease (41), paused past it, is refused; the holder of 42
// may write again. The server is a redis-server this package's tests
// started.
func ExampleSet() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: server.Addr()})
	defer rdb.Close()

	fmt.Println(redisguard.Set(ctx, rdb, "invoices:42:total", 42, "1250.00"))
	err := redisguard.Set(ctx, rdb, "invoices:42:total", 41, "990.00")
	fmt.Println(err)
	fmt.Println("stale:", errors.Is(err, fence.ErrStale))
	fmt.Println(redisguard.Set(ctx, rdb, "invoices:42:total", 42, "1300.00"))

	total, _ := rdb.Get(ctx, "invoices:42:total").Result()
	mark, _ := rdb.Get(ctx, "{invoices:42:total}:fence-mark").Result()
	fmt.Println(total, mark)
	// Output:
	// <nil>
	// fence: stale token 41 for "invoices:42:total": the resource has seen 42
	// stale: true
	// <nil>
	// 1300.00 42
}
