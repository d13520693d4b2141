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
	return redsyncContender("redsync", "redsync v4 defaults + WithExpiry(ttl)", false)
}

// RedsyncFailFast is Redsync with WithFailFast(true): an acquire returns
// as soon as a quorum has answered yes (or can no longer), instead of
// waiting for every node. The calls it leaves behind keep running; one
// that lands after the release leaves a key until its TTL (counted as an
// orphan). Each Lock takes a new redsync.Mutex: UnlockContext's calls
// left behind read the Mutex's value (redsync v4.18.1, mutex.go:144)
// while the next LockContext writes it (mutex.go:117), a data race.
func RedsyncFailFast() Contender {
	return redsyncContender("redsync-failfast", "redsync v4 defaults + WithExpiry(ttl), WithFailFast(true); a new Mutex per Lock", true, redsync.WithFailFast(true))
}

func redsyncContender(name, settings string, perLock bool, opts ...redsync.Option) Contender {
	return Contender{
		Name:     name,
		Settings: settings + "; goredis/v9 pools over go-redis with GoRedisOptions; LockContext + UnlockContext",
		Open: func(t Target) (Locker, error) {
			clients := goRedisClients(t)
			pools := make([]redsyncredis.Pool, len(clients))
			for i, c := range clients {
				pools[i] = goredis.NewPool(c)
			}
			rs, mopts := redsync.New(pools...), append([]redsync.Option{redsync.WithExpiry(t.TTL)}, opts...)
			l := &redsyncLocker{m: rs.NewMutex(t.Key, mopts...), clients: clients}
			if perLock {
				l.fresh = func() *redsync.Mutex { return rs.NewMutex(t.Key, mopts...) }
			}
			return l, nil
		},
	}
}

type redsyncLocker struct {
	m       *redsync.Mutex
	fresh   func() *redsync.Mutex // set: a new Mutex for every Lock
	clients []*redis.Client
}

func (r *redsyncLocker) Lock(ctx context.Context) error {
	if r.fresh != nil {
		r.m = r.fresh()
	}
	return r.m.LockContext(ctx)
}

func (r *redsyncLocker) Unlock(ctx context.Context) error {
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
