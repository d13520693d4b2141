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
