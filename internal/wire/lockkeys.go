package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Keys are the derived names one acquisition of a mutex sends with its
// calls (node/redisnode's hot path): GuardKey(key, value), QueueKey(key),
// QueueTTLKey(key), QueueValKey(key), GrantKey(key), Channel(key, "") and
// FenceKey(key).
type Keys struct {
	Guard, Queue, QueueTTL, QueueVal, Grant, Channel, Fence string
}

// LockKeys returns the Keys of lock key and value, cut from one
// allocation.
func LockKeys(key, value string) Keys {
	h := guardHash(value)
	tag := HasTag(key)
	var b strings.Builder
	b.Grow(6*(len(key)+2) + len(guardMark) + len(h) + len(queueTTLMark) + len(queueValMark) + len(grantMark) + len(channelMark) + len(fenceMark))
	base := func() {
		if tag {
			b.WriteString(key)
		} else {
			b.WriteByte('{')
			b.WriteString(key)
			b.WriteByte('}')
		}
	}
	base()
	b.WriteString(guardMark)
	b.Write(h[:])
	g := b.Len()
	base()
	q := b.Len() + len(queueMark)
	b.WriteString(queueTTLMark) // QueueKey is its start
	qt := b.Len()
	base()
	b.WriteString(queueValMark)
	qv := b.Len()
	base()
	b.WriteString(grantMark)
	gr := b.Len()
	base()
	b.WriteString(channelMark)
	ch := b.Len()
	base()
	b.WriteString(fenceMark)
	s := b.String()
	return Keys{Guard: s[:g], Queue: s[g:q], QueueTTL: s[g:qt], QueueVal: s[qt:qv], Grant: s[qv:gr], Channel: s[gr:ch], Fence: s[ch:]}
}

// guardHash is the part of a release guard's name that names who: 24
// hexadecimal digits of its SHA-256.
func guardHash(who string) [24]byte {
	var buf [160]byte // a lock's value fits: no allocation to hash it
	sum := sha256.Sum256(append(buf[:0], who...))
	var h [24]byte
	hex.Encode(h[:], sum[:12])
	return h
}
