package lockkey

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/ctxerr"
	"github.com/quorumlock/quorumlock/internal/wire"
)

// Lock is one master's view of one lock name: the lock key (a mutex's
// string, or the sorted set of holds of a reentrant mutex, read-write lock
// or semaphore), its fencing counter and its waiting writers.
type Lock struct {
	// Type is the lock key's Redis type: "none" (free or expired),
	// "string" (a mutex), "zset" (a lock shape's holds) or another type
	// (the name is not a quorumlock lock).
	Type string
	// Value and TTL are a mutex's stored value (token and owner metadata)
	// and remaining time to live (-1ns: no expiry). Empty and zero for
	// other types.
	Value string
	TTL   time.Duration
	// Holds are a lock shape's live holds, soonest expiry first.
	Holds []Hold
	// Fence is the lock's fencing counter, and HasFence whether it exists.
	Fence    int64
	HasFence bool
	// Waiting counts the live marks of waiting writers (a read-write lock
	// with writer preference).
	Waiting int
}

// Hold is one live hold of a lock shape: a member of the sorted set
// (wire.Member), whose score is its expiry in the server's milliseconds.
type Hold struct {
	// Group is "r" (a reader), "w" (a writer), "o:<owner>" (a reentrant
	// owner) or "s:<k>" (a semaphore of k places).
	Group string
	// ID is the acquisition's token and owner metadata (wire.ParseOwner).
	ID string
	// TTL is the time until the hold expires, on the server's clock.
	TTL time.Duration
}

// Kind names a hold's group for people: "reader", "writer",
// "reentrant owner <owner>", "semaphore holder (k=<k>)" (wire's groups).
func (h Hold) Kind() string {
	if owner, ok := wire.GroupOwner(h.Group); ok {
		return fmt.Sprintf("reentrant owner %q", owner)
	}
	if k, ok := wire.GroupPlaces(h.Group); ok {
		return "semaphore holder (k=" + k + ")"
	}
	switch h.Group {
	case wire.ReaderGroup:
		return "reader"
	case wire.WriterGroup:
		return "writer"
	}
	return fmt.Sprintf("holder of group %q", h.Group)
}

// readScript reads a lock in one atomic step. KEYS: the lock key, its
// fencing counter, its waiting writers. It returns {type, value or false,
// PTTL, fence or false, {member, score, ...} of the live holds, live
// waiting marks, server time in ms}. Commands: TIME, TYPE, GET, PTTL,
// ZRANGEBYSCORE, ZCOUNT.
var readScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local typ = redis.call('TYPE', KEYS[1])['ok']
local fence = false
if redis.call('TYPE', KEYS[2])['ok'] == 'string' then fence = redis.call('GET', KEYS[2]) end
local waiting = 0
if redis.call('TYPE', KEYS[3])['ok'] == 'zset' then waiting = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') end
local value, holds = false, {}
if typ == 'string' then
  value = redis.call('GET', KEYS[1])
elseif typ == 'zset' then
  holds = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
end
return { typ, value, redis.call('PTTL', KEYS[1]), fence, holds, waiting, tostring(now) }`)

// ReadCommands are the commands Read runs (inside one EVALSHA, or EVAL the
// first time), which an ACL user must be granted.
const ReadCommands = "+evalsha +eval +time +type +get +pttl +zrangebyscore +zcount"

// Read reads the lock called name on the master behind c: the lock key,
// its fencing counter (wire.FenceKey) and its waiting writers
// (wire.WaitingKey), in
// one atomic script. It returns by ctx's deadline when c applies context
// deadlines to socket I/O (ClientOptions and Options do), with an error
// wrapping ctx.Err() when the context ended; a Redis error reply (NOPERM,
// for example) is returned as it is.
func Read(ctx context.Context, c redis.Scripter, name string) (Lock, error) {
	res, err := readScript.Run(ctx, c, []string{name, wire.FenceKey(name), wire.WaitingKey(name)}).Slice()
	if err != nil {
		return Lock{}, ctxerr.Wrap(ctx, err)
	}
	if len(res) != 7 {
		return Lock{}, fmt.Errorf("lockkey: read script returned %d values, want 7", len(res))
	}
	var l Lock
	l.Type, _ = res[0].(string)
	l.Value, _ = res[1].(string)
	pttl, _ := res[2].(int64)
	switch {
	case pttl >= 0:
		l.TTL = time.Duration(pttl) * time.Millisecond
	case pttl == -1:
		l.TTL = -1
	}
	if f, ok := res[3].(string); ok {
		l.HasFence = true
		l.Fence, _, _ = wire.ParseFence(f) // 0 for a key that holds no counter
	}
	w, _ := res[5].(int64)
	l.Waiting = int(w)
	var now int64
	if s, ok := res[6].(string); ok {
		_, _ = fmt.Sscan(s, &now)
	}
	holds, _ := res[4].([]any)
	for i := 0; i+1 < len(holds); i += 2 {
		member, _ := holds[i].(string)
		var score float64
		if s, ok := holds[i+1].(string); ok {
			_, _ = fmt.Sscan(s, &score)
		}
		group, id, _ := wire.ParseMember(member)
		l.Holds = append(l.Holds, Hold{Group: group, ID: id, TTL: time.Duration(int64(score)-now) * time.Millisecond})
	}
	sort.SliceStable(l.Holds, func(i, j int) bool { return l.Holds[i].TTL < l.Holds[j].TTL })
	return l, nil
}

// Pattern reports whether s is a glob pattern (it has *, ? or [) rather
// than one name.
func Pattern(s string) bool { return strings.ContainsAny(s, "*?[") }

// Scan returns up to limit lock names matching the glob pattern on the
// master behind c (SCAN MATCH), without the keys a lock keeps beside its
// own (those wire.Parse reports as derived), and whether more matched. The order is Redis's.
func Scan(ctx context.Context, c redis.Cmdable, pattern string, limit int) ([]string, bool, error) {
	var names []string
	seen := map[string]bool{}
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return names, false, ctxerr.Wrap(ctx, err)
		}
		for _, k := range keys {
			if _, kind := wire.Parse(k); kind != wire.LockKey || seen[k] {
				continue
			}
			if len(names) == limit {
				return names, true, nil
			}
			seen[k] = true
			names = append(names, k)
		}
		if next == 0 {
			return names, false, nil
		}
		cursor = next
	}
}
