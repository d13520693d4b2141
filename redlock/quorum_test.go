package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/redlock"
)

// joint is the model's joint configuration (model/reconfig.pml,
// PLAN_JOINT): the new set {0,1,3} and the old set {0,1,2}, quorum 2 each,
// on 4 nodes.
var joint = []redlock.ClientOption{redlock.WithQuorumOf(2, 0, 1, 3), redlock.WithQuorumOf(2, 0, 1, 2)}

// A joint client holds only with a quorum of each set: nodes 1 and 2 are a
// quorum of the old set but not of the new one, so the lock is refused,
// naming both sets; with knobs.JointOneSet (the new set alone counts, the
// model's JOINT_ONE_SET) it is taken, and so is it by a joint client once
// node 3 is free too.
func TestJointQuorumNeedsEachSet(t *testing.T) {
	ctx := context.Background()
	ms, nodes := mem(4)
	other := func(i int) {
		ok, err := ms[i].Acquire(ctx, lockName, "other", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
	}
	other(0)
	other(3)
	m := newMutex(t, newClient(t, nodes, joint...))
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	assert.Contains(t, err.Error(), "quorum 2 of nodes 0,1,3 and 2 of nodes 0,1,2")

	knobs.JointOneSet.Store(true)
	oneSet := newMutex(t, newClient(t, nodes, joint...))
	knobs.JointOneSet.Store(false)
	_, err = oneSet.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "the first set is {0,1,3}: 1 of it is free")

	// The old set alone ({0,1,2}: nodes 1 and 2 free) would take it, as
	// knobs.JointOneSet with the sets the other way round shows.
	knobs.JointOneSet.Store(true)
	oldFirst := newMutex(t, newClient(t, nodes, joint[1], joint[0]))
	knobs.JointOneSet.Store(false)
	lease, err := oldFirst.TryLock(ctx)
	require.NoError(t, err, "one set counted alone decides")
	require.NoError(t, lease.Unlock(ctx))

	_, err = ms[3].Release(ctx, lockName, "other", 0)
	require.NoError(t, err)
	lease, err = m.TryLock(ctx)
	require.NoError(t, err, "nodes 1, 2, 3: 2 of {0,1,3} and 2 of {0,1,2}")
	require.NoError(t, lease.Unlock(ctx))
}

// Two joint clients exclude each other, and a client of either set alone
// is excluded by a joint holder: its keys are on a quorum of each.
func TestJointQuorumExcludesEitherSet(t *testing.T) {
	ctx := context.Background()
	_, nodes := mem(4)
	lease, err := newMutex(t, newClient(t, nodes, joint...)).TryLock(ctx)
	require.NoError(t, err)
	_, err = newMutex(t, newClient(t, nodes, joint...)).TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	_, err = newMutex(t, newClient(t, []redlock.Node{nodes[0], nodes[1], nodes[2]})).TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "the old set")
	_, err = newMutex(t, newClient(t, []redlock.Node{nodes[0], nodes[1], nodes[3]})).TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained, "the new set")
	require.NoError(t, lease.Extend(ctx))
	require.NoError(t, lease.Unlock(ctx))
}

// A joint lease holds while each set confirms it and is lost once one set
// cannot: with nodes 2 and 3 restarted empty, 0 and 1 are a quorum of
// both sets (of all 4 nodes they would not be), so Extend succeeds; once
// node 0 lost its key too, the old set has 1 of 3 and the lease is lost.
func TestJointLeaseLostWhenOneSetIsOut(t *testing.T) {
	ctx := context.Background()
	ms, nodes := mem(4)
	m := newMutex(t, newClient(t, nodes, joint...), redlock.WithFencing())
	lease, err := m.TryLock(ctx)
	require.NoError(t, err)
	// TryLock returned at its quorum: its calls to nodes 2 and 3 may land
	// later and would write the key again after the restarts.
	for _, m := range ms[2:] {
		require.Eventually(t, func() bool { _, ok := m.Keys()[lockName]; return ok }, 10*time.Second, time.Millisecond)
	}
	ms[2].Restart(false)
	ms[3].Restart(false)
	require.NoError(t, lease.Extend(ctx))
	ms[0].Restart(false)
	require.ErrorIs(t, lease.Extend(ctx), redlock.ErrLockLost)
}

// WithQuorumOf's sets are checked together, each error naming the bad
// value.
func TestWithQuorumOfRefusesBadSets(t *testing.T) {
	_, nodes := mem(4)
	for _, tc := range []struct {
		opts []redlock.ClientOption
		want string
	}{
		{[]redlock.ClientOption{redlock.WithQuorumOf(2, 0, 1, 2)}, "node 3 is in no set"},
		{[]redlock.ClientOption{redlock.WithQuorumOf(2, 0, 1, 4), redlock.WithQuorumOf(2, 0, 1, 3)}, "set 1: node 4 out of range"},
		{[]redlock.ClientOption{redlock.WithQuorumOf(2, 0, 1, 1, 3), redlock.WithQuorumOf(2, 2)}, "set 1: node 1 given twice"},
		{[]redlock.ClientOption{redlock.WithQuorumOf(1, 0, 1, 2), redlock.WithQuorumOf(2, 3, 0, 1)}, "set 1: need 1 must be in (3/2, 3]"},
		{[]redlock.ClientOption{redlock.WithQuorumOf(2, 0, 1, 2), redlock.WithQuorumOf(0, 3)}, "set 2: need 0"},
		{[]redlock.ClientOption{redlock.WithQuorumOf(3, 0, 1, 2, 3), redlock.WithQuorumOf(3, 0, 1, 2, 3), redlock.WithQuorumOf(3, 0, 1, 2, 3)}, "at most 2 sets"},
	} {
		_, err := redlock.New(nodes, tc.opts...)
		require.ErrorIs(t, err, redlock.ErrInvalidConfig, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	// Two nodes, each its own set of one: no WithQuorum(2) needed (each
	// set's quorum is all of it, as asked).
	_, two := mem(2)
	newClient(t, two, redlock.WithQuorumOf(1, 0), redlock.WithQuorumOf(1, 1))

	// The last of WithQuorum and WithQuorumOf decides: a WithQuorum
	// before the sets is dropped (as reconfig.Clients appends a joint
	// configuration's sets after the caller's options), one after them
	// drops the sets.
	ms, four := mem(4)
	for _, m := range ms[2:] {
		ok, err := m.Acquire(context.Background(), lockName, "other", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
	}
	lease, err := newMutex(t, newClient(t, four, append([]redlock.ClientOption{redlock.WithQuorum(3)}, joint...)...)).TryLock(context.Background())
	require.NoError(t, err, "the joint sets {0,1,3} and {0,1,2}: nodes 0 and 1 are a quorum of each")
	require.NoError(t, lease.Unlock(context.Background()))
	_, err = newMutex(t, newClient(t, four, append(joint, redlock.WithQuorum(3))...)).TryLock(context.Background())
	require.ErrorIs(t, err, redlock.ErrNotObtained, "3 of all 4 nodes: 2 are free")
}

// A semaphore's bound holds in each set: with k = 2 on the old set
// {0,1,2} (3 nodes: every node) a joint client's third holder is refused
// even where the new set alone would have room.
func TestJointSemaphoreBoundPerSet(t *testing.T) {
	ctx := context.Background()
	_, nodes := mem(5)
	c := newClient(t, nodes, redlock.WithQuorumOf(2, 0, 1, 2), redlock.WithQuorumOf(2, 2, 3, 4))
	s, err := c.NewSemaphore("sem", 2)
	require.NoError(t, err)
	var leases []*redlock.Lease
	for range 2 {
		l, err := s.TryLock(ctx)
		require.NoError(t, err)
		leases = append(leases, l)
	}
	_, err = s.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	assert.Contains(t, err.Error(), "quorum 3 of nodes 0,1,2 and 3 of nodes 2,3,4")
	for _, l := range leases {
		require.NoError(t, l.Unlock(ctx))
	}
}
