// Package redisguard is the Redis side of fencing: Set writes a string key
// only if the writer's fencing token is at least the highest the key has
// seen, in one Lua script (set.lua), so that a holder paused past its lease
// cannot overwrite a newer holder's value. It takes a go-redis v9 client
// as a redis.Scripter (*redis.Client, *redis.ClusterClient, *redis.Ring).
// Tokens and errors are package fence's.
package redisguard

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/quorumlock/quorumlock/fence"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/redis/go-redis/v9"
)

//go:embed set.lua
var setLua string

var setScript = redis.NewScript(setLua)

// ErrKey is the error for a key that contains '}' but no hash tag (a
// non-empty {...}), whose mark could not share its Redis Cluster hash slot.
var ErrKey = errors.New("redisguard: key cannot share a hash slot with its mark")

// markSuffix ends the name of a key's high-water mark.
const markSuffix = ":fence-mark"

// markKey names key's high-water mark, in key's hash slot: key + suffix when
// key has a hash tag (which then picks the slot), else "{key}" + suffix
// ("{key}" hashes as key does).
func markKey(key string) (string, error) {
	if !wire.Slottable(key) {
		return "", fmt.Errorf("%w: %s has '}' but no hash tag; give it one ({...}) or drop the '}'", ErrKey, strconv.Quote(short(key)))
	}
	return wire.Derive(key, markSuffix), nil
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Set writes value to key (SET, no expiry) if token is at least key's
// high-water mark, and raises the mark to token, in one script; otherwise
// it writes nothing and returns a *fence.StaleError (fence.ErrStale) naming
// both tokens. A token equal to the mark is accepted (the same lease
// writing again); a token below 1 is fence.ErrInvalid.
//
// The mark is a string key beside key, in its hash slot: "{key}:fence-mark",
// or key + ":fence-mark" when key has a hash tag ("{tenant-7}:total" keeps
// its mark in "{tenant-7}:total:fence-mark"). It never expires: deleting it
// forgets the tokens seen, and a later lower token is accepted. A key with
// '}' but no hash tag is refused with ErrKey. Errors of the server come
// back wrapped, naming the key.
func Set(ctx context.Context, c redis.Scripter, key string, token fence.Token, value string) error {
	if token < 1 {
		return fmt.Errorf("%w: %d is not a fencing token (they start at 1; a lease without redlock.WithFencing carries 0)", fence.ErrInvalid, int64(token))
	}
	mark, err := markKey(key)
	if err != nil {
		return err
	}
	reply, err := setScript.Run(ctx, c, []string{mark, key}, token.String(), value).Slice()
	if err != nil {
		return fmt.Errorf("redisguard: set %s with token %d: %w", strconv.Quote(short(key)), token, err)
	}
	if len(reply) == 1 && reply[0] == int64(1) {
		return nil
	}
	if len(reply) == 2 && reply[0] == int64(0) {
		if s, ok := reply[1].(string); ok {
			if highest, err := fence.Parse(s); err == nil {
				return &fence.StaleError{Resource: key, Token: token, Highest: highest}
			}
		}
	}
	return fmt.Errorf("redisguard: set %s: unexpected reply %v from set.lua", strconv.Quote(short(key)), reply)
}
