package redisnode

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/wire"
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

// A waiter's boxed arguments are shared by its calls, and a cached entry
// is used only for the same ID, arrival, TTL and mode.
func TestWaiterArgsForMatchesEveryField(t *testing.T) {
	a := waiterArgsFor("g.w1", 1000, 2000, false)
	assert.Same(t, a, waiterArgsFor("g.w1", 1000, 2000, false), "the next call of the waiter reuses its arguments")
	check := func(w *waiterArgs, id string, arrival, ttl int64, mode string) {
		t.Helper()
		assert.Equal(t, id, *w.idArg.(*string))
		assert.Equal(t, arrival, *w.arrArg.(*int64))
		assert.Equal(t, ttl, *w.ttlArg.(*int64))
		assert.Equal(t, mode, w.modeArg)
	}
	check(a, "g.w1", 1000, 2000, "line")
	check(waiterArgsFor("g.w1", 1001, 2000, false), "g.w1", 1001, 2000, "line")
	check(waiterArgsFor("g.w1", 1000, 2001, false), "g.w1", 1000, 2001, "line")
	check(waiterArgsFor("g.w1", 1000, 2000, true), "g.w1", 1000, 2000, "fair")
	check(waiterArgsFor("g.w2", 1000, 2000, false), "g.w2", 1000, 2000, "line")

	l, err := lineArgsFor("lock")
	require.NoError(t, err)
	l2, err := lineArgsFor("lock")
	require.NoError(t, err)
	assert.Same(t, l, l2)
	assert.Equal(t, "lock", *l.keyArg.(*string))
	assert.Equal(t, wire.QueueKey("lock"), *l.queueArg.(*string))
	assert.Equal(t, wire.QueueTTLKey("lock"), *l.qttlArg.(*string))
	assert.Equal(t, wire.Channel("lock", ""), *l.chArg.(*string))
	_, err = lineArgsFor("a}b")
	require.ErrorIs(t, err, redlock.ErrNotSent)
}
