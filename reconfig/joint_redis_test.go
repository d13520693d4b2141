package reconfig_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/reconfig"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestJointChange replaces two of three masters ({0,1,2} to {0,4,5}) in
// the two steps of joint mode, on real servers. A holds the lock at epoch
// 1 on {1,2} when the step into joint mode commits (no wait needed before
// it: a joint quorum holds a quorum of the old set). B, a client that
// loaded the joint configuration (reconfig.Clients, refused as stale
// first), is refused while A's lease lasts, though the new set {0,4,5} is
// free: it needs a quorum of the old set too. Its twin, with
// knobs.JointOneSet (a joint client counting the new set alone, the
// model's JOINT_ONE_SET), gives two holders. The step out of joint mode
// waits for the masters, after which a client of epoch 3 locks on {0,4,5},
// the joint client is refused as stale, and the removed masters refuse
// every vote.
func TestJointChange(t *testing.T) {
	const keyTTL = 5 * time.Second
	run := func(t *testing.T) (r *rig, la, lb *redlock.Lease, steps []reconfig.Config, clients *reconfig.Clients, errB error) {
		r = newRig(t)
		ctx := context.Background()
		e1 := config(t, 1, r.addrs[:3], keyTTL)
		require.NoError(t, r.ch.Init(ctx, e1))
		target := []string{r.addrs[0], r.addrs[4], r.addrs[5]}
		steps, err := reconfig.Joint(e1, target)
		require.NoError(t, err)
		j := steps[0]
		require.True(t, j.Joint())
		assert.Equal(t, []string{r.addrs[0], r.addrs[4], r.addrs[5], r.addrs[1], r.addrs[2]}, j.All())
		_, err = reconfig.Next(e1, target)
		require.Error(t, err, "two masters replaced at once is not one single step")

		published := e1
		clients, err = reconfig.NewClients(ctx, func(context.Context) (reconfig.Config, error) { return published, nil }, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = clients.Close(context.Background()) })

		a := r.client(t, e1, true)
		r.waitUnsealed(t, e1) // so that the joint step commits while A holds
		r.occupy(t, "job", r.addrs[0])
		la, err = lock(t, a, "job", keyTTL)
		require.NoError(t, err, "A takes {1,2} at epoch 1")
		r.free(t, "job", r.addrs[0])

		require.NoError(t, r.ch.Step(ctx, e1, j))
		published = j
		b, _ := clients.Client()
		_, err = tryLock(t, b, "job")
		require.ErrorIs(t, err, redlock.ErrConfigStale, "B at epoch 1 after the commit point")
		b, err = clients.Reload(ctx)
		require.NoError(t, err)
		_, cur := clients.Client()
		require.Equal(t, j.Record(), cur.Record())
		m, err := b.NewMutex("job", redlock.WithTTL(keyTTL))
		require.NoError(t, err)
		lb, errB = m.TryLock(ctx)
		return r, la, lb, steps, clients, errB
	}

	t.Run("rule", func(t *testing.T) {
		r, la, lb, steps, clients, errB := run(t)
		if errB == nil {
			require.False(t, la.Valid(), "two holders")
			t.Log("A's lease ended before B's attempt (a stalled machine): the refusal was not tested")
			require.NoError(t, lb.Unlock(context.Background()))
		} else {
			require.ErrorIs(t, errB, redlock.ErrNotObtained)
			assert.ErrorContains(t, errB, "quorum 2 of nodes 0,1,2 and 2 of nodes 0,3,4", "B needs a quorum of each set")
		}

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, r.ch.Step(ctx, steps[0], steps[1]))
		assert.Contains(t, r.log.all(), "refused: wait ", "the masters refused the step out of joint mode until their wait had passed")
		assert.False(t, la.Valid(), "A's lease of epoch 1 ended before epoch 3")
		c3 := r.client(t, steps[1], true)
		lc, err := tryLock(t, c3, "job")
		require.NoError(t, err, "a client of epoch 3 locks on {0,4,5}")
		require.NoError(t, lc.Unlock(ctx))

		b, _ := clients.Client()
		_, err = tryLock(t, b, "other")
		require.ErrorIs(t, err, redlock.ErrConfigStale, "the joint client after the step out")
		for _, m := range []string{r.addrs[1], r.addrs[2]} {
			rec, err := r.ch.Read(ctx, m)
			require.NoError(t, err)
			assert.True(t, rec.Removed, "%s was removed", m)
		}
	})

	t.Run("JointOneSet", func(t *testing.T) {
		knobs.JointOneSet.Store(true)
		defer knobs.JointOneSet.Store(false)
		_, la, lb, _, _, errB := run(t)
		require.NoError(t, errB, "B counts the new set {0,4,5} alone")
		assert.True(t, la.Valid() && lb.Valid(), "two holders: the old set's quorum is what excludes A")
	})
}

// failInstall makes a client's install calls fail: a partition between the
// operator and some masters right after the step's first reads.
type failInstall struct{}

func (failInstall) DialHook(next redis.DialHook) redis.DialHook { return next }

func (failInstall) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if slices.ContainsFunc(cmd.Args(), func(a any) bool { s, _ := a.(string); return s == "install" }) {
			cmd.SetErr(errors.New("i/o timeout (a partition)"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (failInstall) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAbortedStepIsNotGiven (found by a review): from joint({3,4,5}, old
// {0,1,2}) one operator's step to {3,4,5} reaches only the new set (the
// old set is cut off from it after its reads: no commit point), then the
// abort back to {0,1,2} commits on the old set. Both records are of epoch
// 3, each on a quorum of its own set, and their quorums need not meet: a
// source that gave the uncommitted one would make two holders. The
// masters' source gives only records sealed on a quorum (Step seals after
// its commit point), so it gives the abort's, every time.
func TestAbortedStepIsNotGiven(t *testing.T) {
	knobs.NoReconfigWait.Store(true) // not what this is about
	defer knobs.NoReconfigWait.Store(false)
	r := newRig(t)
	ctx := context.Background()
	old, neu := r.addrs[0:3], r.addrs[3:6]
	e1 := config(t, 1, old, time.Second)
	require.NoError(t, r.ch.Init(ctx, e1))
	steps, err := reconfig.Joint(e1, neu)
	require.NoError(t, err)
	require.NoError(t, r.ch.Step(ctx, e1, steps[0]))

	cut := map[string]redis.Cmdable{}
	for _, a := range r.addrs {
		c := redis.NewClient(&redis.Options{Addr: a, Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true})
		if slices.Contains(old, a) {
			c.AddHook(failInstall{})
		}
		t.Cleanup(func() { _ = c.Close() })
		cut[a] = c
	}
	forward := steps[1]
	require.ErrorIs(t, (&reconfig.Changer{Masters: cut}).Step(ctx, steps[0], forward), reconfig.ErrRefused)
	for _, m := range neu {
		rec, err := r.ch.Read(ctx, m)
		require.NoError(t, err)
		require.Equal(t, forward.Record(), rec.Config.Record(), "the new set took the step that did not commit")
		require.True(t, rec.Sealed.IsZero())
	}

	abort, err := reconfig.Plan(steps[0], old)
	require.NoError(t, err)
	require.Len(t, abort, 1)
	require.NoError(t, r.ch.Step(ctx, steps[0], abort[0]))

	src := reconfig.MastersSource(r.ch.Masters)
	for range 20 { // the masters are read in map order: each order once in a while
		got, err := src(ctx)
		require.NoError(t, err)
		require.Equal(t, abort[0].Record(), got.Record(), "the abort, committed and sealed; never the step that did not commit")
	}
}
