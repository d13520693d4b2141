package redlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestKnobsAreReadOncePerClient: a client copies the test-only switches of
// internal/knobs when New makes it. A switch turned on afterwards changes
// clients made later, never one in use. Shown with knobs.NoDrift, whose
// effect is visible in Lease.Until: the client made before the switch keeps
// subtracting the drift allowance, the one made after does not.
func TestKnobsAreReadOncePerClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = time.Second
		drift := time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
		_, nodes := mem(3)
		before := newClient(t, nodes)
		knobs.NoDrift.Store(true)
		defer knobs.NoDrift.Store(false)
		after := newClient(t, nodes)

		for _, tc := range []struct {
			name string
			c    *redlock.Client
			want time.Duration
		}{
			{"made before the switch", before, ttl - drift},
			{"made after the switch", after, ttl},
		} {
			start := time.Now() // the bubble's clock stands still until everyone blocks
			m := newMutex(t, tc.c, redlock.WithTTL(ttl))
			lease, err := m.TryLock(ctx)
			require.NoError(t, err, tc.name)
			require.Equal(t, tc.want, lease.Until().Sub(start), tc.name)
			require.NoError(t, lease.Unlock(ctx), tc.name)
		}
	})
}
