package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// Redsync is github.com/go-redsync/redsync/v4 with its default settings (32
// tries, a random 50-250ms delay between them, drift factor 0.01, timeout
// factor 0.05, waits for every node: no FailFast) and WithExpiry(ttl), over
// its go-redis v9 pool adapter on clients built with GoRedisOptions;
// Mutex.LockContext then Mutex.UnlockContext.
func Redsync() Contender {
	return Contender{
		Name:     "redsync",
		Settings: "redsync v4 defaults + WithExpiry(ttl); goredis/v9 pools over go-redis with GoRedisOptions; LockContext + UnlockContext",
		Open: func(t Target) (Locker, error) {
			clients := goRedisClients(t)
			pools := make([]redsyncredis.Pool, len(clients))
			for i, c := range clients {
				pools[i] = goredis.NewPool(c)
			}
			m := redsync.New(pools...).NewMutex(t.Key, redsync.WithExpiry(t.TTL))
			return &redsyncLocker{m: m, clients: clients}, nil
		},
	}
}

type redsyncLocker struct {
	m       *redsync.Mutex
	clients []*redis.Client
}

func (r *redsyncLocker) Cycle(ctx context.Context) error {
	if err := r.m.LockContext(ctx); err != nil {
		return err
	}
	ok, err := r.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("bench: redsync: unlock reported false")
	}
	if err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

func (r *redsyncLocker) Close() error { return closeClients(r.clients) }
