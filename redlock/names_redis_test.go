package redlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// The defect an outside tester found (knob BareTagNames): the lock names
// "x" and "{x}" were both accepted, though their derived keys are the
// same. On three real masters, H holds the fair lock "x" and W waits for
// it, in every master's line "{x}:queue". With the knob, a fair TryLock of
// "{x}", which nobody holds (no master has its key), is refused: W, a
// waiter of another lock, stands ahead of it. With the fix the name "{x}"
// is refused, naming "x".
func TestBareTagNameOnRealServers(t *testing.T) {
	for _, tc := range []struct {
		name string
		knob *atomic.Bool
	}{{name: "refused"}, {name: "BareTagNames", knob: &knobs.BareTagNames}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.knob != nil {
				tc.knob.Store(true)
				defer tc.knob.Store(false)
			}
			ctx := context.Background()
			ms := startMasters(t, 3)
			f, err := realClient(t, ms.nodes).NewMutex("{"+lockName+"}", redlock.WithFairQueue())
			if tc.knob == nil {
				require.ErrorIs(t, err, redlock.ErrInvalidConfig)
				assert.ErrorContains(t, err, "name it \""+lockName+"\"")
				return
			}
			require.NoError(t, err)
			h := newMutex(t, realClient(t, ms.nodes), redlock.WithFairQueue())
			w := newMutex(t, realClient(t, ms.nodes), redlock.WithFairQueue())
			lease, err := h.TryLock(ctx)
			require.NoError(t, err)
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			got := lockAsync(lctx, w)
			waitFor(t, "W in every master's line", func() bool {
				for _, raw := range ms.raw {
					if raw.ZCard(ctx, wire.QueueKey(lockName)).Val() == 0 {
						return false
					}
				}
				return true
			})
			_, err = f.TryLock(ctx)
			require.ErrorIs(t, err, redlock.ErrNotObtained, "W, a waiter of \"x\", stands ahead of \"{x}\"")
			for i, raw := range ms.raw {
				assert.Zero(t, raw.Exists(ctx, "{"+lockName+"}").Val(), "master %d: nobody holds {x}", i)
			}
			require.NoError(t, lease.Unlock(ctx))
			r := <-got
			require.NoError(t, r.err)
			require.NoError(t, r.lease.Unlock(ctx))
		})
	}
}
