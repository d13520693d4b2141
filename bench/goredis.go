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

// goRedisClients builds one go-redis client per master of t.
func goRedisClients(t Target) []*redis.Client {
	cs := make([]*redis.Client, len(t.Masters))
	for i, m := range t.Masters {
		cs[i] = redis.NewClient(m.GoRedisOptions(t.dial(i)))
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
