package redlock_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

// Two masters tolerate no failure (the quorum is both): New refuses them
// with an error that says so and names the way out, and takes them when
// WithQuorum(2) says it is intended. One and three masters need no option.
func TestTwoNodesNeedAnExplicitQuorum(t *testing.T) {
	_, two := mem(2)
	_, err := redlock.New(two)
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "2 nodes tolerate no failure")
	assert.Contains(t, err.Error(), "WithQuorum(2)")

	c := newClient(t, two, redlock.WithQuorum(2))
	lease, err := newMutex(t, c).TryLock(context.Background())
	require.NoError(t, err)
	require.NoError(t, lease.Unlock(context.Background()))

	for _, n := range []int{1, 3} {
		_, nodes := mem(n)
		newClient(t, nodes)
	}
}
