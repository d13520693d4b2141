package wire

import "strings"

// HasTag reports whether key has a valid Redis Cluster hash tag: a '{'
// followed later by a '}' with at least one byte between the first '{' and
// the first '}' after it. Redis Cluster then hashes only those bytes.
func HasTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	return strings.IndexByte(key[i+1:], '}') > 0
}

// Slottable reports whether the keys derived from lock key key can share
// its Redis Cluster slot: key has a valid hash tag (its derived keys keep
// it), or no '}' at all ("{key}" then hashes like key). A node refuses a
// key that is neither, such as "a}b" or "{}x", with an error wrapping
// redlock.ErrNotSent, and redlock refuses such a lock name.
func Slottable(key string) bool {
	return HasTag(key) || strings.IndexByte(key, '}') < 0
}

// Base is how every key derived from lock key key begins: key itself when
// it has a hash tag, else "{key}". For a Slottable key it hashes to key's
// Redis Cluster slot. "x" and "{x}" have the same Base, so they share
// their derived keys (node/nodetest checks that a node does); redlock
// refuses a lock name such as "{x}" (BareTag).
func Base(key string) string {
	if HasTag(key) {
		return key
	}
	return "{" + key + "}"
}

// BareTag reports whether key is a hash tag and nothing else, "{inner}"
// with no brace in inner, and returns inner: the lock key inner, which has
// no hash tag, has the same Base, so the two would share every derived key
// (the waiting line, the fencing counter, the waiting marks, the grant
// record, the release channel) though their lock keys differ.
func BareTag(key string) (inner string, ok bool) {
	if len(key) < 3 || key[0] != '{' || key[len(key)-1] != '}' {
		return "", false
	}
	inner = key[1 : len(key)-1]
	if strings.ContainsAny(inner, "{}") {
		return "", false
	}
	return inner, true
}
