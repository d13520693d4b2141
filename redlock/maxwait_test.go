package redlock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

// TestMaxWaitBoundsTheWaitNotTheWork: WithMaxWait bounds Do's wait for the
// lock separately from its function. A standby told to wait 3s gives up
// after at most 3s of (virtual) time while the lock stays taken, without
// running fn, although its context never ends; a Do that gets the lock
// within the bound runs fn for longer than the bound, uncancelled.
func TestMaxWaitBoundsTheWaitNotTheWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, nodes := mem(3)
		c := newClient(t, nodes)
		holder := newMutex(t, c, redlock.WithTTL(time.Minute))
		held, err := holder.TryLock(ctx)
		require.NoError(t, err)

		standby := newMutex(t, c, redlock.WithTTL(time.Minute), redlock.WithMaxWait(3*time.Second))
		// A context that would end the wait anyway, far later: without the
		// bound the test fails instead of hanging.
		late, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		start := time.Now()
		ran := false
		err = standby.Do(late, func(context.Context, *redlock.Lease) error { ran = true; return nil })
		waited := time.Since(start)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		assert.ErrorContains(t, err, "WithMaxWait")
		assert.NoError(t, late.Err(), "the bound ended the wait, not the context")
		assert.False(t, ran, "fn must not run without the lock")
		assert.LessOrEqual(t, waited, 3*time.Second, "no attempt starts after the bound")
		assert.Greater(t, waited, time.Second, "it did wait, retrying")

		// Once the holder lets go, the standby gets the lock within its
		// bound and its work outlasts the bound.
		require.NoError(t, held.Unlock(ctx))
		err = standby.Do(ctx, func(fctx context.Context, _ *redlock.Lease) error {
			time.Sleep(10 * time.Second) // the work, in virtual time
			return fctx.Err()
		})
		require.NoError(t, err, "the work is bounded by the caller's context, not by WithMaxWait")
	})
}

// TestMaxWaitRejectsNegative: a negative bound is refused, naming it.
func TestMaxWaitRejectsNegative(t *testing.T) {
	_, nodes := mem(3)
	c := newClient(t, nodes)
	_, err := c.NewMutex("k", redlock.WithMaxWait(-time.Second))
	require.True(t, errors.Is(err, redlock.ErrInvalidConfig), "%v", err)
	assert.ErrorContains(t, err, "-1s")
}
