package lockkey

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/ctxerr"
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

// Hold is one live hold of a lock shape: the member "<group>\n<id>" of the
// sorted set, whose score is its expiry in the server's milliseconds.
type Hold struct {
	// Group is "r" (a reader), "w" (a writer), "o:<owner>" (a reentrant
	// owner) or "s:<k>" (a semaphore of k places).
	Group string
	// ID is the acquisition's token and owner metadata (ParseOwner).
	ID string
	// TTL is the time until the hold expires, on the server's clock.
	TTL time.Duration
}

// Kind names a hold's group for people: "reader", "writer",
// "reentrant owner <owner>", "semaphore holder (k=<k>)".
func (h Hold) Kind() string {
	switch {
	case h.Group == "r":
		return "reader"
	case h.Group == "w":
		return "writer"
	case strings.HasPrefix(h.Group, "o:"):
		return fmt.Sprintf("reentrant owner %q", h.Group[2:])
	case strings.HasPrefix(h.Group, "s:"):
		return "semaphore holder (k=" + h.Group[2:] + ")"
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
// its fencing counter (FenceKey) and its waiting writers (WaitingKey), in
// one atomic script. It returns by ctx's deadline when c applies context
// deadlines to socket I/O (ClientOptions and Options do), with an error
// wrapping ctx.Err() when the context ended; a Redis error reply (NOPERM,
// for example) is returned as it is.
func Read(ctx context.Context, c redis.Scripter, name string) (Lock, error) {
	res, err := readScript.Run(ctx, c, []string{name, FenceKey(name), WaitingKey(name)}).Slice()
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
		_, _ = fmt.Sscan(f, &l.Fence)
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
		group, id, _ := strings.Cut(member, "\n")
		l.Holds = append(l.Holds, Hold{Group: group, ID: id, TTL: time.Duration(int64(score)-now) * time.Millisecond})
	}
	sort.SliceStable(l.Holds, func(i, j int) bool { return l.Holds[i].TTL < l.Holds[j].TTL })
	return l, nil
}

// FenceKey is the key of name's fencing counter, as node/redisnode names it:
// name+":fence" when name has a hash tag, else "{name}:fence" (same Redis
// Cluster slot as name).
func FenceKey(name string) string { return slotKey(name, ":fence") }

// WaitingKey is the key of name's waiting writers, as node/redisnode names
// it (see FenceKey).
func WaitingKey(name string) string { return slotKey(name, ":waiting") }

func slotKey(name, suffix string) string {
	if hashTag(name) {
		return name + suffix
	}
	return "{" + name + "}" + suffix
}

// hashTag reports whether name has a valid Redis Cluster hash tag (a
// non-empty {...}).
func hashTag(name string) bool {
	i := strings.IndexByte(name, '{')
	if i < 0 {
		return false
	}
	return strings.IndexByte(name[i+1:], '}') > 0
}

// Derived reports whether key is one that the lock keeps next to a lock
// key rather than a lock key itself: a fencing counter, a waiting-writers
// set, a release guard (redlock refuses such names as lock names), or an
// election's term record, the election's name + ":term:" + a lease's
// token (32 hexadecimal digits).
func Derived(key string) bool {
	if strings.Contains(key, ":release-guard:") || termRecord(key) {
		return true
	}
	return hashTag(key) && (strings.HasSuffix(key, ":fence") || strings.HasSuffix(key, ":waiting"))
}

// termRecord reports whether key ends in ":term:" and a lease's token.
func termRecord(key string) bool {
	i := strings.LastIndex(key, ":term:")
	if i < 0 || len(key)-(i+len(":term:")) != 32 {
		return false
	}
	for _, c := range key[i+len(":term:"):] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Pattern reports whether s is a glob pattern (it has *, ? or [) rather
// than one name.
func Pattern(s string) bool { return strings.ContainsAny(s, "*?[") }

// Scan returns up to limit lock names matching the glob pattern on the
// master behind c (SCAN MATCH), without the keys that Derived reports, and
// whether more matched. The order is Redis's.
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
			if Derived(k) || seen[k] {
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
