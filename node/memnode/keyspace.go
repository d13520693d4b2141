package memnode

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// The node keeps one keyspace, as a Redis master does, and runs on it the
// steps of package redisnode's Lua scripts (node/redisnode/scripts), with
// the same key names: a lock's key is its name, and the keys derived from
// it are those redisnode derives (package wire). So a lock whose name is another
// lock's derived key meets that key, and one name used as two kinds of lock
// meets a value of the wrong type, exactly as on Redis; package nodetest
// checks both on memnode and on real servers.

// errWrongType is Redis's reply to a command on a key holding the other
// type of value (GET on a sorted set, ZADD on a string).
var errWrongType = errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")

// role is what wrote a key, for Keys; it plays no part in the commands.
type role uint8

const (
	roleLock    role = iota // a mutex's key (Acquire)
	roleGuard               // a release guard (Release, ReleaseHold)
	roleFence               // a fencing counter (RaiseFence)
	roleHolds               // a shared lock's holds (AcquireHold)
	roleWaiting             // a shared lock's waiting writers (AcquireHold)
	roleQueue               // a waiting line's arrivals or entry expiries (AcquireQueued)
	roleGrant               // a grant record (a release's hand-over)
	roleConfig              // the master's configuration record (SetRecord)
)

// value is one key's value: a string, or a sorted set (set != nil).
type value struct {
	str string
	exp time.Time // a string's expiry on the node clock; zero: none
	// set maps a sorted set's members to their expiry on the node clock
	// (the score of redisnode's scripts). The scripts keep a set's key
	// expiry at its latest member's and prune expired members before they
	// read a set, so a set lives exactly while one of its members does.
	set holdSet
	// scored marks a sorted set whose members stay until a script removes
	// them (a fair queue's arrivals and expiries, queue.go); the key lives
	// while the node clock is not past exp (the scripts' PEXPIREAT), zero:
	// for ever.
	scored bool
	role   role
	// vals is a waiting line's values (the hash "{key}:queue:val", as on
	// Redis): each waiter's latest value and TTL, what a release hands it
	// the key at (queue.go). A key holding it is neither a string nor a
	// set (WRONGTYPE to both).
	vals map[string]entryVal
}

// holdSet is a sorted set of the scripts: member -> expiry.
type holdSet map[string]time.Time

// lookupLocked returns key's live value, or nil; it drops an expired
// string, and the expired members of a set (the set with its last one).
// n.mu must be held.
func (n *Node) lookupLocked(key string, now time.Time) *value {
	v, ok := n.data[key]
	if !ok {
		return nil
	}
	if v.set != nil && v.scored { // Redis's own rule: expired once now is past exp
		if len(v.set) > 0 && (v.exp.IsZero() || !now.After(v.exp)) {
			return v
		}
	} else if v.set != nil {
		for m, exp := range v.set {
			if !now.Before(exp) {
				delete(v.set, m)
			}
		}
		if len(v.set) > 0 {
			return v
		}
	} else if v.exp.IsZero() || now.Before(v.exp) {
		return v
	}
	delete(n.data, key)
	return nil
}

// getLocked is GET: key's string, ok false when key is absent, errWrongType
// on a sorted set.
func (n *Node) getLocked(key string, now time.Time) (s string, ok bool, err error) {
	v := n.lookupLocked(key, now)
	switch {
	case v == nil:
		return "", false, nil
	case v.set != nil || v.vals != nil || v.role == roleConfig: // the record is a hash on Redis
		return "", false, errWrongType
	}
	return v.str, true, nil
}

// setLocked is SET key s [PX ttl]: it replaces any value; ttl 0 sets none.
func (n *Node) setLocked(key, s string, ttl time.Duration, r role, now time.Time) {
	v := &value{str: s, role: r}
	if ttl > 0 {
		v.exp = now.Add(ttl)
	}
	n.data[key] = v
	n.sweepLocked(now)
}

// zsetLocked is a script's ZREMRANGEBYSCORE key -inf now before it reads
// key's set: the live members, nil when key is absent, errWrongType on a
// string.
func (n *Node) zsetLocked(key string, now time.Time) (holdSet, error) {
	v := n.lookupLocked(key, now)
	switch {
	case v == nil:
		return nil, nil
	case v.set == nil:
		return nil, errWrongType
	case v.scored: // a queue's arrivals read as holds: the scores are times all the same
		for m, score := range v.set {
			if !now.Before(score) {
				delete(v.set, m)
			}
		}
		if len(v.set) == 0 {
			delete(n.data, key)
			return nil, nil
		}
	}
	return v.set, nil
}

// zaddLocked is ZADD key exp member on a key that is absent or a set
// (zsetLocked said so): it creates the set, written by r, when absent.
func (n *Node) zaddLocked(key, member string, exp time.Time, r role, now time.Time) {
	v := n.lookupLocked(key, now)
	if v == nil {
		v = &value{set: holdSet{}, role: r}
		n.data[key] = v
		defer n.sweepLocked(now)
	}
	v.set[member] = exp
}

// zremLocked is ZREM key member on a live set: it reports whether member
// was there and drops the key with its last member.
func (n *Node) zremLocked(key, member string, set holdSet) bool {
	if _, ok := set[member]; !ok {
		return false
	}
	delete(set, member)
	if len(set) == 0 {
		delete(n.data, key)
	}
	return true
}

// sweepLocked drops every expired key once the keyspace has doubled since
// the last sweep, as Redis's active expiry does: keys nobody reads again
// (release guards, above all) do not pile up.
func (n *Node) sweepLocked(now time.Time) {
	if len(n.data) < n.sweepAt {
		return
	}
	for k := range n.data {
		n.lookupLocked(k, now)
	}
	n.sweepAt = max(minSweep, 2*len(n.data))
}

const minSweep = 4096

// Key names: package wire derives them for redisnode and memnode alike, so
// that they meet other names as they do on Redis.

// checkKey refuses a key whose derived keys could not share its Redis
// Cluster slot (wire.Slottable: a '}' but no valid hash tag), as redisnode
// refuses it, with an error wrapping redlock.ErrNotSent.
func (n *Node) checkKey(key string) error {
	if wire.Slottable(key) {
		return nil
	}
	return fmt.Errorf("memnode %s: %w: key %s has '}' but no valid hash tag (a non-empty {...}), so its keys could not share one Redis Cluster slot (redisnode refuses it too)", n.addr, redlock.ErrNotSent, quote(key))
}

// derived is name(key), a key derived from lock key key, or checkKey's
// error.
func (n *Node) derived(key string, name func(string) string) (string, error) {
	if err := n.checkKey(key); err != nil {
		return "", err
	}
	return name(key), nil
}

// guardKey names the release guard of key for who (a value, or a hold's
// wire.Member).
func (n *Node) guardKey(key, who string) (string, error) {
	return n.derived(key, func(key string) string { return wire.GuardKey(key, who) })
}

func (n *Node) fenceKey(key string) (string, error)    { return n.derived(key, wire.FenceKey) }
func (n *Node) queueKey(key string) (string, error)    { return n.derived(key, wire.QueueKey) }
func (n *Node) queueTTLKey(key string) (string, error) { return n.derived(key, wire.QueueTTLKey) }
func (n *Node) grantKey(key string) (string, error)    { return n.derived(key, wire.GrantKey) }
func (n *Node) waitingKey(key string) (string, error)  { return n.derived(key, wire.WaitingKey) }

// quote quotes a key for an error, cut to 100 bytes followed by "..." and
// its length.
func quote(s string) string {
	const most = 100
	if len(s) <= most {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:most]) + "...(" + strconv.Itoa(len(s)) + " bytes)"
}
