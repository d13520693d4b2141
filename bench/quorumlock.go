package bench

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Quorumlock is this repository's lock with its default settings (quorum
// N/2+1, node timeout 50ms, release timeout 100ms, drift factor 0.01,
// retry backoff 10-250ms) and WithTTL(ttl); Mutex.Lock then Lease.Unlock.
// Its nodes are what a user gets from redisnode.Dial (the master's address
// or URL as given); under a condition that wraps the connections, the same
// settings through redisnode.New over a go-redis client built with
// GoRedisOptions.
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

// QuorumlockFair is Quorumlock with WithFairQueue: waiters take the lock in
// the order they came (a queue on each master), and a release wakes only
// the first of them.
func QuorumlockFair() Contender {
	return quorumlockContender("quorumlock-fair", "defaults + WithFairQueue()", redlock.WithFairQueue())
}

func quorumlockContender(name, settings string, opts ...redlock.LockOption) Contender {
	return Contender{
		Name:     name,
		Settings: "redlock " + settings + ", WithTTL(ttl); redisnode.Dial (redisnode.New over go-redis with GoRedisOptions when a condition wraps the connections); Mutex.Lock + Lease.Unlock",
		Open: func(t Target) (Locker, error) {
			q := &quorumlock{}
			nodes := make([]redlock.Node, len(t.Masters))
			for i, m := range t.Masters {
				if d := t.dial(i); d != nil {
					c := redis.NewClient(m.GoRedisOptions(d))
					q.clients = append(q.clients, c)
					nd, err := redisnode.New(c)
					if err != nil {
						return nil, errors.Join(err, q.closeNodes())
					}
					nodes[i] = nd
					continue
				}
				nd, err := redisnode.Dial(m.dialAddr)
				if err != nil {
					return nil, errors.Join(err, q.closeNodes())
				}
				q.owned = append(q.owned, nd)
				nodes[i] = nd
			}
			copts := []redlock.ClientOption{redlock.WithObserver(&q.retries)}
			if len(nodes) == 2 {
				copts = append(copts, redlock.WithQuorum(2))
			}
			c, err := redlock.New(nodes, copts...)
			if err != nil {
				return nil, errors.Join(err, q.closeNodes())
			}
			q.c = c
			q.m, err = c.NewMutex(t.Key, append([]redlock.LockOption{redlock.WithTTL(t.TTL)}, opts...)...)
			if err != nil {
				return nil, errors.Join(err, q.Close())
			}
			return q, nil
		},
	}
}

type quorumlock struct {
	retries retryCount
	c       *redlock.Client
	m       *redlock.Mutex
	lease   *redlock.Lease
	owned   []*redisnode.Node // from redisnode.Dial: Close closes their clients
	clients []*redis.Client   // behind redisnode.New
}

func (q *quorumlock) Lock(ctx context.Context) error {
	lease, err := q.m.Lock(ctx)
	q.lease = lease
	return err
}

func (q *quorumlock) Unlock(ctx context.Context) error { return q.lease.Unlock(ctx) }

// retryCount is an Observer counting, over the Lock calls that acquired,
// the attempts that failed after the first: the first attempt of a call
// that meets a held lock fails and puts it in line; each later one is a
// woken (or backed-off) attempt, and every failed one beyond the winning
// attempt is a wake-up that did not get the lock.
type retryCount struct {
	redlock.NopObserver
	n atomic.Int64
}

func (r *retryCount) OpDone(_ context.Context, e redlock.OpEvent) {
	if e.Op == redlock.OpAcquire && e.Err == nil && e.Attempts > 2 {
		r.n.Add(int64(e.Attempts - 2))
	}
}

// failedRetries implements retryCounter.
func (q *quorumlock) failedRetries() int64 { return q.retries.n.Load() }

// Close waits for the client's background releases (Client.Close), then
// closes the go-redis clients.
func (q *quorumlock) Close() error {
	var err error
	if q.c != nil {
		err = q.c.Close(context.Background())
	}
	return errors.Join(err, q.closeNodes())
}

func (q *quorumlock) closeNodes() error {
	errs := []error{closeClients(q.clients)}
	for _, nd := range q.owned {
		errs = append(errs, nd.Close())
	}
	return errors.Join(errs...)
}
