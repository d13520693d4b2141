package redlock_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Issue 32, S1, on real masters: a host crash that loses the AOF's last
// second (appendfsync everysec) brings a master back with fencing counters
// older than those it had written back. N=3, five cycles on every master;
// C stopped; three cycles on {A, B}; A loses those three cycles' writes
// (redis-check-aof --truncate-to-timestamp, what a power cut does to
// everysec: kill -9 alone loses nothing); A and C restarted, B paused: the
// next Lock on {A, C} read the counters of the fifth cycle there, a quorum
// of counters that exist, and handed out the sixth cycle's token again (10
// of 10 trials before the fix). Counters now carry the run that wrote them,
// and a counter of another run reads as lost, so the token starts a new
// epoch above every earlier one. With knobs.NoRunStamp the repeat comes back:
// the test can fail.
func TestFencingTokenAfterAOFTailLoss(t *testing.T) {
	checkAOF, err := exec.LookPath("redis-check-aof")
	if err != nil {
		redisproc.RequireOrSkip(t, fmt.Errorf("redis-check-aof not found (apt-get install -y redis-tools): %w", err))
	}
	runStampOnAndOff(t, func(t *testing.T) bool { return fencingAfterDiskLoss(t, checkAOF) })
}

// TestFencingTokenAfterAnOlderSnapshot: the same scenario with RDB
// snapshots and no AOF (docs/operations.md, "appendonly no, RDB
// snapshots"): A and C save a snapshot after the five cycles, and A,
// killed after the three on {A, B}, restarts from it. Its counters and
// C's are the fifth cycle's, a quorum of counters that exist; stamped with
// the runs that wrote them, they read as lost. With knobs.NoRunStamp the
// sixth cycle's token is handed out again.
func TestFencingTokenAfterAnOlderSnapshot(t *testing.T) {
	runStampOnAndOff(t, func(t *testing.T) bool { return fencingAfterDiskLoss(t, "") })
}

// runStampOnAndOff runs scenario, which reports whether a token repeated,
// with the counters' run stamps (no repeat) and with knobs.NoRunStamp (a
// repeat: the test can fail).
func runStampOnAndOff(t *testing.T, scenario func(t *testing.T) (repeated bool)) {
	for _, stamp := range []bool{true, false} {
		t.Run(fmt.Sprint("run stamp=", stamp), func(t *testing.T) {
			if !stamp {
				knobs.NoRunStamp.Store(true)
				defer knobs.NoRunStamp.Store(false)
			}
			repeated := scenario(t)
			if stamp {
				require.False(t, repeated, "a token was handed out twice")
			} else {
				require.True(t, repeated, "with the fix switched off the token repeats (the test can fail)")
			}
		})
	}
}

// fencingAfterDiskLoss runs the scenario once and reports whether the
// last Lock's token was not above every earlier token. With checkAOF (the
// redis-check-aof binary) the masters keep an AOF (everysec) and A loses
// its tail; without, they keep no AOF and A restarts from an older RDB
// snapshot.
func fencingAfterDiskLoss(t *testing.T, checkAOF string) (repeated bool) {
	ctx := context.Background()
	var servers []*redisproc.Server
	var nodes []redlock.Node
	args := []string{"--appendonly", "no"}
	if checkAOF != "" {
		args = []string{"--appendonly", "yes", "--appendfsync", "everysec", "--aof-timestamp-enabled", "yes"}
	}
	for range 3 {
		s := redisproc.StartT(t, redisproc.Config{Args: args})
		n, err := redisnode.Dial(s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = n.Close() })
		servers, nodes = append(servers, s), append(nodes, n)
	}
	a, b, c := 0, 1, 2
	m := newMutex(t, realClient(t, nodes, redlock.WithNodeTimeout(300*time.Millisecond)), redlock.WithTTL(5*time.Second), redlock.WithFencing())
	var tokens []int64
	cycle := func() {
		t.Helper()
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		lease, err := m.Lock(lctx)
		require.NoError(t, err)
		tokens = append(tokens, fenceOf(t, lease))
		require.NoError(t, lease.Unlock(ctx))
	}
	for range 5 {
		cycle()
	}
	if checkAOF == "" {
		for _, i := range []int{a, c} {
			raw := redis.NewClient(&redis.Options{Addr: servers[i].Addr()})
			err := raw.Save(ctx).Err()
			_ = raw.Close()
			require.NoError(t, err)
		}
	}
	require.NoError(t, servers[c].Kill())
	// The AOF marks each second it writes in (#TS:<unix>): the next cycles
	// must be in a later second than the five, so that the cut keeps those
	// and drops these. Wait for the wall clock's second to turn.
	cut := time.Now().Unix()
	for checkAOF != "" && time.Now().Unix() <= cut {
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		cycle() // on {A, B}
	}
	if checkAOF != "" {
		// A's host crashes: its AOF loses what was written after cut.
		raw := redis.NewClient(&redis.Options{Addr: servers[a].Addr()})
		files, err := raw.ConfigGet(ctx, "appendfilename").Result()
		_ = raw.Close()
		require.NoError(t, err)
		require.NoError(t, servers[a].Kill())
		incr, err := filepath.Glob(filepath.Join(servers[a].Dir(), "appendonlydir", files["appendfilename"]+".*.incr.aof"))
		require.NoError(t, err)
		require.Len(t, incr, 1, "one incremental AOF file")
		out, err := exec.Command(checkAOF, "--truncate-to-timestamp", strconv.FormatInt(cut, 10), incr[0]).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	// (Without an AOF, Restart's kill -9 loses everything after A's
	// snapshot.)
	require.NoError(t, servers[a].Restart())
	require.NoError(t, servers[c].Restart())
	resume := func() { _ = servers[b].Resume() }
	require.NoError(t, servers[b].Pause())
	defer resume()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lease, err := m.Lock(lctx) // on {A, C}: B is paused
	require.NoError(t, err)
	last := fenceOf(t, lease)
	resume()
	require.NoError(t, lease.Unlock(ctx))
	for _, tok := range tokens {
		if last <= tok {
			t.Logf("tokens %v, then %d on {A, C}", tokens, last)
			return true
		}
	}
	return false
}
