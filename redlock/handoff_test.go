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

// TestHandOverKnobs: B waits (no notifications, a one-second backoff) while
// A holds; A's Unlock hands B the key on every node at the value of B's
// first attempt; B's next attempt takes it over. With
// knobs.NoGrantTakeover B's own handed keys refuse each of B's attempts,
// and B's Lock runs out of time (the keys live an hour). On memnode under
// virtual time, where every call finishes before its attempt is decided,
// so that no requeue releases the handed keys in passing
// (TestHandedKeyIsTakenOver is the same on real servers).
func TestHandOverKnobs(t *testing.T) {
	for _, knob := range []bool{false, true} {
		t.Run(map[bool]string{false: "taken-over", true: "NoGrantTakeover"}[knob], func(t *testing.T) {
			if knob {
				knobs.NoGrantTakeover.Store(true)
				defer knobs.NoGrantTakeover.Store(false)
			}
			synctest.Test(t, func(t *testing.T) {
				_, nodes := mem(3)
				a := newMutex(t, newClient(t, nodes), redlock.WithTTL(time.Hour))
				b := newMutex(t, newClient(t, queueOnly(nodes)), redlock.WithTTL(time.Hour), redlock.WithRetryBackoff(time.Second, time.Second))
				lease, err := a.TryLock(context.Background())
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				got := lockAsync(ctx, b)
				synctest.Wait() // B's first attempt is refused: B is in every line
				require.NoError(t, lease.Unlock(context.Background()))
				r := <-got
				if knob {
					require.ErrorIs(t, r.err, context.DeadlineExceeded, "B's own handed keys refuse B")
					return
				}
				require.NoError(t, r.err, "B takes over the keys handed to it")
				require.NoError(t, r.lease.Unlock(context.Background()))
			})
		})
	}
}
