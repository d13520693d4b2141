package redlock_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

// TestNamesOfDerivedKeysAreRefused: a lock name that is another lock's
// derived key on a Redis node (its fencing counter "{k}:fence", its waiting
// marks "{k}:waiting", its waiting line "{k}:queue", its release guards "{k}:release-guard:...") is
// refused, so that no lock can read, extend or delete another's; names that
// only resemble them are fine. The error quotes at most 64 bytes of a name.
func TestNamesOfDerivedKeysAreRefused(t *testing.T) {
	_, nodes := mem(3)
	c := newClient(t, nodes)
	for _, name := range []string{"{k}:fence", "a{b}:fence", "{w}:waiting", "{k}:queue", "a{b}:queue:ttl", "{k}:release-guard:0123456789abcdef01234567"} {
		_, err := c.NewMutex(name)
		require.ErrorIs(t, err, redlock.ErrInvalidConfig, name)
		assert.ErrorContains(t, err, "reserved", name)
		_, _, err = c.NewRWMutex(name)
		assert.ErrorIs(t, err, redlock.ErrInvalidConfig, name)
	}
	for _, name := range []string{"k:fence", "fence", "{k}:fenced", "{k}:waiting-room", "k:release-guard:x", "{k}x", "x{k}", "{{k}", "k:queue", "{k}:queued"} {
		_, err := c.NewMutex(name)
		assert.NoError(t, err, name)
	}
	long := "{k}" + strings.Repeat("x", 1<<20) + ":fence"
	_, err := c.NewMutex(long)
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.Less(t, len(err.Error()), 400, "the error shows a bounded part of the name")
	assert.ErrorContains(t, err, "bytes")
}

// TestBareTagNamesAreRefused: a name that is a hash tag and nothing else,
// "{k}", has the derived keys of the lock "k" (wire.BareTag), so it is
// refused, naming both; names with more around the tag are not (their
// derived keys are their own).
func TestBareTagNamesAreRefused(t *testing.T) {
	_, nodes := mem(3)
	c := newClient(t, nodes)
	for _, name := range []string{"{k}", "{locks:x}", "{a b}"} {
		_, err := c.NewMutex(name)
		require.ErrorIs(t, err, redlock.ErrInvalidConfig, name)
		inner := strings.Trim(name, "{}")
		assert.ErrorContains(t, err, fmt.Sprintf("lock name %q is a hash tag and nothing else", name))
		assert.ErrorContains(t, err, fmt.Sprintf("name it %q", inner))
		_, _, err = c.NewRWMutex(name)
		assert.ErrorIs(t, err, redlock.ErrInvalidConfig, name)
		_, err = c.NewElection(name)
		assert.ErrorIs(t, err, redlock.ErrInvalidConfig, name)
	}
}
