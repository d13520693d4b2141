package faultinject

import (
	"context"
	"errors"
	"net"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The lock scripts of package redisnode, its INFO parsing and Node.Inspect
// must work on every backend.
func TestNodeOperationsOnEveryBackend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 3, Backend: kind})
		require.Equal(t, kind, c.Kind())
		ctx := ctxT(t, 5*time.Second)
		for i := range c.N() {
			n := c.Node(i)
			assert.Equal(t, c.ServerAddr(i), n.Addr(), "node identity is the server address")
			if kind == Memory {
				assert.Equal(t, n.Addr(), c.Nodes()[i].Addr(), "Nodes holds the same nodes")
				_, lined := c.Nodes()[i].(redlock.QueueNode)
				assert.False(t, lined, "on the memory backend the lock polls: no waiting line")
			} else {
				assert.Equal(t, n, c.Nodes()[i], "Nodes holds the same nodes")
			}
			ok, err := n.Acquire(ctx, "k", "v1", time.Minute)
			require.NoError(t, err)
			assert.True(t, ok, "a free key is acquired")
			ok, err = n.Acquire(ctx, "k", "v1", time.Minute)
			require.NoError(t, err)
			assert.True(t, ok, "a retried copy of the same acquire reports the key held")
			ok, err = n.Acquire(ctx, "k", "v2", time.Minute)
			require.NoError(t, err)
			assert.False(t, ok, "a held key is taken")
			ok, err = n.Extend(ctx, "k", "v1", 2*time.Minute)
			require.NoError(t, err)
			assert.True(t, ok)
			h, err := n.Inspect(ctx, "k")
			require.NoError(t, err)
			assert.True(t, h.Exists)
			assert.Equal(t, "v1", h.Value)
			assert.InDelta(t, 2*time.Minute, h.TTL, float64(5*time.Second))
			ok, err = n.Release(ctx, "k", "v2", time.Minute)
			require.NoError(t, err)
			assert.False(t, ok, "release with the wrong value")
			ok, err = n.Release(ctx, "k", "v1", 0)
			require.NoError(t, err)
			assert.True(t, ok)
			h, err = n.Inspect(ctx, "k")
			require.NoError(t, err)
			assert.False(t, h.Exists, "released")
			ok, err = n.Acquire(ctx, "k", "v2", time.Minute)
			require.NoError(t, err)
			assert.False(t, ok, "the guard left by the release of v2 refuses the straggler, though the key is free")
			h, err = n.Inspect(ctx, "k")
			require.NoError(t, err)
			assert.False(t, h.Exists, "the refused acquire left no key")
			info, err := n.Info(ctx)
			require.NoError(t, err)
			assert.NotEmpty(t, info.RunID)
		}
	})
}

func TestKillMakesCommandsFailAndUndoRestarts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind})
		f := Kill{Nodes: []int{0}}
		require.NoError(t, f.Inject(t.Context(), c))
		_, err := do(t, func(ctx context.Context) (Holder, error) { return c.Node(0).Inspect(ctx, "k") })
		require.Error(t, err, "a killed master must not answer")
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "a killed master fails fast, got %v", err)
		_, err = do(t, func(ctx context.Context) (Holder, error) { return c.Node(1).Inspect(ctx, "k") })
		require.NoError(t, err, "the other master is untouched")
		require.NoError(t, c.kill(t.Context(), 0), "killing a killed master does nothing")

		require.NoError(t, f.Undo(t.Context(), c))
		_, err = do(t, func(ctx context.Context) (Holder, error) { return c.Node(0).Inspect(ctx, "k") })
		require.NoError(t, err, "the master answers after the undo")
	})
}

func TestRestartPersistence(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind, Persistence: []Persistence{NoPersistence, AOFAlways}})
		rc := clients(t, c)
		ctx := ctxT(t, 10*time.Second)
		for _, r := range rc {
			require.NoError(t, r.Set(ctx, "k", "v", time.Minute).Err())
		}
		const delay = 300 * time.Millisecond
		start := time.Now()
		require.NoError(t, c.restart(ctx, restartOptions{Delay: delay, Persistence: NoPersistence}, 0))
		assert.GreaterOrEqual(t, time.Since(start), delay, "restart waits its delay")
		require.NoError(t, c.restart(ctx, restartOptions{Persistence: AOFAlways}, 1))
		waitUp(t, rc...)

		n, err := rc[0].Exists(ctx, "k").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "without persistence the key is gone after a restart")

		v, err := rc[1].Get(ctx, "k").Result()
		require.NoError(t, err, "with AOF always the key survives a kill")
		assert.Equal(t, "v", v)
		ttl, err := rc[1].PTTL(ctx, "k").Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 50*time.Second, "the TTL survives too")
		assert.LessOrEqual(t, ttl, time.Minute)

		// AOF run restarted without persistence loses it; and a later AOF
		// restart does not resurrect the old file.
		require.NoError(t, c.restart(ctx, restartOptions{Persistence: NoPersistence}, 1))
		require.NoError(t, c.restart(ctx, restartOptions{Persistence: AOFAlways}, 1))
		waitUp(t, rc[1])
		n, err = rc[1].Exists(ctx, "k").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "a run without persistence breaks the chain")
	})
}

func TestPauseTimesOutWithinDeadlineAndResumeWorks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind})
		rc := clients(t, c)
		require.NoError(t, rc[0].Set(t.Context(), "before", "1", 0).Err())
		require.NoError(t, c.pause(t.Context(), 0))

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		_, err := c.Node(0).Inspect(ctx, "before")
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "the call returns by its per-node deadline")

		// A write sent during the pause is applied on resume (Redis queues it in the socket buffer).
		ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
		err = rc[0].Set(ctx, "late", "1", 0).Err()
		cancel()
		require.Error(t, err)

		_, err = do(t, func(ctx context.Context) (Holder, error) { return c.Node(1).Inspect(ctx, "k") })
		require.NoError(t, err, "the other master is untouched")

		require.NoError(t, c.resume(t.Context(), 0))
		h, err := do(t, func(ctx context.Context) (Holder, error) { return c.Node(0).Inspect(ctx, "before") })
		require.NoError(t, err, "the master answers after resume")
		assert.True(t, h.Exists, "data survives a pause")
		eventually(t, 2*time.Second, func() bool { return rc[0].Exists(t.Context(), "late").Val() == 1 },
			"the write sent during the pause was applied after resume")
	})
}

func TestClockJumpExpiresKeysOnThatNodeOnly(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 3, Backend: kind})
		rc := clients(t, c)
		ctx := ctxT(t, 10*time.Second)
		for _, r := range rc {
			require.NoError(t, r.Set(ctx, "k", "v", 20*time.Second).Err())
		}
		f := ClockJump{Nodes: []int{1}, Offset: 30 * time.Second}
		require.NoError(t, f.Inject(ctx, c))
		n, err := rc[1].Exists(ctx, "k").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "a +30s jump expires a PX 20000 key at once")
		for _, i := range []int{0, 2} {
			ttl, err := rc[i].PTTL(ctx, "k").Result()
			require.NoError(t, err)
			assert.Greater(t, ttl, 15*time.Second, "master %d keeps its key", i)
		}
		tm, err := rc[1].Time(ctx).Result()
		require.NoError(t, err)
		assert.InDelta(t, 30*time.Second, time.Until(tm), float64(2*time.Second), "TIME shows the skew")

		// Backward: PTTL grows by the jump, as Redis stores absolute expiry.
		require.NoError(t, f.Undo(ctx, c))
		require.NoError(t, rc[1].Set(ctx, "k", "v", 20*time.Second).Err())
		require.NoError(t, c.setClock(ctx, -30*time.Second, 1, 1))
		ttl, err := rc[1].PTTL(ctx, "k").Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 45*time.Second, "a -30s jump lengthens the TTL")
		require.NoError(t, c.resetClock(ctx, 1))
		ttl, err = rc[1].PTTL(ctx, "k").Result()
		require.NoError(t, err)
		assert.Less(t, ttl, 21*time.Second, "reset brings the TTL back")
	})
}

func TestClockRateExpiresKeysFaster(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind})
		rc := clients(t, c)
		ctx := ctxT(t, 10*time.Second)
		require.NoError(t, c.setClock(ctx, 0, 10, 0))
		for _, r := range rc {
			require.NoError(t, r.Set(ctx, "k", "v", 5*time.Second).Err())
		}
		start := time.Now()
		eventually(t, 3*time.Second, func() bool { return rc[0].Exists(ctx, "k").Val() == 0 },
			"a PX 5000 key at rate x10 expires")
		elapsed := time.Since(start)
		t.Logf("PX 5000 at x10 expired after %v real", elapsed)
		assert.Greater(t, elapsed, 300*time.Millisecond, "not at once")
		assert.EqualValues(t, 1, rc[1].Exists(ctx, "k").Val(), "the master at normal speed keeps its key")
	})
}

// pingTime returns the median of five PINGs.
// fastestPing is the shortest of 20 PINGs' round trips: a latency
// injected on every reply is a floor under each of them.
func fastestPing(t *testing.T, r *redis.Client) time.Duration {
	t.Helper()
	best := time.Duration(-1)
	for range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		start := time.Now()
		err := r.Ping(ctx).Err()
		d := time.Since(start)
		cancel()
		require.NoError(t, err)
		if best < 0 || d < best {
			best = d
		}
	}
	return best
}

func pingTime(t *testing.T, r *redis.Client) time.Duration {
	t.Helper()
	var ds []time.Duration
	for range 5 {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		start := time.Now()
		err := r.Ping(ctx).Err()
		ds = append(ds, time.Since(start))
		cancel()
		require.NoError(t, err)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[2]
}

func TestLatency(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind})
		rc := clients(t, c)
		pingTime(t, rc[0]) // warm the connection
		require.NoError(t, c.latency(t.Context(), 20*time.Millisecond, 0, Downstream, 0))
		d := pingTime(t, rc[0])
		t.Logf("PING with 20ms downstream latency: %v", d)
		assert.GreaterOrEqual(t, d, 18*time.Millisecond)
		// Relative to the slowed master, so that a loaded machine cannot fail it.
		assert.Less(t, fastestPing(t, rc[1]), d-10*time.Millisecond, "the other master is fast")

		require.NoError(t, c.latency(t.Context(), 20*time.Millisecond, 0, Both, 0))
		d = pingTime(t, rc[0])
		t.Logf("PING with 20ms latency both ways: %v", d)
		assert.GreaterOrEqual(t, d, 38*time.Millisecond)

		require.NoError(t, c.heal(t.Context(), 0))
		assert.Less(t, fastestPing(t, rc[0]), d-20*time.Millisecond, "heal removes the latency")
	})
}

func TestHangKeepsConnectionsOpenAndHealWorks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind})
		rc := clients(t, c)
		// Open the pooled connection first: go-redis's connection set-up
		// would itself hang, and the SET below would never be sent.
		require.NoError(t, rc[0].Ping(t.Context()).Err())
		require.NoError(t, c.hang(t.Context(), Downstream, 0))

		conn, err := net.DialTimeout("tcp", c.Addr(0), time.Second)
		require.NoError(t, err, "a hung master still accepts connections")
		_ = conn.Close()

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		_, err = c.Node(0).Inspect(ctx, "k")
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "a hung call ends at its deadline")

		// Downstream hang: the request reached the master and was applied.
		ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
		require.Error(t, rc[0].Set(ctx, "applied", "1", 0).Err())
		cancel()
		direct := client(t, c.ServerAddr(0))
		eventually(t, time.Second, func() bool { return direct.Exists(t.Context(), "applied").Val() == 1 },
			"a downstream hang loses replies, not requests")

		require.NoError(t, c.heal(t.Context(), 0))
		_, err = do(t, func(ctx context.Context) (Holder, error) { return c.Node(0).Inspect(ctx, "k") })
		require.NoError(t, err, "heal ends the hang")

		// Upstream hang: requests never arrive.
		waitUp(t, rc[0])
		require.NoError(t, c.hang(t.Context(), Upstream, 0))
		ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
		require.Error(t, rc[0].Set(ctx, "dropped", "1", 0).Err())
		cancel()
		require.NoError(t, c.heal(t.Context(), 0))
		assert.Zero(t, direct.Exists(t.Context(), "dropped").Val(), "an upstream hang drops requests")
	})
}

func TestPartitionRefusesAndHealWorks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind})
		_, err := do(t, func(ctx context.Context) (Holder, error) { return c.Node(0).Inspect(ctx, "k") })
		require.NoError(t, err)
		f := Partition{Nodes: []int{0}}
		require.NoError(t, f.Inject(t.Context(), c))

		_, err = net.DialTimeout("tcp", c.Addr(0), time.Second)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
		_, err = do(t, func(ctx context.Context) (Holder, error) { return c.Node(0).Inspect(ctx, "k") })
		require.Error(t, err)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "a partition fails fast, got %v", err)
		_, err = do(t, func(ctx context.Context) (Holder, error) { return c.Node(1).Inspect(ctx, "k") })
		require.NoError(t, err, "the other master is reachable")

		require.NoError(t, f.Undo(t.Context(), c))
		_, err = do(t, func(ctx context.Context) (Holder, error) { return c.Node(0).Inspect(ctx, "k") })
		require.NoError(t, err, "heal reconnects")
	})
}

// reachable reports which of the nodes answer an Inspect within 200ms.
func reachable(t *testing.T, nodes []redlock.Node) []bool {
	t.Helper()
	out := make([]bool, len(nodes))
	for i, n := range nodes {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		_, err := n.(interface {
			Inspect(context.Context, string) (Holder, error)
		}).Inspect(ctx, "k")
		cancel()
		out[i] = err == nil
	}
	return out
}

func TestAsymmetricPartitionThroughLinks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 5, Backend: kind})
		a, err := c.NewLink("clientA")
		require.NoError(t, err)
		b, err := c.NewLink("clientB")
		require.NoError(t, err)
		_, err = c.NewLink("clientA")
		require.ErrorContains(t, err, `"clientA"`, "names are unique")

		require.NoError(t, a.partition(t.Context(), 3, 4))
		require.NoError(t, Partition{Nodes: []int{0, 1}, Link: "clientB"}.Inject(t.Context(), c))
		assert.Equal(t, []bool{true, true, true, false, false}, reachable(t, a.Nodes()), "A is cut off from 3-4")
		assert.Equal(t, []bool{false, false, true, true, true}, reachable(t, b.Nodes()), "B is cut off from 0-1")
		assert.Equal(t, []bool{true, true, true, true, true}, reachable(t, c.Nodes()), "others see everyone")
		_, err = net.DialTimeout("tcp", a.Addr(3), time.Second)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, "a link partition refuses connections")

		// A fault on the shared proxy reaches link clients too.
		require.NoError(t, c.partition(t.Context(), 2))
		assert.Equal(t, []bool{true, true, false, false, false}, reachable(t, a.Nodes()))

		// Latency on one link only.
		require.NoError(t, c.heal(t.Context(), 2))
		require.NoError(t, a.latency(t.Context(), 30*time.Millisecond, 0, Downstream, 2))
		da := pingTime(t, client(t, a.Addr(2)))
		db := pingTime(t, client(t, b.Addr(2)))
		assert.GreaterOrEqual(t, da, 28*time.Millisecond, "link A is slow")
		assert.Less(t, db, da-15*time.Millisecond, "link B is not")

		require.NoError(t, a.heal(t.Context(), 0, 1, 2, 3, 4))
		assert.Equal(t, []bool{true, true, true, true, true}, reachable(t, a.Nodes()))
		require.NoError(t, b.Close())
		require.NoError(t, b.Close(), "Close is idempotent")
		assert.ErrorContains(t, b.heal(t.Context(), 0), "closed", "a closed link's proxies stay closed")
		assert.Nil(t, c.Link("clientB"))
		_, err = c.NewLink("clientB")
		require.NoError(t, err, "a closed link's name is free again")
	})
}

func TestHealAllRestoresEverything(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 5, Backend: kind})
		l, err := c.NewLink("x")
		require.NoError(t, err)
		ctx := ctxT(t, 20*time.Second)
		require.NoError(t, c.kill(ctx, 0))
		require.NoError(t, c.pause(ctx, 1))
		require.NoError(t, c.setClock(ctx, time.Hour, 1, 2))
		require.NoError(t, c.latency(ctx, 50*time.Millisecond, 10*time.Millisecond, Both, 3))
		require.NoError(t, c.partition(ctx, 4))
		require.NoError(t, l.hang(ctx, Both, 0, 1, 2, 3, 4))

		require.NoError(t, c.HealAll(ctx))
		assert.Equal(t, []bool{true, true, true, true, true}, reachable(t, c.Nodes()))
		assert.Equal(t, []bool{true, true, true, true, true}, reachable(t, l.Nodes()))
		tm, err := client(t, c.Addr(2)).Time(ctx).Result()
		require.NoError(t, err)
		assert.InDelta(t, 0, time.Since(tm), float64(2*time.Second), "clock reset")
		// 50ms±10ms each way would make every PING take at least 80ms, so
		// the fastest of several is under it once the latency is gone,
		// however loaded the machine (a slow one only delays some).
		assert.Less(t, fastestPing(t, client(t, c.Addr(3))), 80*time.Millisecond, "latency removed")
	})
}

// A skew set before a restart is still in force on the restarted server
// (libfaketime's reference point moves to the new process).
func TestClockSkewSurvivesRestart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 1, Backend: kind})
		ctx := ctxT(t, 20*time.Second)
		require.NoError(t, c.setClock(ctx, 30*time.Second, 1, 0))
		require.NoError(t, c.restart(ctx, restartOptions{}, 0))
		r := client(t, c.ServerAddr(0))
		waitUp(t, r)
		now, err := r.Time(ctx).Result()
		require.NoError(t, err)
		skew := time.Until(now)
		assert.InDelta(t, float64(30*time.Second), float64(skew), float64(time.Second), "skew after restart: %v", skew)
	})
}

func TestFailoverLeadsToAnotherServerWithoutTheKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 2, Backend: kind, Persistence: []Persistence{AOFAlways}})
		ctx := ctxT(t, 30*time.Second)
		n := c.Node(0)
		before, err := n.Info(ctx)
		require.NoError(t, err)
		addr := c.Addr(0)
		for round := range 2 {
			ok, err := n.Acquire(ctx, "k", "v", time.Minute)
			require.NoError(t, err)
			require.True(t, ok)
			f := Failover{Nodes: []int{0}}
			require.NoError(t, f.Inject(ctx, c))
			require.NoError(t, f.Undo(ctx, c), "undo of a failover does nothing")
			assert.Equal(t, addr, c.Addr(0), "the master's address stays")
			var after redlock.ServerInfo
			eventually(t, 5*time.Second, func() bool {
				after, err = n.Info(ctx)
				return err == nil
			}, "the node answers after failover %d: %v", round, err)
			assert.NotEqual(t, before.RunID, after.RunID, "failover %d: another server answers", round)
			h, err := n.Inspect(ctx, "k")
			require.NoError(t, err)
			assert.False(t, h.Exists, "failover %d: the new master lacks the key (AOF on the old one notwithstanding)", round)
			before = after
		}
		h, err := c.Node(1).Inspect(ctx, "k")
		require.NoError(t, err)
		assert.False(t, h.Exists, "the other master is untouched")
		require.NoError(t, c.pause(ctx, 1))
		assert.ErrorContains(t, c.failover(ctx, 1), "paused", "a paused master cannot fail over")
		require.NoError(t, c.resume(ctx, 1))
		assert.ErrorContains(t, c.failover(ctx, 7), "7")
	})
}
