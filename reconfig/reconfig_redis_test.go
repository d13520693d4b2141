package reconfig_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/redisinfo"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/reconfig"
	"github.com/quorumlock/quorumlock/redlock"
)

// rig is six real masters: five in the first set, one spare.
type rig struct {
	servers []*redisproc.Server
	addrs   []string
	admin   map[string]*redis.Client
	ch      *reconfig.Changer
	log     *lines
	calls   []*acquireCalls // one per client the rig made
}

// acquireCalls counts a client's acquire calls: those its Lock calls sent
// (attempts x nodes, known once each Lock returned: OpDone) and those that
// ended (NodeCall). A Lock returns at a quorum, and a call still on its way
// to an occupied master could reach it after free's DEL and take the key
// (B then found A on three masters: TestSwapWithoutRecordsGivesTwoHolders
// on a loaded machine), so free waits until every call ended.
type acquireCalls struct {
	redlock.NopObserver
	nodes       int
	mu          sync.Mutex
	sent, ended int
}

func (a *acquireCalls) OpDone(_ context.Context, e redlock.OpEvent) {
	if e.Op == redlock.OpAcquire {
		a.mu.Lock()
		a.sent += e.Attempts * a.nodes
		a.mu.Unlock()
	}
}

func (a *acquireCalls) NodeCall(_ context.Context, e redlock.NodeEvent) {
	if e.Op == redlock.OpAcquire {
		a.mu.Lock()
		a.ended++
		a.mu.Unlock()
	}
}

func (a *acquireCalls) done() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ended >= a.sent
}

type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.l = append(l.l, s); l.mu.Unlock() }

func (l *lines) all() string { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.l, "\n") }

func newRig(t *testing.T, cfg ...redisproc.Config) *rig {
	t.Helper()
	r := &rig{admin: map[string]*redis.Client{}, log: &lines{}}
	masters := map[string]redis.Cmdable{}
	for range 6 {
		s := redisproc.StartT(t, append(cfg, redisproc.Config{})[0])
		r.servers = append(r.servers, s)
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true, Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { _ = c.Close() })
		r.addrs = append(r.addrs, s.Addr())
		r.admin[s.Addr()] = c
		masters[s.Addr()] = c
	}
	r.ch = &reconfig.Changer{Masters: masters, Log: func(s string) { r.log.add(s); t.Log(s) }}
	return r
}

// client is a lock client on cfg's masters with cfg's record, or without
// a record (and so unchecked) when record is false.
func (r *rig) client(t *testing.T, cfg reconfig.Config, record bool) *redlock.Client {
	t.Helper()
	ns, err := redisnode.DialAll(cfg.All()...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ns.Close() })
	if record {
		for _, n := range ns {
			require.NoError(t, n.SetConfig(cfg.Record()))
		}
	}
	calls := &acquireCalls{nodes: len(ns)}
	r.calls = append(r.calls, calls)
	c, err := redlock.New(ns.Redlock(), append(reconfig.QuorumOptions(cfg), redlock.WithObserver(calls))...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// waitUnsealed returns once every master of cfg would take the next step
// by its own clock (the wait since cfg's seal has passed, or is not
// enforced: knobs.NoReconfigWait), reading the records every 10 ms.
func (r *rig) waitUnsealed(t *testing.T, cfg reconfig.Config) {
	t.Helper()
	if knobs.NoReconfigWait.Load() { // the masters do not wait
		return
	}
	for _, m := range cfg.All() {
		for {
			rec, err := r.ch.Read(context.Background(), m)
			require.NoError(t, err)
			require.False(t, rec.Sealed.IsZero(), m)
			if !rec.Now.Before(rec.Sealed.Add(rec.Wait)) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// occupy sets key to a foreign value on masters, so that the next lock
// gets the others only; free removes it.
func (r *rig) occupy(t *testing.T, key string, masters ...string) {
	t.Helper()
	for _, m := range masters {
		require.NoError(t, r.admin[m].Set(context.Background(), key, "someone-else", time.Hour).Err())
	}
}

func (r *rig) free(t *testing.T, key string, masters ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, c := range r.calls {
			if !c.done() {
				return false
			}
		}
		return true
	}, 30*time.Second, 5*time.Millisecond, "every acquire call the clients' Locks sent has ended")
	for _, m := range masters {
		require.NoError(t, r.admin[m].Del(context.Background(), key).Err())
	}
}

// lock takes key with Lock, which retries (a node call slower than its
// deadline on a loaded machine is a failed vote, not the test's point)
// until 5 s have passed, and stops at once on a stale configuration.
func lock(t *testing.T, c *redlock.Client, key string, ttl time.Duration) (*redlock.Lease, error) {
	t.Helper()
	m, err := c.NewMutex(key, redlock.WithTTL(ttl), redlock.WithRetryBackoff(time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return m.Lock(ctx)
}

func config(t *testing.T, epoch int64, masters []string, keyTTL time.Duration) reconfig.Config {
	t.Helper()
	c := reconfig.Config{Epoch: epoch, Masters: append([]string(nil), masters...), MaxKeyTTL: keyTTL, DriftFactor: 0.01}
	c.Quorum = len(masters)/2 + 1
	return c
}

// swap is the change of every test: masters 0-4 become 0-3 and 5
// (master 4 replaced by the spare), A holds the old set's {2,3,4} and B
// then asks the new one while {2,3} are A's: {0,1,5} is a quorum of the new
// set that misses A's quorum.
type swap struct {
	old, new []string
}

func (r *rig) swap() swap {
	return swap{old: r.addrs[:5], new: append(append([]string(nil), r.addrs[:4]...), r.addrs[5])}
}

// TestSwapWithoutRecordsGivesTwoHolders is the failure the records
// prevent: clients switched from the old list to the new one in one swap,
// no records, no wait. B takes {0,1,5} while A holds {2,3,4}.
func TestSwapWithoutRecordsGivesTwoHolders(t *testing.T) {
	r := newRig(t)
	s := r.swap()
	a := r.client(t, config(t, 1, s.old, time.Minute), false)
	b := r.client(t, config(t, 2, s.new, time.Minute), false)
	r.occupy(t, "job", s.old[0], s.old[1])
	la, err := lock(t, a, "job", 30*time.Second)
	require.NoError(t, err, "A takes {2,3,4}")
	r.free(t, "job", s.old[0], s.old[1])
	lb, err := lock(t, b, "job", 30*time.Second)
	require.NoError(t, err, "B takes {0,1,5}")
	assert.True(t, la.Valid() && lb.Valid(), "two holders")
}

// TestStepsKeepOneHolder replaces master 4 by the spare in two steps (add,
// then remove) with the records: A, holding the lock at epoch 1, is
// refused as stale once the first step commits, and the masters make the
// second step wait until no lease of epoch 1 can be valid, so B at epoch 3
// takes {0,1,5} only after A's lease ended. With either mechanism switched
// off (knobs.NoReconfigWait, knobs.NoConfigCheck) the same schedule gives
// two holders.
func TestStepsKeepOneHolder(t *testing.T) {
	run := func(t *testing.T, keyTTL, ttl time.Duration) (r *rig, c *redlock.Client, la *redlock.Lease, e3 reconfig.Config) {
		r = newRig(t)
		s := r.swap()
		e1 := config(t, 1, s.old, keyTTL)
		require.NoError(t, r.ch.Init(context.Background(), e1))
		steps, err := reconfig.Plan(e1, s.new)
		require.NoError(t, err)
		require.Len(t, steps, 2, "a replacement is two steps")
		assert.Len(t, steps[0].Masters, 6, "the first adds")
		e3 = steps[1]
		assert.Equal(t, s.new, e3.Masters)

		a := r.client(t, e1, true)
		c = r.client(t, e1, true) // another client still on epoch 1
		r.waitUnsealed(t, e1)     // so that the first step commits while A holds
		r.occupy(t, "job", s.old[0], s.old[1])
		la, err = lock(t, a, "job", ttl)
		require.NoError(t, err, "A takes {2,3,4} at epoch 1")
		r.free(t, "job", s.old[0], s.old[1])

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, r.ch.Step(ctx, e1, steps[0]))
		if err := la.Extend(ctx); la.Valid() || err == nil { // valid but on a machine stalled for a whole TTL
			require.ErrorIs(t, err, redlock.ErrConfigStale, "A's extend after the commit point")
		}
		second, err := r.ch.Read(ctx, s.old[0])
		require.NoError(t, err)
		require.NoError(t, r.ch.Step(ctx, steps[0], steps[1]))
		third, err := r.ch.Read(ctx, s.old[0])
		require.NoError(t, err)
		if !knobs.NoReconfigWait.Load() {
			// By master 0's own records: it took the second step (and
			// sealed it) no sooner than the wait after its seal of the
			// first.
			assert.GreaterOrEqual(t, third.Sealed.Sub(second.Sealed), steps[0].Wait(), "the second step came the wait after the first")
		}
		return r, c, la, e3
	}

	t.Run("rule", func(t *testing.T) {
		const ttl = time.Second
		r, c, la, e3 := run(t, ttl, ttl)
		assert.Contains(t, r.log.all(), "refused: wait ", "the masters refused the second step until their wait had passed")
		b := r.client(t, e3, true)
		lb, err := lock(t, b, "job", ttl)
		require.NoError(t, err, "B takes the lock at epoch 3")
		assert.False(t, la.Valid(), "A's lease of epoch 1 ended before B's began")
		assert.True(t, time.Now().After(la.Until()))
		_ = lb

		// A client still at epoch 1 is refused as stale at once.
		r.free(t, "job", e3.Masters...)
		_, err = lock(t, c, "job", ttl)
		require.ErrorIs(t, err, redlock.ErrConfigStale)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
	})

	t.Run("NoReconfigWait", func(t *testing.T) {
		knobs.NoReconfigWait.Store(true)
		defer knobs.NoReconfigWait.Store(false)
		// A long lease and key life: without the wait nothing separates
		// the epochs.
		r, _, la, e3 := run(t, time.Minute, 50*time.Second)
		assert.NotContains(t, r.log.all(), "refused: wait ")
		b := r.client(t, e3, true)
		lb, err := lock(t, b, "job", 50*time.Second)
		require.NoError(t, err, "B takes {0,1,5} at once")
		assert.True(t, la.Valid() && lb.Valid(), "two holders: the wait is what separates them")
	})
}

// TestStaleClientIsRefused: after the change, a client still on the old
// list cannot take a quorum of the old set while B holds the new set's
// {0,1,5}; with the check switched off (knobs.NoConfigCheck) it does.
func TestStaleClientIsRefused(t *testing.T) {
	for _, off := range []bool{false, true} {
		name := "rule"
		if off {
			name = "NoConfigCheck"
		}
		t.Run(name, func(t *testing.T) {
			// The wait is not what this test is about: skipped, so that
			// leases of a minute fit.
			knobs.NoReconfigWait.Store(true)
			defer knobs.NoReconfigWait.Store(false)
			r := newRig(t)
			s := r.swap()
			e1 := config(t, 1, s.old, time.Minute)
			require.NoError(t, r.ch.Init(context.Background(), e1))
			stale := r.client(t, e1, true)
			steps, err := reconfig.Plan(e1, s.new)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i, to := range steps {
				from := e1
				if i > 0 {
					from = steps[i-1]
				}
				require.NoError(t, r.ch.Step(ctx, from, to))
			}
			e3 := steps[len(steps)-1]
			b := r.client(t, e3, true)
			r.occupy(t, "job", s.new[2], s.new[3])
			lb, err := lock(t, b, "job", 30*time.Second)
			require.NoError(t, err, "B takes {0,1,5}")
			r.free(t, "job", s.new[2], s.new[3])

			if off {
				knobs.NoConfigCheck.Store(true)
				defer knobs.NoConfigCheck.Store(false)
			}
			la, err := lock(t, stale, "job", 30*time.Second)
			if off {
				require.NoError(t, err, "the stale client takes {2,3,4}")
				assert.True(t, la.Valid() && lb.Valid(), "two holders")
				return
			}
			require.ErrorIs(t, err, redlock.ErrConfigStale)
			var qe *redlock.QuorumError
			require.True(t, errors.As(err, &qe))
			assert.Contains(t, err.Error(), "configuration not current")
		})
	}
}

// TestStepRefusals: a step that is not one step, or skips an epoch, is
// refused before anything is written; a master that lost its record is
// named and the step still commits on a quorum; the records read back.
func TestStepRefusals(t *testing.T) {
	r := newRig(t)
	s := r.swap()
	e1 := config(t, 1, s.old, 50*time.Millisecond)
	ctx := context.Background()
	require.NoError(t, r.ch.Init(ctx, e1))
	require.Error(t, r.ch.Init(ctx, config(t, 1, s.new, 50*time.Millisecond)), "init over another record")

	swap := config(t, 2, s.new, 50*time.Millisecond)
	err := r.ch.Step(ctx, e1, swap)
	require.ErrorContains(t, err, "more than one step")
	_, err = reconfig.Next(e1, s.new)
	require.ErrorContains(t, err, "more than one step")

	next, err := reconfig.Next(e1, r.addrs)
	require.NoError(t, err)
	skip := next
	skip.Epoch = 3
	require.ErrorContains(t, r.ch.Step(ctx, e1, skip), "want one more")

	require.NoError(t, r.admin[s.old[0]].Del(ctx, "quorumlock:config").Err()) // lost, as in a restart without persistence
	require.NoError(t, r.ch.Step(ctx, e1, next))
	assert.Contains(t, r.log.all(), s.old[0]+" refused: norecord")
	rec, err := r.ch.Read(ctx, s.old[1])
	require.NoError(t, err)
	assert.Equal(t, next.Record(), rec.Config.Record())
	assert.False(t, rec.Sealed.IsZero())
	assert.Equal(t, next.Wait(), rec.Wait)
	rec, err = r.ch.Read(ctx, s.old[0])
	require.NoError(t, err)
	assert.Zero(t, rec.Config.Epoch, "the master that lost its record has none")
}

// TestFenceTokensAcrossTheChange is docs/reconfig.md's idle-lock example:
// lease j writes its token back to {0,1,2}, lease k a larger one to
// {2,3,4}, and the masters then go to {0,1,5} in four steps while the lock
// is idle. The next lease's quorum can be {0,1}, whose counters are j's.
// With the epoch stamp those counters read as lost and the token comes
// from the clock, above k's; with knobs.NoConfigStamp they count and the
// token is not above k's.
func TestFenceTokensAcrossTheChange(t *testing.T) {
	for _, off := range []bool{false, true} {
		name := "rule"
		if off {
			name = "NoConfigStamp"
		}
		t.Run(name, func(t *testing.T) {
			const ttl = 250 * time.Millisecond
			r := newRig(t)
			m := r.addrs
			e1 := config(t, 1, m[:5], 300*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, r.ch.Init(ctx, e1))
			fenced := func(c *redlock.Client, occupied ...string) int64 {
				t.Helper()
				r.occupy(t, "job", occupied...)
				defer r.free(t, "job", occupied...)
				mu, err := c.NewMutex("job", redlock.WithTTL(ttl), redlock.WithFencing())
				require.NoError(t, err)
				lease, err := mu.Lock(ctx)
				require.NoError(t, err)
				token, ok := lease.Fence()
				require.True(t, ok)
				require.NoError(t, lease.Unlock(ctx))
				return token
			}
			c1 := r.client(t, e1, true)
			tj := fenced(c1, m[3], m[4]) // on {0,1,2}
			tk := fenced(c1, m[0], m[1]) // on {2,3,4}
			require.Greater(t, tk, tj)

			steps, err := reconfig.Plan(e1, []string{m[0], m[1], m[5]})
			require.NoError(t, err)
			require.Len(t, steps, 4)
			from := e1
			for _, to := range steps {
				require.NoError(t, r.ch.Step(ctx, from, to))
				from = to
			}
			if off {
				knobs.NoConfigStamp.Store(true)
				defer knobs.NoConfigStamp.Store(false)
			}
			c2 := r.client(t, from, true)
			next := fenced(c2, m[5]) // on {0,1}
			if off {
				assert.LessOrEqual(t, next, tk, "without the stamp the token does not increase: j's counters count")
				return
			}
			assert.Greater(t, next, tk, "the token after the change is above every earlier one")
		})
	}
}

// TestStepFromAnotherConfigIsRefused: a step whose old configuration is not
// the one the masters hold (a wrong file, another operator's list) is
// refused by every master of it, and changes nothing: the masters check
// that they hold the old record, not only its epoch.
func TestStepFromAnotherConfigIsRefused(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	e1 := config(t, 1, r.addrs[:5], 200*time.Millisecond)
	require.NoError(t, r.ch.Init(ctx, e1))
	r.waitUnsealed(t, e1)
	wrong := config(t, 1, r.addrs[:2], 200*time.Millisecond) // {0,1} at epoch 1
	next, err := reconfig.Next(wrong, []string{r.addrs[0], r.addrs[1], r.addrs[5]})
	require.NoError(t, err)
	err = r.ch.Step(ctx, wrong, next)
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.ErrorContains(t, err, "notfrom "+e1.Record())
	for _, m := range r.addrs[:5] {
		rec, err := r.ch.Read(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, e1.Record(), rec.Config.Record(), m)
	}
	// The added master may have taken it (its vote alone is no quorum);
	// no client at epoch 2 of that list can count a quorum: 0 and 1 refuse.
	c := r.client(t, next, true)
	_, err = lock(t, c, "job", 150*time.Millisecond)
	require.Error(t, err)
}

// TestRemovedMasterRefusesEveryVote: a master the step removed keeps the
// new epoch in a form no client's record equals, so a client that sends the
// current record over the old list (master 4 still in it) is refused there
// too, and cannot make {2,3,4} a quorum beside the new set's {0,1,5}.
func TestRemovedMasterRefusesEveryVote(t *testing.T) {
	knobs.NoReconfigWait.Store(true) // not what this is about
	defer knobs.NoReconfigWait.Store(false)
	r := newRig(t)
	s := r.swap()
	ctx := context.Background()
	e1 := config(t, 1, s.old, time.Minute)
	require.NoError(t, r.ch.Init(ctx, e1))
	steps, err := reconfig.Plan(e1, s.new)
	require.NoError(t, err)
	require.NoError(t, r.ch.Step(ctx, e1, steps[0]))
	require.NoError(t, r.ch.Step(ctx, steps[0], steps[1]))
	e3 := steps[1]
	rec, err := r.ch.Read(ctx, s.old[4])
	require.NoError(t, err)
	assert.True(t, rec.Removed)
	assert.Equal(t, e3.Record(), rec.Config.Record())

	mixed := e3
	mixed.Masters = s.old // the current record, the old list
	mixedClient := r.client(t, mixed, true)
	r.occupy(t, "job", s.old[0], s.old[1])
	_, err = lock(t, mixedClient, "job", 30*time.Second)
	require.ErrorIs(t, err, redlock.ErrConfigStale, "the removed master refuses the vote")
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	r.free(t, "job", s.old[0], s.old[1])
	r.free(t, "job", s.old[2], s.old[3])
	b := r.client(t, e3, true)
	_, err = lock(t, b, "job", 30*time.Second)
	require.NoError(t, err, "the current set takes it")
}

// TestInterruptedSealIsRedone: a step whose seals were lost (interrupted
// after its commit point) blocks the next step as unsealed until Seal is
// run again.
func TestInterruptedSealIsRedone(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	e1 := config(t, 1, r.addrs[:5], 50*time.Millisecond)
	require.NoError(t, r.ch.Init(ctx, e1))
	e2, err := reconfig.Next(e1, r.addrs)
	require.NoError(t, err)
	require.NoError(t, r.ch.Step(ctx, e1, e2))
	for _, m := range r.addrs {
		require.NoError(t, r.admin[m].HDel(ctx, "quorumlock:config", "sealed").Err())
	}
	e3, err := reconfig.Next(e2, r.addrs[1:])
	require.NoError(t, err)
	err = r.ch.Step(ctx, e2, e3)
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.ErrorContains(t, err, "unsealed")
	require.NoError(t, r.ch.Seal(ctx, e2))
	require.NoError(t, r.ch.Step(ctx, e2, e3))

	lower := e3
	lower.Epoch, lower.MaxKeyTTL = 4, 10*time.Millisecond
	require.ErrorContains(t, r.ch.Step(ctx, e3, lower), "lowers the longest key life")
}

// TestRolledBackRecordIsNotTrusted: a master that comes back with an older
// record (a restart from an older snapshot or AOF, a replica that missed
// the last write) holds it under another server run, and the check counts
// it as none. Here three of five masters hold epoch 1's record again after
// the step to epoch 2, as written by an earlier run: a client still at
// epoch 1 is refused by all five; with knobs.NoConfigRun it takes
// {0,1,2}, a quorum of a configuration that is no longer current.
func TestRolledBackRecordIsNotTrusted(t *testing.T) {
	for _, off := range []bool{false, true} {
		name := "rule"
		if off {
			name = "NoConfigRun"
		}
		t.Run(name, func(t *testing.T) {
			knobs.NoReconfigWait.Store(true) // not what this is about
			defer knobs.NoReconfigWait.Store(false)
			r := newRig(t)
			ctx := context.Background()
			e1 := config(t, 1, r.addrs[:5], time.Minute)
			require.NoError(t, r.ch.Init(ctx, e1))
			stale := r.client(t, e1, true)
			e2, err := reconfig.Next(e1, r.addrs)
			require.NoError(t, err)
			require.NoError(t, r.ch.Step(ctx, e1, e2))
			for _, m := range r.addrs[:3] {
				require.NoError(t, r.admin[m].HSet(ctx, "quorumlock:config", "cur", e1.Record(), "members", e1.Text(), "run", "0123abcd").Err())
			}
			if off {
				knobs.NoConfigRun.Store(true)
				defer knobs.NoConfigRun.Store(false)
			}
			_, err = lock(t, stale, "job", 30*time.Second)
			if off {
				require.NoError(t, err, "a client at epoch 1 takes a quorum after epoch 2 committed")
				return
			}
			require.ErrorIs(t, err, redlock.ErrNotObtained)
			require.ErrorIs(t, err, redlock.ErrConfigStale)
		})
	}
}

// TestRepairAfterARestart: a master restarted with its data (AOF) holds
// its record under another run: the check refuses every vote there (none)
// until Repair writes the current record again, sealed anew; Repair
// refuses while fewer than a quorum hold the record it is given.
func TestRepairAfterARestart(t *testing.T) {
	r := newRig(t, redisproc.Config{AppendOnly: true})
	ctx := context.Background()
	e1 := config(t, 1, r.addrs[:5], 200*time.Millisecond)
	require.NoError(t, r.ch.Init(ctx, e1))
	require.NoError(t, r.servers[0].Restart())
	rec, err := r.ch.Read(ctx, r.addrs[0])
	require.NoError(t, err)
	require.True(t, rec.Lost, "the restarted master's record is another run's")
	assert.Equal(t, e1.Record(), rec.Config.Record(), "the AOF kept it")

	n, err := redisnode.Dial(r.addrs[0])
	require.NoError(t, err)
	defer n.Close()
	require.NoError(t, n.SetConfig(e1.Record()))
	_, err = n.Acquire(ctx, "job", "v", 100*time.Millisecond)
	var rerr redis.Error
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, "QLCONFIG none", rerr.Error())

	other := config(t, 1, r.addrs[1:], 200*time.Millisecond)
	require.ErrorIs(t, r.ch.Repair(ctx, other), reconfig.ErrRefused, "no quorum holds that record")
	require.NoError(t, r.ch.Repair(ctx, e1))
	assert.Contains(t, r.log.all(), r.addrs[0]+" repaired")
	rec, err = r.ch.Read(ctx, r.addrs[0])
	require.NoError(t, err)
	assert.False(t, rec.Lost)
	assert.False(t, rec.Sealed.IsZero(), "sealed anew")
	ok, err := n.Acquire(ctx, "job", "v", 100*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, ok, "the repaired master votes again")
}

// TestStaleStepDoesNotOverwriteALostRecord: a master whose record is
// another run's (it restarted) still keeps any record as new as the one a
// stale step or init would write: a step from an old file writes nowhere
// (the masters the step adds are asked only once a quorum of the old set
// took it), init over it is refused, and Repair of the current epoch
// brings it back.
func TestStaleStepDoesNotOverwriteALostRecord(t *testing.T) {
	knobs.NoReconfigWait.Store(true) // not what this is about
	defer knobs.NoReconfigWait.Store(false)
	r := newRig(t)
	ctx := context.Background()
	m := r.addrs
	e1 := config(t, 1, m[:5], time.Minute)
	require.NoError(t, r.ch.Init(ctx, e1))
	steps, err := reconfig.Plan(e1, []string{m[0], m[1], m[2], m[3], m[5]})
	require.NoError(t, err)
	require.NoError(t, r.ch.Step(ctx, e1, steps[0]))
	require.NoError(t, r.ch.Step(ctx, steps[0], steps[1]))
	e3 := steps[1]
	require.NoError(t, r.admin[m[5]].HSet(ctx, "quorumlock:config", "run", "0123abcd").Err()) // as after a restart

	err = r.ch.Step(ctx, e1, steps[0]) // from an old file
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.NotContains(t, err.Error(), m[5]+": installed")
	rec, err := r.ch.Read(ctx, m[5])
	require.NoError(t, err)
	assert.Equal(t, e3.Record(), rec.Config.Record(), "the added master keeps its newer record")
	assert.True(t, rec.Lost)

	err = r.ch.Init(ctx, config(t, 1, []string{m[5]}, time.Minute))
	require.ErrorIs(t, err, reconfig.ErrRefused)
	assert.ErrorContains(t, err, "newer "+e3.Record())

	require.NoError(t, r.ch.Repair(ctx, e3))
	rec, err = r.ch.Read(ctx, m[5])
	require.NoError(t, err)
	assert.Equal(t, e3.Record(), rec.Config.Record())
	assert.False(t, rec.Lost)
}

// TestClientsReload: Clients builds the file's configuration's client;
// after a step commits, its lock is refused as stale, and Reload returns
// only once the source gives the new epoch (before that it ends with its
// context, saying so); the new client locks.
func TestClientsReload(t *testing.T) {
	knobs.NoReconfigWait.Store(true) // not what this is about
	defer knobs.NoReconfigWait.Store(false)
	r := newRig(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "masters.conf")
	e1 := config(t, 1, r.addrs[:5], time.Minute)
	require.NoError(t, r.ch.Init(ctx, e1))
	require.NoError(t, reconfig.WriteFile(file, e1))
	clients, err := reconfig.NewClients(ctx, reconfig.FileSource(file), nil)
	require.NoError(t, err)
	defer clients.Close(context.Background())
	c1, cfg := clients.Client()
	require.Equal(t, e1.Record(), cfg.Record())
	_, err = lock(t, c1, "job", time.Second)
	require.NoError(t, err)

	e2, err := reconfig.Next(e1, r.addrs)
	require.NoError(t, err)
	require.NoError(t, r.ch.Step(ctx, e1, e2))
	_, err = lock(t, c1, "other", time.Second)
	require.ErrorIs(t, err, redlock.ErrConfigStale)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = clients.Reload(short)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "not published yet")
	assert.ErrorContains(t, err, "still gives epoch 1")

	require.NoError(t, reconfig.WriteFile(file, e2))
	c2, err := clients.Reload(ctx)
	require.NoError(t, err)
	_, cfg = clients.Client()
	assert.Equal(t, e2.Record(), cfg.Record())
	_, err = lock(t, c2, "other", time.Second)
	require.NoError(t, err)

	_, err = reconfig.NewClients(ctx, reconfig.FileSource(filepath.Join(t.TempDir(), "none")), nil)
	require.Error(t, err, "a source that fails")
}

// TestMastersSource: the masters' records are a source: before a step it
// gives the current configuration, while a step is only installed on the
// master it adds it still does, and once the step committed it gives the
// new one, published or not; a master that restarted is not counted.
func TestMastersSource(t *testing.T) {
	knobs.NoReconfigWait.Store(true) // not what this is about
	defer knobs.NoReconfigWait.Store(false)
	r := newRig(t)
	ctx := context.Background()
	e1 := config(t, 1, r.addrs[:5], time.Minute)
	require.NoError(t, r.ch.Init(ctx, e1))
	src := reconfig.MastersSource(r.ch.Masters)
	got, err := src(ctx)
	require.NoError(t, err)
	assert.Equal(t, e1.Record(), got.Record())

	e2, err := reconfig.Next(e1, r.addrs)
	require.NoError(t, err)
	// Only the added master holds epoch 2 (a fresh install, no commit).
	info, err := r.admin[r.addrs[5]].Info(ctx, "server").Result()
	require.NoError(t, err)
	si, err := redisinfo.Parse(r.addrs[5], info)
	require.NoError(t, err)
	require.NoError(t, r.admin[r.addrs[5]].HSet(ctx, "quorumlock:config", "cur", e2.Record(), "members", e2.Text(), "run", si.RunID).Err())
	got, err = src(ctx)
	require.NoError(t, err)
	assert.Equal(t, e1.Record(), got.Record(), "one master's record is no quorum")

	require.NoError(t, r.admin[r.addrs[5]].Del(ctx, "quorumlock:config").Err())
	require.NoError(t, r.ch.Step(ctx, e1, e2))
	got, err = src(ctx)
	require.NoError(t, err)
	assert.Equal(t, e2.Record(), got.Record(), "committed, not published")

	clients, err := reconfig.NewClients(ctx, src, nil)
	require.NoError(t, err)
	defer clients.Close(context.Background())
	c, cfg := clients.Client()
	assert.Equal(t, e2.Epoch, cfg.Epoch)
	_, err = lock(t, c, "job", time.Second)
	require.NoError(t, err)

	// Epoch 3 installed on a quorum of its set, never sealed (a step cut
	// short before its commit point, which another step of epoch 3 may
	// have aborted): not given.
	e3, err := reconfig.Next(e2, r.addrs[:5])
	require.NoError(t, err)
	for _, m := range r.addrs[:4] {
		rec, err := r.ch.Read(ctx, m)
		require.NoError(t, err)
		require.False(t, rec.Lost)
		run, err := r.admin[m].HGet(ctx, "quorumlock:config", "run").Result()
		require.NoError(t, err)
		require.NoError(t, r.admin[m].HSet(ctx, "quorumlock:config", "cur", e3.Record(), "members", e3.Text(), "run", run).Err())
		require.NoError(t, r.admin[m].HDel(ctx, "quorumlock:config", "sealed").Err())
	}
	_, err = src(ctx)
	require.ErrorContains(t, err, "no configuration is held sealed by a quorum", "epoch 3 installed on a quorum, not sealed: not given (and epoch 2 is on too few)")
	for _, m := range r.addrs[:4] {
		require.NoError(t, r.admin[m].HSet(ctx, "quorumlock:config", "sealed", "1").Err())
	}
	got, err = src(ctx)
	require.NoError(t, err)
	assert.Equal(t, e3.Record(), got.Record(), "sealed: given")

	for _, m := range r.addrs[:3] { // a quorum restarted: their records count as none
		require.NoError(t, r.admin[m].HSet(ctx, "quorumlock:config", "run", "0123abcd").Err())
	}
	_, err = src(ctx)
	require.ErrorContains(t, err, "no configuration is held sealed by a quorum")
}
