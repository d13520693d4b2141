package wire

import "strings"

// The marks of the derived keys: each is Base(key) followed by one of them
// (a release guard by guardMark and a hash), a term record is the lock name
// followed by termMark and a token.
const (
	fenceMark    = ":fence"
	waitingMark  = ":waiting"
	queueMark    = ":queue"
	queueTTLMark = ":queue:ttl"
	queueValMark = ":queue:val"
	grantMark    = ":grant"
	guardMark    = ":release-guard:"
	channelMark  = ":released"
	termMark     = ":term:"
)

// Derive names a key beside lock key key, in its Redis Cluster slot when
// key is Slottable: Base(key)+mark, in one allocation. The lock's own
// derived keys are below; fence/redisguard names its marks with it.
func Derive(key, mark string) string {
	if HasTag(key) {
		return key + mark
	}
	return "{" + key + "}" + mark
}

// FenceKey names the fencing counter of lock key (a string,
// FormatFence): Base(key)+":fence".
func FenceKey(key string) string { return Derive(key, fenceMark) }

// WaitingKey names the waiting marks of shared lock key (a sorted set:
// waiting writer -> expiry in server milliseconds): Base(key)+":waiting".
func WaitingKey(key string) string { return Derive(key, waitingMark) }

// QueueKey names the waiting line of lock key (a sorted set: waiter ID ->
// arrival in milliseconds): Base(key)+":queue".
func QueueKey(key string) string { return Derive(key, queueMark) }

// QueueTTLKey names the expiries of the entries of key's waiting line and
// its tombstones (a sorted set: waiter ID -> expiry in server
// milliseconds): Base(key)+":queue:ttl".
func QueueTTLKey(key string) string { return Derive(key, queueTTLMark) }

// QueueValKey names the values of the entries of key's waiting line (a
// hash: waiter ID -> "<TTL in ms> <value>", the TTL and value of the
// waiter's latest acquire there): Base(key)+":queue:val". A release hands
// the key to the line's first live waiter at that value.
func QueueValKey(key string) string { return Derive(key, queueValMark) }

// GrantKey names the record of the latest hand-over of lock key (a string,
// Grant(id, value), living as long as the key it set): Base(key)+":grant".
func GrantKey(key string) string { return Derive(key, grantMark) }

// Grant is the record GrantKey holds once a release handed key to waiter
// id at value: id, a newline, value (IDs hold no newline).
// A release's notification is the same record when the release handed
// the key (QueueNode.Watch), else the waiter's ID alone.
func Grant(id, value string) string { return id + "\n" + value }

// Resync is the notification a node's watch gives after it may have lost
// some (its connection broke and it subscribed again): a lone newline,
// which no grant or waiter ID is (QueueNode.Watch). The watcher looks
// again: its next attempt takes over what a lost notification handed it.
const Resync = "\n"

// ParseGrant splits a grant record, or a release's notification, into the
// waiter's ID and the value it was handed the key at ("" when it was
// handed nothing: a notification of the ID alone).
func ParseGrant(s string) (id, value string) {
	id, value, _ = strings.Cut(s, "\n")
	return id, value
}

// GuardKey names the release guard of lock key for who (a mutex's value,
// or a hold's Member): Base(key)+":release-guard:" and 24 hexadecimal
// digits, the first 12 bytes of who's SHA-256.
func GuardKey(key, who string) string {
	h := guardHash(who)
	if HasTag(key) {
		return key + guardMark + string(h[:]) // one allocation
	}
	return "{" + key + "}" + guardMark + string(h[:])
}

// Channel names the pub/sub channel of lock key's release notifications
// (a channel, not a key): Base(key)+":released", followed by ":" and group
// when group is not empty (the watch of one client's waiters, whose IDs
// have that group: WaiterGroup).
func Channel(key, group string) string {
	if group == "" {
		return Derive(key, channelMark)
	}
	return Derive(key, channelMark+":"+group)
}

// TermKey names the term record of an election called name for the
// leadership holding token (NewToken's form): name+":term:"+token. It is
// not Base-derived: the record is a lock key of its own.
func TermKey(name, token string) string { return name + termMark + token }

// Kind says which of a lock's derived keys a key is (Parse).
type Kind uint8

// The kinds of keys.
const (
	// LockKey: not a derived key (a lock key, or a key quorumlock does not
	// write).
	LockKey     Kind = iota
	Fence            // FenceKey
	Waiting          // WaitingKey
	Queue            // QueueKey
	QueueTTL         // QueueTTLKey
	QueueVal         // QueueValKey
	GrantRecord      // GrantKey
	Guard            // GuardKey
	Term             // TermKey
)

// String names the kind for people: "lock key", "fencing counter",
// "waiting marks", "waiting line", "waiting line's expiries", "waiting
// line's values", "grant record", "release guard", "term record".
func (k Kind) String() string {
	switch k {
	case Fence:
		return "fencing counter"
	case Waiting:
		return "waiting marks"
	case Queue:
		return "waiting line"
	case QueueTTL:
		return "waiting line's expiries"
	case QueueVal:
		return "waiting line's values"
	case GrantRecord:
		return "grant record"
	case Guard:
		return "release guard"
	case Term:
		return "term record"
	}
	return "lock key"
}

// Mark is what a key of kind k has after its Base (":fence", ":waiting",
// ":queue", ":queue:ttl", ":queue:val", ":grant", ":release-guard:" and a
// hash) or after an
// election's name (":term:" and a token); "" for LockKey.
func (k Kind) Mark() string {
	switch k {
	case Fence:
		return fenceMark
	case Waiting:
		return waitingMark
	case Queue:
		return queueMark
	case QueueTTL:
		return queueTTLMark
	case QueueVal:
		return queueValMark
	case GrantRecord:
		return grantMark
	case Guard:
		return guardMark
	case Term:
		return termMark
	}
	return ""
}

// Parse reports which derived key key is, and the lock it belongs to. A
// key with a valid hash tag that contains ":release-guard:" (whatever
// follows) is a release guard; else a key that ends in ":term:" and 32
// lowercase hexadecimal digits is a term record; else a key with a valid
// hash tag that ends in ":fence", ":waiting", ":queue", ":queue:ttl",
// ":queue:val" or ":grant" is
// that derived key (redlock refuses a lock name of any of these kinds but
// a term record); any other key is a LockKey, the lock being key itself. The lock
// of a derived key is its Base unwrapped when the Base is "{name}" with no
// other '}' (so "{x}:fence" gives "x": "x" and "{x}" share it), else the
// Base itself.
func Parse(key string) (lock string, k Kind) {
	tag := HasTag(key)
	base := ""
	if i := strings.Index(key, guardMark); tag && i >= 0 {
		base, k = key[:i], Guard
	} else if i := strings.LastIndex(key, termMark); i >= 0 && IsToken(key[i+len(termMark):]) {
		return key[:i], Term
	} else if !tag {
		return key, LockKey
	} else {
		for _, kind := range []Kind{Fence, Waiting, Queue, QueueTTL, QueueVal, GrantRecord} {
			if strings.HasSuffix(key, kind.Mark()) {
				base, k = key[:len(key)-len(kind.Mark())], kind
				break
			}
		}
		if k == LockKey {
			return key, LockKey
		}
	}
	if len(base) >= 2 && base[0] == '{' && strings.IndexByte(base, '}') == len(base)-1 {
		return base[1 : len(base)-1], k
	}
	return base, k
}
