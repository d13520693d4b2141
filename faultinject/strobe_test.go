package faultinject

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClockStrobeFlipsTheClock: while the strobe runs, the master's TIME
// reads both about a second ahead and about a second behind (within a
// bounded number of reads); the other master keeps real time; Undo (and
// HealAll) stop the flips and set the clock back. The goroutine's end is
// checked by goleak (TestMain).
func TestClockStrobeFlipsTheClock(t *testing.T) {
	f := ClockStrobe{Nodes: []int{0}, Offset: time.Second, Period: 5 * time.Millisecond}
	RequireFault(t, f)
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind})
		r, other := client(t, c.Addr(0)), client(t, c.Addr(1))
		ctx := ctxT(t, time.Minute)
		strobing := func() (ahead, behind bool) {
			for range 2000 {
				tm, err := r.Time(ctx).Result()
				require.NoError(t, err)
				d := time.Until(tm)
				ahead, behind = ahead || d > 500*time.Millisecond, behind || d < -500*time.Millisecond
				if ahead && behind {
					return
				}
			}
			return
		}
		for _, undo := range []func() error{
			func() error { return f.Undo(ctx, c) },
			func() error { return c.HealAll(ctx) },
		} {
			require.NoError(t, f.Inject(ctx, c))
			ahead, behind := strobing()
			assert.True(t, ahead && behind, "the clock reads both ahead (%v) and behind (%v)", ahead, behind)
			tm, err := other.Time(ctx).Result()
			require.NoError(t, err)
			assert.InDelta(t, 0, time.Until(tm), float64(300*time.Millisecond), "the other master keeps real time")
			require.NoError(t, undo())
			for range 20 {
				tm, err := r.Time(ctx).Result()
				require.NoError(t, err)
				require.InDelta(t, 0, time.Until(tm), float64(300*time.Millisecond), "undone: real time")
			}
		}
		require.Error(t, ClockStrobe{Nodes: []int{0}, Offset: time.Second}.Inject(ctx, c), "a period below 1ms")
		require.Error(t, ClockStrobe{Nodes: []int{0}, Period: time.Millisecond}.Inject(ctx, c), "no offset")
	})
}
