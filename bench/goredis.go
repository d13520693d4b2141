package bench

import (
	"context"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// A DialFunc opens a connection to addr.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Client settings every contender shares (those of redisnode.Dial).
const (
	dialTimeout = 250 * time.Millisecond
	ioTimeout   = 500 * time.Millisecond
)

// GoRedisOptions returns the options of every go-redis client of the run,
// whichever contender uses it: the settings redisnode.Dial gives its own
// clients, so that no contender pays for go-redis defaults that ignore its
// deadlines (FIELD-NOTES §3). Context deadlines apply to socket I/O
// (ContextTimeoutEnabled), commands are never retried (MaxRetries -1), one
// dial attempt (DialerRetries 1) with a 250ms timeout, 500ms read, write and
// pool timeouts, RESP2, no CLIENT SETINFO, no maintenance notifications.
// dial, when not nil, opens the connections.
func GoRedisOptions(addr string, dial DialFunc) *redis.Options {
	opt := &redis.Options{
		Addr:                     addr,
		ContextTimeoutEnabled:    true,
		MaxRetries:               -1,
		DialerRetries:            1,
		DialTimeout:              dialTimeout,
		ReadTimeout:              ioTimeout,
		WriteTimeout:             ioTimeout,
		PoolTimeout:              ioTimeout,
		DisableIdentity:          true,
		Protocol:                 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if dial != nil {
		opt.Dialer = dial
	}
	return opt
}

// goRedisClients builds one go-redis client per address.
func goRedisClients(t Target) []*redis.Client {
	cs := make([]*redis.Client, len(t.Addrs))
	for i, a := range t.Addrs {
		cs[i] = redis.NewClient(GoRedisOptions(a, t.Dial))
	}
	return cs
}

// closeClients closes every client and returns the first error.
func closeClients(cs []*redis.Client) error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
