package redlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/redlock"
)

// A panic in Do's function, recovered by the caller (as net/http and job
// runners do), must not leave the lock held: Do stops the renewal and
// releases the lease before the panic goes on. With the release on panic
// switched off (knobs.NoPanicRelease) the lock stays held and renewed for
// as long as the test looks, which is what the test must be able to see.
func TestDoReleasesWhenTheFunctionPanics(t *testing.T) {
	for _, off := range []bool{false, true} {
		name := "release"
		if off {
			name = "knob-NoPanicRelease"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				knobs.NoPanicRelease.Store(off)
				defer knobs.NoPanicRelease.Store(false)
				ms, nodes := mem(3)
				c, err := redlock.New(nodes)
				require.NoError(t, err)
				m := newMutex(t, c, redlock.WithTTL(time.Second))
				var held *redlock.Lease
				func() {
					defer func() {
						assert.Equal(t, "boom", recover(), "the panic goes on to the caller")
					}()
					_ = m.Do(context.Background(), func(_ context.Context, lease *redlock.Lease) error {
						held = lease
						panic("boom")
					})
				}()
				require.NotNil(t, held)
				time.Sleep(5 * time.Second) // five TTLs: renewals would have kept it
				synctest.Wait()
				if off {
					assert.True(t, held.Valid(), "with the knob the lease is still renewed")
					assert.Equal(t, 3, ownKeys(ms), "with the knob the keys stay")
					require.NoError(t, held.Unlock(context.Background()))
				} else {
					assert.False(t, held.Valid())
					require.ErrorIs(t, held.Err(), redlock.ErrReleased)
					assert.Zero(t, ownKeys(ms), "the lock was released")
					other, err := m.TryLock(context.Background())
					require.NoError(t, err, "the lock is free after the panic")
					require.NoError(t, other.Unlock(context.Background()))
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, c.Close(ctx))
				assert.False(t, held.Valid(), "no lease reads valid after Close")
			})
		})
	}
}

// When renewals stop succeeding, Do cancels the function's context at the
// cancel margin before the validity deadline (a tenth of the TTL by
// default, or WithCancelMargin), with a cause wrapping ErrLockLost, and
// Do's error says the lease ended while the function ran.
func TestDoCancelsAtTheMargin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []redlock.LockOption
		margin time.Duration
	}{
		{"default", nil, 100 * time.Millisecond},
		{"WithCancelMargin", []redlock.LockOption{redlock.WithCancelMargin(300 * time.Millisecond)}, 300 * time.Millisecond},
		{"zero", []redlock.LockOption{redlock.WithCancelMargin(0)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, nodes := mem(5)
				c := newClient(t, nodes)
				m := newMutex(t, c, append([]redlock.LockOption{redlock.WithTTL(time.Second)}, tc.opts...)...)
				warmUp(t, m)
				var until, cancelled time.Time
				err := m.Do(context.Background(), func(ctx context.Context, lease *redlock.Lease) error {
					for _, n := range ms[:3] {
						defer n.Pause()()
					}
					until = lease.Until()
					<-ctx.Done()
					cancelled = time.Now()
					assert.ErrorIs(t, context.Cause(ctx), redlock.ErrLockLost)
					return nil
				})
				require.ErrorIs(t, err, redlock.ErrLockLost)
				// Virtual time: the timer fires exactly when due.
				assert.Equal(t, until.Add(-tc.margin), cancelled, "cancelled at Until - margin")
			})
		})
	}
}
