package bench

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Quorumlock is this repository's lock with its default settings (quorum
// N/2+1, node timeout 50ms, release timeout 100ms, drift factor 0.01) over
// redisnode Nodes wrapping go-redis clients built with GoRedisOptions;
// Mutex.Lock then Lease.Unlock.
func Quorumlock() Contender {
	return quorumlockContender("quorumlock", "defaults")
}

// QuorumlockFencing is Quorumlock with WithFencing: every lease carries a
// fencing token, which costs one more round (the write-back). Its fencing
// counter keys are kept without a TTL by design and are not counted as
// orphans.
func QuorumlockFencing() Contender {
	return quorumlockContender("quorumlock-fencing", "defaults + WithFencing()", redlock.WithFencing())
}

// QuorumlockRenew is Quorumlock with WithAutoRenew(0): every lease starts a
// renewal goroutine and timer (a renewal every TTL/3, so none runs within a
// short cycle).
func QuorumlockRenew() Contender {
	return quorumlockContender("quorumlock-renew", "defaults + WithAutoRenew(0) (every TTL/3)", redlock.WithAutoRenew(0))
}

func quorumlockContender(name, settings string, opts ...redlock.LockOption) Contender {
	return Contender{
		Name:     name,
		Settings: "redlock " + settings + ", WithTTL(ttl); redisnode.New over go-redis with GoRedisOptions; Mutex.Lock + Lease.Unlock",
		Open: func(t Target) (Locker, error) {
			clients := goRedisClients(t)
			nodes := make([]redlock.Node, len(clients))
			for i, c := range clients {
				nd, err := redisnode.New(c)
				if err != nil {
					return nil, errors.Join(err, closeClients(clients))
				}
				nodes[i] = nd
			}
			var copts []redlock.ClientOption
			if len(nodes) == 2 {
				copts = append(copts, redlock.WithQuorum(2))
			}
			c, err := redlock.New(nodes, copts...)
			if err != nil {
				return nil, errors.Join(err, closeClients(clients))
			}
			m, err := c.NewMutex(t.Key, append([]redlock.LockOption{redlock.WithTTL(t.TTL)}, opts...)...)
			if err != nil {
				return nil, errors.Join(err, c.Close(context.Background()), closeClients(clients))
			}
			return &quorumlock{c: c, m: m, clients: clients}, nil
		},
	}
}

type quorumlock struct {
	c       *redlock.Client
	m       *redlock.Mutex
	clients []*redis.Client
}

func (q *quorumlock) Cycle(ctx context.Context) error {
	lease, err := q.m.Lock(ctx)
	if err != nil {
		return err
	}
	return lease.Unlock(ctx)
}

// Close waits for the client's background releases (Client.Close), then
// closes the go-redis clients.
func (q *quorumlock) Close() error {
	return errors.Join(q.c.Close(context.Background()), closeClients(q.clients))
}
