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

// These tests run in a synctest bubble: time is virtual, so "returned at the
// quorum-th reply" or "Done closed at the deadline" are exact outcomes, not
// wall-clock bounds.

// Validity is TTL - drift from the start of the attempt, decided at the
// quorum-th reply without waiting for the stragglers.
func TestValidityIsMeasuredFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		for i, d := range []time.Duration{1, 2, 3, 40, 45} {
			ms[i].SetDelay(d * time.Millisecond)
		}
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		// The first contact reads each server's identity first (alone, then
		// in a pass over the nodes read by then): the three fastest are
		// identified in turn, and the attempt does not wait for the slow two.
		start := time.Now()
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 40*time.Millisecond, "decided before the slow nodes' first reply")
		require.NoError(t, lease.Unlock(context.Background()))

		start = time.Now()
		lease, err = m.TryLock(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 3*time.Millisecond, time.Since(start), "decided at the 3rd reply")
		drift := time.Second/100 + 2*time.Millisecond
		assert.Equal(t, start.Add(time.Second-drift), lease.Until())
		assert.True(t, lease.Valid())
		require.NoError(t, lease.Unlock(context.Background()))
		require.NoError(t, c.Close(context.Background()))
		assert.Zero(t, ownKeys(ms))
	})
}

// A quorum that comes too late for the minimum validity is rolled back.
func TestValidityTooShortRollsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		for _, n := range ms {
			n.SetDelay(20 * time.Millisecond)
		}
		c := newClient(t, nodes)
		ttl := time.Second
		drift := ttl/100 + 2*time.Millisecond
		m := newMutex(t, c, redlock.WithTTL(ttl), redlock.WithMinValidity(ttl-drift-10*time.Millisecond))
		_, err := m.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.ErrorIs(t, err, redlock.ErrValidityTooShort)
		require.NoError(t, c.Close(context.Background()))
		assert.Zero(t, ownKeys(ms))
	})
}

// Done closes at the validity deadline, by a timer, and Err says why.
func TestDoneClosesAtValidityDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		start := time.Now()
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		require.NoError(t, lease.Err())
		<-lease.Done()
		assert.Equal(t, lease.Until(), time.Now())
		assert.Equal(t, time.Second-12*time.Millisecond, time.Since(start))
		assert.False(t, lease.Valid())
		require.ErrorIs(t, lease.Err(), redlock.ErrLockLost)
		// Extending now could resurrect a lock someone else may hold.
		err = lease.Extend(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotExtended)
		require.ErrorIs(t, err, redlock.ErrLockLost)
		// The keys are still there (the drift allowance); Unlock removes them.
		assert.Equal(t, 3, ownKeys(ms))
		require.NoError(t, lease.Unlock(context.Background()))
		require.ErrorIs(t, lease.Err(), redlock.ErrReleased)
		synctest.Wait() // releases behind the quorum land too
		assert.Zero(t, ownKeys(ms))
	})
}

func TestExtendMovesTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(3)
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		first := lease.Until()
		time.Sleep(600 * time.Millisecond)
		extendStart := time.Now()
		require.NoError(t, lease.Extend(context.Background()))
		assert.Equal(t, extendStart.Add(time.Second-12*time.Millisecond), lease.Until())
		time.Sleep(time.Until(first) + time.Millisecond)
		select {
		case <-lease.Done():
			t.Fatal("Done closed at the old deadline after Extend")
		default:
		}
		assert.True(t, lease.Valid())
		<-lease.Done()
		assert.Equal(t, lease.Until(), time.Now())
		require.ErrorIs(t, lease.Err(), redlock.ErrLockLost)
		require.NoError(t, lease.Unlock(context.Background()))
	})
}

// An Extend that finds too many nodes without the token ends the lease at
// once: another client may take those nodes now.
func TestExtendThatFindsTheLockLostEndsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		c := newClient(t, nodes)
		m := newMutex(t, c)
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		synctest.Wait() // the acquires after the quorum land too
		for _, n := range ms[:3] {
			n.Restart(false) // restarted empty: the key is gone
		}
		err = lease.Extend(context.Background())
		require.ErrorIs(t, err, redlock.ErrLockLost)
		select {
		case <-lease.Done():
		default:
			t.Fatal("Done still open after Extend found the lock lost")
		}
		require.ErrorIs(t, lease.Err(), redlock.ErrLockLost)
		assert.False(t, lease.Valid())
		// Unlock still deletes the two keys left; three nodes say "not held".
		require.ErrorIs(t, lease.Unlock(context.Background()), redlock.ErrLockLost)
		synctest.Wait()
		assert.Zero(t, ownKeys(ms))
	})
}

// Reading a lease never waits on the network, even while an Extend is
// blocked on paused nodes (the old Lease.Valid took the Extend's lock).
func TestReadingALeaseNeverWaitsForExtend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		c := newClient(t, nodes, redlock.WithNodeTimeout(time.Second))
		m := newMutex(t, c, redlock.WithTTL(10*time.Second))
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		var resumes []func()
		for _, n := range ms[:3] {
			resumes = append(resumes, n.Pause())
		}
		extended := make(chan error, 1)
		go func() { extended <- lease.Extend(context.Background()) }()
		synctest.Wait() // the Extend is blocked on the paused nodes
		before := time.Now()
		assert.True(t, lease.Valid())
		assert.NoError(t, lease.Err())
		_ = lease.Until()
		assert.Equal(t, before, time.Now(), "reading the lease advanced time: it waited")
		select {
		case <-extended:
			t.Fatal("Extend returned although a majority is paused")
		default:
		}
		err = <-extended
		require.ErrorIs(t, err, redlock.ErrNotExtended)
		assert.NotErrorIs(t, err, redlock.ErrLockLost)
		assert.True(t, lease.Valid(), "a failed Extend keeps the previous validity")
		for _, r := range resumes {
			r()
		}
		require.NoError(t, lease.Unlock(context.Background()))
	})
}

func TestUnlockEndsTheLeaseOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		lease, err := newMutex(t, c).TryLock(context.Background())
		require.NoError(t, err)
		require.NoError(t, lease.Unlock(context.Background()))
		<-lease.Done()
		require.ErrorIs(t, lease.Err(), redlock.ErrReleased)
		assert.False(t, lease.Valid())
		require.ErrorIs(t, lease.Unlock(context.Background()), redlock.ErrReleased)
		err = lease.Extend(context.Background())
		require.ErrorIs(t, err, redlock.ErrReleased, "no renewal after Unlock")
		synctest.Wait()
		assert.Zero(t, ownKeys(ms))
	})
}

// Unlock of a lock taken over on a majority says it was lost.
func TestUnlockAfterTakeoverSaysLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		time.Sleep(2 * time.Second) // expired everywhere
		other, err := m.TryLock(context.Background())
		require.NoError(t, err)
		err = lease.Unlock(context.Background())
		require.ErrorIs(t, err, redlock.ErrLockLost)
		notHeld := 0
		for _, e := range nodeErrs(t, err) {
			if errors.Is(e, redlock.ErrNodeNotHeld) {
				notHeld++
			}
		}
		assert.GreaterOrEqual(t, notHeld, 2, "decided once a quorum could no longer confirm")
		synctest.Wait() // the other holder's acquires behind its quorum land too
		assert.Equal(t, 3, ownKeys(ms), "the other holder's keys are untouched")
		require.NoError(t, other.Unlock(context.Background()))
		require.True(t, errors.Is(lease.Err(), redlock.ErrReleased))
	})
}
