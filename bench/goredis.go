package bench

import (
	"context"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockclient"
)

// A DialFunc opens a connection to addr.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Client settings every contender shares (those of redisnode.Dial).
const (
	dialTimeout = lockclient.DialTimeout
	ioTimeout   = lockclient.IOTimeout
)

// GoRedisOptions returns the options of every go-redis client of the run,
// whichever contender uses it: the settings redisnode.Dial gives its own
// clients (internal/lockclient), so that no contender pays for go-redis
// defaults that ignore its deadlines. dial, when not nil, opens the
// connections.
func GoRedisOptions(addr string, dial DialFunc) *redis.Options {
	opt := lockclient.Configure(&redis.Options{Addr: addr})
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
