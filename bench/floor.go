package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/redis/go-redis/v9"
)

// unlockScript is the compare-and-delete every single-node lock uses.
var unlockScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Floor is the least a lock on one node can cost: SET key token NX PX ttl,
// then the compare-and-delete script (EVALSHA), through one go-redis client
// with GoRedisOptions and a fresh 16-byte random token per cycle. No retry,
// no validity, no quorum. N=1 only.
func Floor() Contender {
	return Contender{
		Name:     "floor",
		OneNode:  true,
		Settings: "SET NX PX + compare-and-delete script (EVALSHA) on one node, 16-byte crypto/rand token, go-redis with GoRedisOptions",
		Open: func(t Target) (Locker, error) {
			return &floor{client: redis.NewClient(t.Masters[0].GoRedisOptions(t.dial(0))), t: t}, nil
		},
	}
}

type floor struct {
	client *redis.Client
	t      Target
	token  string
}

// errNotObtained is a floor acquire that found the key held.
var errNotObtained = errors.New("bench: floor: key already held")

func (f *floor) Lock(ctx context.Context) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	token := hex.EncodeToString(b[:])
	ok, err := f.client.SetNX(ctx, f.t.Key, token, f.t.TTL).Result()
	if err != nil {
		return err
	}
	if !ok {
		return errNotObtained
	}
	f.token = token
	return nil
}

func (f *floor) Unlock(ctx context.Context) error {
	return unlockScript.Run(ctx, f.client, []string{f.t.Key}, f.token).Err()
}

func (f *floor) Close() error { return f.client.Close() }
