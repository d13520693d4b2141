package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestKeyNames spells every derived name in full: these are the names on
// the wire (the Lua scripts receive them as KEYS and ARGV, operators see
// them in redis-cli), so a change here is a change of the contract.
func TestKeyNames(t *testing.T) {
	sum := sha256.Sum256([]byte("v"))
	vh := hex.EncodeToString(sum[:12])
	for _, c := range []struct {
		got, want string
	}{
		{Derive("k", ":fence-mark"), "{k}:fence-mark"},
		{Derive("a{t}b", ":fence-mark"), "a{t}b:fence-mark"},
		{FenceKey("k"), "{k}:fence"},
		{FenceKey("a{t}b"), "a{t}b:fence"},
		{FenceKey("{k}"), "{k}:fence"},
		{FenceKey("a{}b"), "{a{}b}:fence"},
		{WaitingKey("jobs:a"), "{jobs:a}:waiting"},
		{WaitingKey("a{t}b"), "a{t}b:waiting"},
		{QueueKey("k"), "{k}:queue"},
		{QueueKey("locks:{t}:x"), "locks:{t}:x:queue"},
		{QueueTTLKey("k"), "{k}:queue:ttl"},
		{QueueTTLKey("locks:{t}:x"), "locks:{t}:x:queue:ttl"},
		{QueueValKey("k"), "{k}:queue:val"},
		{GrantKey("locks:{t}:x"), "locks:{t}:x:grant"},
		{GuardKey("k", "v"), "{k}:release-guard:" + vh},
		{GuardKey("locks:{x}:y", "v"), "locks:{x}:y:release-guard:" + vh},
		{Channel("lock", ""), "{lock}:released"},
		{Channel("locks:{t}:x", ""), "locks:{t}:x:released"},
		{Channel("lock", "0a1b2c3d"), "{lock}:released:0a1b2c3d"},
		{TermKey("leader", "0123456789abcdef0123456789abcdef"), "leader:term:0123456789abcdef0123456789abcdef"},
		{TermKey("{l}", "t"), "{l}:term:t"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if g := GuardKey("k", "w"); g == GuardKey("k", "v") || len(g) != len("{k}:release-guard:")+24 {
		t.Errorf("GuardKey(k, w) = %q: another value has another guard of 24 hex digits", g)
	}
}

// TestParse: every derived name parses back to its kind and lock; lock
// keys, and names that only look derived, are LockKey.
func TestParse(t *testing.T) {
	tok := "0123456789abcdef0123456789abcdef"
	for _, c := range []struct {
		key, lock string
		kind      Kind
	}{
		{"jobs:a", "jobs:a", LockKey},
		{FenceKey("jobs:a"), "jobs:a", Fence},
		{WaitingKey("jobs:a"), "jobs:a", Waiting},
		{QueueKey("jobs:a"), "jobs:a", Queue},
		{QueueTTLKey("jobs:a"), "jobs:a", QueueTTL},
		{QueueValKey("jobs:a"), "jobs:a", QueueVal},
		{GrantKey("jobs:a"), "jobs:a", GrantRecord},
		{GuardKey("jobs:a", "v"), "jobs:a", Guard},
		{FenceKey("a{t}b"), "a{t}b", Fence},
		{GuardKey("a{t}b", "v"), "a{t}b", Guard},
		{FenceKey("{k}"), "k", Fence}, // "k" and "{k}" share it
		{FenceKey("{t}{u}"), "{t}{u}", Fence},
		{"{jobs:a}:release-guard:0123", "jobs:a", Guard}, // what follows the mark is not read
		{TermKey("locks:leader", tok), "locks:leader", Term},
		{"jobs:fence", "jobs:fence", LockKey}, // no hash tag: not derived
		{"a}b:fence", "a}b:fence", LockKey},
		{"locks:leader:term:next", "locks:leader:term:next", LockKey},
		{"locks:term:0123", "locks:term:0123", LockKey},
		{"locks:term:" + strings.ToUpper(tok), "locks:term:" + strings.ToUpper(tok), LockKey},
		{"{k}:fence:x", "{k}:fence:x", LockKey},
		{"a:release-guard:0123", "a:release-guard:0123", LockKey}, // no hash tag
		{"{x}:release-guard:" + tok + ":term:" + tok, "x", Guard}, // a guard first
		{"{x}:fence:term:" + tok, "{x}:fence", Term},
	} {
		lock, kind := Parse(c.key)
		if lock != c.lock || kind != c.kind {
			t.Errorf("Parse(%q) = %q, %v; want %q, %v", c.key, lock, kind, c.lock, c.kind)
		}
	}
}

// TestKindMarks: each kind's Mark is what its names carry, and its String
// differs from every other's.
func TestKindMarks(t *testing.T) {
	seen := map[string]Kind{}
	for _, c := range []struct {
		k    Kind
		name string
	}{
		{Fence, FenceKey("k")}, {Waiting, WaitingKey("k")}, {Queue, QueueKey("k")},
		{QueueTTL, QueueTTLKey("k")}, {QueueVal, QueueValKey("k")}, {GrantRecord, GrantKey("k")}, {Guard, GuardKey("k", "v")}, {Term, TermKey("k", NewToken())},
	} {
		if !strings.Contains(c.name, c.k.Mark()) || c.k.Mark() == "" {
			t.Errorf("%v: Mark %q is not in %q", c.k, c.k.Mark(), c.name)
		}
		if other, dup := seen[c.k.String()]; dup {
			t.Errorf("%v and %v are both %q", c.k, other, c.k.String())
		}
		seen[c.k.String()] = c.k
	}
	if LockKey.Mark() != "" || LockKey.String() != "lock key" {
		t.Errorf("LockKey: Mark %q, String %q", LockKey.Mark(), LockKey.String())
	}
}

// TestLockKeysAllocateOnce: the hot path's names are the single names,
// cut from one allocation; GuardKey allocates only its result.
func TestLockKeysAllocateOnce(t *testing.T) {
	value := strings.Repeat("f", 32) + "?host=a-host-name&pid=12345&label=some-label"
	for _, key := range []string{"lock", "locks:{t}:x"} {
		want := Keys{GuardKey(key, value), QueueKey(key), QueueTTLKey(key), QueueValKey(key), GrantKey(key), Channel(key, ""), FenceKey(key)}
		if got := LockKeys(key, value); got != want {
			t.Errorf("LockKeys(%q) = %+v, want %+v", key, got, want)
		}
		if n := testing.AllocsPerRun(100, func() { _ = LockKeys(key, value) }); n != 1 {
			t.Errorf("LockKeys(%q): %v allocations, want 1", key, n)
		}
		if n := testing.AllocsPerRun(100, func() { _ = GuardKey(key, value) }); n != 1 {
			t.Errorf("GuardKey(%q): %v allocations, want 1 (the key)", key, n)
		}
	}
}
