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
			c := redis.NewClient(GoRedisOptions(t.Addrs[0], t.Dial))
			return &bsmLocker{client: c, locker: redislock.New(c), t: t}, nil
		},
	}
}

type bsmLocker struct {
	client *redis.Client
	locker *redislock.Client
	t      Target
}

func (b *bsmLocker) Cycle(ctx context.Context) error {
	l, err := b.locker.Obtain(ctx, b.t.Key, b.t.TTL, nil)
	if err != nil {
		return err
	}
	return l.Release(ctx)
}

func (b *bsmLocker) Close() error { return b.client.Close() }
