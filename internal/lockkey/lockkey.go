// Package lockkey reads quorumlock's lock keys straight from one Redis master
// with a raw go-redis client, for the harness's leak scans, its tests and the
// quorumlock command's status and doctor. The library itself has no read
// path: these are operator and test tools. Options builds such a client from
// any address redisnode.Dial takes (URLs with users, passwords and TLS).
package lockkey

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/ctxerr"
	"github.com/quorumlock/quorumlock/internal/lockclient"
)

// ClientOptions returns go-redis options for a raw client of the master at
// addr (host:port) that behaves like the lock's own clients: context
// deadlines apply to socket I/O, commands are never retried, one dial
// attempt, short timeouts, RESP2 and no CLIENT SETINFO.
func ClientOptions(addr string) *redis.Options {
	return lockclient.Configure(&redis.Options{Addr: addr})
}

// DiscardClientLog replaces go-redis's process-wide logger with one that
// drops everything. go-redis logs every failed dial; under fault injection a
// dead master is routine. It affects every go-redis client in the process.
func DiscardClientLog() { redis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// Holder is what one master stores for one lock key.
type Holder struct {
	// Exists is false when the key is absent (free or expired).
	Exists bool
	// Value is the stored value: the token plus owner metadata.
	Value string
	// TTL is the remaining time to live; zero when the key is absent and
	// -1ns when the key exists without an expiry.
	TTL time.Duration
}

// inspectScript reads the value and the PTTL of KEYS[1] in one atomic step:
// {value or false, PTTL in ms (-2: no key, -1: no expiry)}, the value being
// a mutex's string as it is, a lock shape's sorted set as
// "<n> holds: <first member>".
var inspectScript = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'zset' then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0)[1] or ''
  return { redis.call('ZCARD', KEYS[1]) .. ' holds: ' .. first, redis.call('PTTL', KEYS[1]) }
end
return { redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]) }`)

// Inspect reads the holder of key and its remaining TTL on the master behind
// c. It returns by ctx's deadline when c applies context deadlines to socket
// I/O (ClientOptions does), with an error wrapping ctx.Err() when the
// context ended.
func Inspect(ctx context.Context, c redis.Scripter, key string) (Holder, error) {
	res, err := inspectScript.Run(ctx, c, []string{key}).Slice()
	if err != nil {
		return Holder{}, ctxerr.Wrap(ctx, err)
	}
	if len(res) != 2 {
		return Holder{}, fmt.Errorf("lockkey: inspect script returned %d values, want 2", len(res))
	}
	pttl, _ := res[1].(int64)
	value, ok := res[0].(string)
	if !ok {
		return Holder{}, nil
	}
	h := Holder{Exists: true, Value: value}
	switch {
	case pttl >= 0:
		h.TTL = time.Duration(pttl) * time.Millisecond
	case pttl == -1:
		h.TTL = -1
	}
	return h, nil
}
