package bench

import (
	"context"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// BSMRedislock is github.com/bsm/redislock with its default options (no
// retry, a 16-byte random token) on one go-redis client built with
// GoRedisOptions; Client.Obtain then Lock.Release. N=1 only: it locks one
// server.
func BSMRedislock() Contender {
	return Contender{
		Name:     "bsm-redislock",
		OneNode:  true,
		Settings: "bsm/redislock defaults (Obtain with nil options: no retry) over go-redis with GoRedisOptions; Obtain + Release",
		Open: func(t Target) (Locker, error) {
			c := redis.NewClient(t.Masters[0].GoRedisOptions(t.dial(0)))
			return &bsmLocker{client: c, locker: redislock.New(c), t: t}, nil
		},
	}
}

type bsmLocker struct {
	client *redis.Client
	locker *redislock.Client
	t      Target
	held   *redislock.Lock
}

func (b *bsmLocker) Lock(ctx context.Context) error {
	l, err := b.locker.Obtain(ctx, b.t.Key, b.t.TTL, nil)
	b.held = l
	return err
}

func (b *bsmLocker) Unlock(ctx context.Context) error { return b.held.Release(ctx) }

func (b *bsmLocker) Close() error { return b.client.Close() }
