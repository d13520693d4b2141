package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

// Auto-renewal keeps a lease valid for many TTLs, and its goroutine ends
// with the lease (synctest.Test fails if one is left behind).
func TestAutoRenewKeepsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithTTL(time.Second), redlock.WithAutoRenew(0))
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		for range 20 {
			time.Sleep(500 * time.Millisecond)
			require.True(t, lease.Valid(), "lost at %v", time.Now())
		}
		_, err = m.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained, "renewed lease taken by another")
		require.NoError(t, lease.Unlock(context.Background()))
		require.NoError(t, c.Close(context.Background()))
		assert.Zero(t, ownKeys(ms))
	})
}

// A renewal that cannot reach a quorum (a majority paused) retries only
// while the validity lasts; then the lease ends, before any other client
// can take the lock.
func TestFailedRenewalEndsTheLeaseBeforeAnyoneElseHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		holderC := newClient(t, nodes)
		otherC := newClient(t, nodes)
		ttl := time.Second
		holder := newMutex(t, holderC, redlock.WithTTL(ttl), redlock.WithAutoRenew(0))
		other := newMutex(t, otherC, redlock.WithTTL(ttl))
		warmUp(t, other) // identify the servers first
		synctest.Wait()

		lease, err := holder.TryLock(context.Background())
		require.NoError(t, err)
		time.Sleep(ttl / 2)
		var resumes []func()
		for _, n := range ms[:3] {
			resumes = append(resumes, n.Pause())
		}
		pausedAt := time.Now()
		var otherStart time.Time
		got := make(chan *redlock.Lease)
		go func() {
			for {
				start := time.Now()
				l, err := other.TryLock(context.Background())
				if err == nil {
					otherStart = start
					got <- l
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		<-lease.Done()
		ended := time.Now()
		require.ErrorIs(t, lease.Err(), redlock.ErrLockLost)
		assert.Equal(t, lease.Until(), ended, "the lease ends at its deadline")
		assert.Greater(t, ended.Sub(pausedAt), time.Duration(0))
		time.Sleep(2 * ttl)
		for _, r := range resumes {
			r()
		}
		l := <-got
		assert.True(t, otherStart.After(ended), "the other client started its winning attempt at %v, before the holder's lease ended at %v", otherStart, ended)
		require.NoError(t, l.Unlock(context.Background()))
		require.ErrorIs(t, lease.Unlock(context.Background()), redlock.ErrLockLost)
	})
}

// Do runs the function under the lock and releases it afterwards.
func TestDoRunsUnderTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		ran := false
		err := m.Do(context.Background(), func(ctx context.Context, _ *redlock.Lease) error {
			ran = true
			_, err := m.TryLock(ctx)
			assert.ErrorIs(t, err, redlock.ErrNotObtained, "taken while Do's function ran")
			time.Sleep(5 * time.Second) // renewed meanwhile
			return ctx.Err()
		})
		require.NoError(t, err)
		assert.True(t, ran)
		synctest.Wait()
		assert.Zero(t, ownKeys(ms))
		boom := errors.New("boom")
		require.ErrorIs(t, m.Do(context.Background(), func(context.Context, *redlock.Lease) error { return boom }), boom)
	})
}

// Do cancels the function's context when the lease ends (here: a majority
// paused, so renewals fail and the validity runs out), with the lease's
// error as the cause, and says so in its own error.
func TestDoCancelsTheFunctionWhenTheLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		var cancelled time.Time
		err := m.Do(context.Background(), func(ctx context.Context, _ *redlock.Lease) error {
			for _, n := range ms[:3] {
				defer n.Pause()()
			}
			<-ctx.Done()
			cancelled = time.Now()
			assert.ErrorIs(t, context.Cause(ctx), redlock.ErrLockLost)
			return nil
		})
		require.ErrorIs(t, err, redlock.ErrLockLost)
		assert.False(t, cancelled.IsZero())
	})
}

// The lock-delay keeps a lock that ended without Unlock from being taken
// again until the delay has passed after its TTL; a clean Unlock frees it at
// once.
func TestLockDelayAfterUncleanEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(3)
		c := newClient(t, nodes)
		ttl, delay := time.Second, 3*time.Second
		m := newMutex(t, c, redlock.WithTTL(ttl), redlock.WithLockDelay(delay))
		start := time.Now()
		crashed, err := m.TryLock(context.Background()) // never unlocked
		require.NoError(t, err)
		<-crashed.Done()
		assert.Equal(t, ttl-12*time.Millisecond, time.Since(start), "validity comes from the TTL, not TTL+delay")
		// The keys live TTL + delay/(1-0.01): at least the delay past the
		// validity, even on a clock 1% fast.
		stretched := time.Duration(math.Ceil(float64(delay) / (1 - 0.01)))
		time.Sleep(time.Until(start.Add(ttl + delay - time.Millisecond)))
		_, err = m.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained, "taken before the lock-delay passed")
		time.Sleep(time.Until(start.Add(ttl + stretched - time.Millisecond)))
		_, err = m.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained, "taken before the keys' time to live passed")
		time.Sleep(time.Until(start.Add(ttl + stretched)))
		clean, err := m.TryLock(context.Background())
		require.NoError(t, err)
		require.NoError(t, clean.Unlock(context.Background()))
		synctest.Wait()
		next, err := m.TryLock(context.Background())
		require.NoError(t, err, "a clean Unlock frees the lock at once")
		require.NoError(t, next.Unlock(context.Background()))
	})
}

// The lock-delay holds on masters whose clocks run fast by as much as the
// drift factor f allows: the keys are written for TTL + delay/(1-f), so
// they outlive the validity's end plus the delay although they expire early
// by a factor of f. Written for TTL + delay (NoLockDelayStretch, the code
// before the fix), the lock was taken again about 28ms early here.
func TestLockDelayOnFastClocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		for _, n := range ms {
			require.NoError(t, n.SkewClock(0, 1/(1-0.01))) // the default factor's worst case
		}
		c := newClient(t, nodes)
		ttl, delay := time.Second, 3*time.Second
		m := newMutex(t, c, redlock.WithTTL(ttl), redlock.WithLockDelay(delay))
		crashed, err := m.TryLock(context.Background()) // never unlocked
		require.NoError(t, err)
		until := crashed.Until()
		<-crashed.Done()
		time.Sleep(time.Until(until.Add(delay - time.Millisecond)))
		_, err = m.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained, "taken again before the validity's end plus the delay")
		synctest.Wait()
		time.Sleep(time.Until(until.Add(delay + 10*time.Millisecond)))
		next, err := m.TryLock(context.Background())
		require.NoError(t, err, "free once the fast clocks expired the keys")
		require.NoError(t, next.Unlock(context.Background()))
	})
}

// A renewal never follows Unlock: after Unlock no Extend of the lease
// succeeds and no key is left, over thousands of lock cycles with a renewal
// every millisecond racing the Unlock (run under -race).
func TestRenewalNeverFollowsUnlock(t *testing.T) {
	ms, nodes := mem(3)
	c := newClient(t, nodes, redlock.WithNodeTimeout(20*time.Millisecond), redlock.WithReleaseTimeout(20*time.Millisecond))
	for i := range 2000 {
		m, err := c.NewMutex(fmt.Sprint("renew-", i%7), redlock.WithTTL(200*time.Millisecond), redlock.WithAutoRenew(0.02))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lease, err := m.Lock(ctx)
		cancel()
		require.NoError(t, err)
		time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
		// On a starved machine the renewals can miss the validity, and the
		// keys expire: then Unlock says so. Either way no renewal follows.
		if err := lease.Unlock(context.Background()); err != nil {
			require.ErrorIs(t, err, redlock.ErrLockLost)
		}
		require.ErrorIs(t, lease.Extend(context.Background()), redlock.ErrReleased)
		<-lease.Done()
	}
	require.NoError(t, c.Close(context.Background()))
	assert.Zero(t, ownKeys(ms))
}
