package redisnode

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

func TestArgsForSharesOneAcquisitionsArguments(t *testing.T) {
	a, err := argsFor("lock", "v1", 8000)
	require.NoError(t, err)
	b, err := argsFor("lock", "v1", 8000)
	require.NoError(t, err)
	assert.Same(t, a, b, "the second call of an attempt reuses the first's arguments")
	g, err := guardKey("lock", "v1")
	require.NoError(t, err)
	assert.Equal(t, &g, a.guardArg)
	assert.Equal(t, any(int64(8000)), a.ms(8000))
	assert.Equal(t, any(int64(0)), a.ms(0))

	// The same value on another lock, or another value: other arguments.
	c, err := argsFor("other", "v1", 8000)
	require.NoError(t, err)
	assert.Equal(t, "other", *c.keyArg.(*string))
	assert.True(t, strings.HasPrefix(c.guard, "{other}:release-guard:"), c.guard)
	d, err := argsFor("lock", "v2", 8000)
	require.NoError(t, err)
	assert.Equal(t, "v2", *d.valueArg.(*string))
	assert.NotEqual(t, a.guard, d.guard)

	_, err = argsFor("a}b", "v", 1)
	require.ErrorIs(t, err, redlock.ErrNotSent)

	if n := testing.AllocsPerRun(100, func() { _, _ = argsFor("lock", "v2", 8000) }); n != 0 {
		t.Errorf("argsFor on a cached value: %v allocations, want 0", n)
	}
}

func TestGuardKeyAllocatesOnce(t *testing.T) {
	value := strings.Repeat("f", 32) + "?host=a-host-name&pid=12345&label=some-label"
	if n := testing.AllocsPerRun(100, func() { _, _ = guardKey("lock", value) }); n != 1 {
		t.Errorf("guardKey: %v allocations, want 1 (the key)", n)
	}
}

func TestLockKeysAllocateOnce(t *testing.T) {
	for _, key := range []string{"lock", "locks:{t}:x"} {
		g, err := guardKey(key, "v")
		require.NoError(t, err)
		q, qt, ch := queueKeys(key)
		f, err := fenceKey(key)
		require.NoError(t, err)
		g2, q2, qt2, ch2, f2 := lockKeys(key, "v")
		assert.Equal(t, []string{g, q, qt, ch, f}, []string{g2, q2, qt2, ch2, f2}, key)
		if n := testing.AllocsPerRun(100, func() { _, _, _, _, _ = lockKeys(key, "v") }); n != 1 {
			t.Errorf("lockKeys(%q): %v allocations, want 1", key, n)
		}
	}
	_, _, ch := queueKeys("lock")
	assert.Equal(t, "{lock}:released", ch)
	q, qt, ch := queueKeys("locks:{t}:x")
	assert.Equal(t, []string{"locks:{t}:x:queue", "locks:{t}:x:queue:ttl", "locks:{t}:x:released"}, []string{q, qt, ch})
}
