package redlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// goRedisLog routes go-redis's own log lines (failed dials, pool errors) to
// a slog.Logger. go-redis has one logger for the whole process:
// redis.SetLogger(goRedisLog{l}) routes it, redis.SetLogger(&logging.VoidLogger{})
// (or logging.Disable()) silences it.
type goRedisLog struct{ l *slog.Logger }

func (g goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	g.l.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// The library's records (WithLogger) and go-redis's (redis.SetLogger) in one
// slog.Logger: a lease lost on in-memory masters, then a master that
// refuses connections.
func ExampleWithLogger() {
	// For a stable output, leave out the time, how long the lease was held
	// and the error (which names every node's answer).
	steady := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "held" || a.Key == "err" {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: steady}))

	masters := []*memnode.Node{memnode.New("redis-1:6379"), memnode.New("redis-2:6379"), memnode.New("redis-3:6379")}
	nodes := []redlock.Node{masters[0], masters[1], masters[2]}
	client, err := redlock.New(nodes, redlock.WithLogger(log))
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())
	mutex, err := client.NewMutex("invoices:42", redlock.WithTTL(time.Minute))
	if err != nil {
		panic(err)
	}
	lease, err := mutex.Lock(context.Background())
	if err != nil {
		panic(err)
	}
	_ = lease.Unlock(context.Background()) // Debug: below the handler's level, not written
	lease, err = mutex.Lock(context.Background())
	if err != nil {
		panic(err)
	}
	for _, m := range masters {
		m.Restart(false) // every master loses the key
	}
	_ = lease.Extend(context.Background()) // finds the lock lost: a warning

	redis.SetLogger(goRedisLog{log})
	defer redis.SetLogger(&logging.VoidLogger{}) // this test binary's own setting
	down, err := redisnode.Dial("127.0.0.1:1")
	if err != nil {
		panic(err)
	}
	defer down.Close()
	_, _ = down.Info(context.Background())
	// Output:
	// level=WARN msg="redlock: lease lost" lock=invoices:42 end=lost
	// level=WARN msg="redis: connection pool: failed to dial after 1 attempts: dial tcp 127.0.0.1:1: connect: connection refused" component=go-redis
}
