package faultinject

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serverSecond waits (polling the server's TIME, bounded) until the
// server's clock has just entered a new second, and returns that second.
func serverSecond(t *testing.T, r *redis.Client) int64 {
	t.Helper()
	ctx := ctxT(t, 5*time.Second)
	first, err := r.Time(ctx).Result()
	require.NoError(t, err)
	for range 2000 {
		now, err := r.Time(ctx).Result()
		require.NoError(t, err)
		if now.Unix() > first.Unix() {
			return now.Unix()
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the server's clock did not reach the next second in 2000 reads")
	return 0
}

// TestAOFTailLossLosesTheLastSecond: a master with appendfsync everysec
// crashes as a host does: a key written seconds before survives, one
// written in the second of the crash is gone, and the master comes back as
// a new run. The crash must fall in the second of the last write; a run
// where the clock ticked in between is retried (at most 3 times).
func TestAOFTailLossLosesTheLastSecond(t *testing.T) {
	f := AOFTailLoss{Nodes: []int{0}}
	RequireFault(t, f)
	c := StartT(t, Config{N: 2, Backend: Process, Persistence: []Persistence{AOFEverySec}})
	r, other := client(t, c.ServerAddr(0)), client(t, c.ServerAddr(1))
	ctx := ctxT(t, time.Minute)
	for try := 0; ; try++ {
		require.Less(t, try, 3, "the crash never fell in the second of the last write")
		require.NoError(t, r.FlushAll(ctx).Err())
		require.NoError(t, r.Set(ctx, "old", "1", 0).Err())
		require.NoError(t, other.Set(ctx, "other", "1", 0).Err())
		serverSecond(t, r)
		sec := serverSecond(t, r) // "old" is now at least a second older
		require.NoError(t, r.Set(ctx, "new", "1", 0).Err())
		before, err := c.Node(0).Info(ctx)
		require.NoError(t, err)
		require.NoError(t, f.Inject(ctx, c))
		waitUp(t, r)
		after, err := c.Node(0).Info(ctx)
		require.NoError(t, err)
		assert.NotEqual(t, before.RunID, after.RunID, "the master comes back as a new run")
		n, err := r.Exists(ctx, "old").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "a key written seconds before the crash survives")
		n, err = r.Exists(ctx, "new").Result()
		require.NoError(t, err)
		if n == 1 {
			now, err := r.Time(ctx).Result()
			require.NoError(t, err)
			t.Logf("try %d: the last write (second %d) survived; the server's clock now reads %d: retrying", try, sec, now.Unix())
			continue
		}
		n, err = other.Exists(ctx, "other").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "the other master is untouched")
		return
	}
}

func TestAOFTailLossNeedsEverysec(t *testing.T) {
	f := AOFTailLoss{Nodes: []int{0}}
	RequireFault(t, f)
	c := StartT(t, Config{N: 1, Backend: Process, Persistence: []Persistence{AOFAlways}})
	err := f.Inject(ctxT(t, 30*time.Second), c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "aof-tail-loss[0]")
	assert.Contains(t, err.Error(), "aof-everysec")
	waitUp(t, client(t, c.Addr(0)))
}
