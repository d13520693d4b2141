package redlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// termRecord returns what in-memory master m holds in the record of l's
// term ("" when it has none).
func termRecord(t *testing.T, m *memnode.Node, l *redlock.Leadership) string {
	t.Helper()
	return m.Keys()[electionName+":term:"+l.Lease().Token()]
}

// Issue 32, item 1, in memory: once the fencing counters have expired (one
// fence retention after the election: renewals do not rewrite them), the
// leader is still reported with its own term, as long as it leads.
func TestElectionTermOutlivesTheFenceCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		e := newElection(t, newClient(t, nodes), redlock.WithTTL(time.Second), redlock.WithFenceRetention(time.Second))
		ctx := context.Background()
		l, err := e.Campaign(ctx, "L1")
		require.NoError(t, err)
		time.Sleep(5 * time.Second)
		for i, m := range ms {
			_, f, err := m.Peek(ctx, electionName)
			require.NoError(t, err)
			require.Zero(t, f, "master %d's counter has expired", i)
		}
		require.True(t, l.Valid())
		got, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, redlock.Leader{Value: "L1", Term: l.Term()}, got)
		require.NoError(t, l.Resign(ctx))
	})
}

// Issue 32, item 2, in memory: a candidate's key on a quorum without its
// term record (a failed campaign's leftovers) is no leader; with a node that
// does not answer, Leader cannot tell (the record could be there) and says
// so rather than reporting it.
func TestElectionIgnoresACandidateWithoutARecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		e := newElection(t, newClient(t, nodes), redlock.WithTTL(time.Second))
		ctx := context.Background()
		l, err := e.Campaign(ctx, "L1")
		require.NoError(t, err)
		require.NoError(t, l.Resign(ctx))
		synctest.Wait() // Resign returns at a quorum: the last release may still run
		ghost := ghostValue(t, "ghost")
		for _, m := range ms[:2] {
			ok, err := m.Acquire(ctx, electionName, ghost, 10*time.Second)
			require.NoError(t, err)
			require.True(t, ok)
		}
		got, err := e.Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrNoLeader, "reported: %+v", got)
		octx, cancel := context.WithCancel(ctx)
		assert.Equal(t, redlock.Leader{}, <-e.Observe(octx))
		cancel()

		ms[2].Fail(errors.New("down"))
		got, err = e.Leader(ctx)
		require.Error(t, err, "reported: %+v", got)
		assert.NotErrorIs(t, err, redlock.ErrNoLeader)
		var qe *redlock.QuorumError
		assert.ErrorAs(t, err, &qe)
		ms[2].Fail(nil)
	})
}

// The record of the term: every master holds it once Campaign returns, it
// outlives its own time to live while the leader leads (the leader
// refreshes it), a master that missed it gets it at the next refresh, and
// it is deleted when the leadership ends (Resign, or a loss).
func TestElectionTermRecordLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		const ttl = time.Second
		e := newElection(t, newClient(t, nodes), redlock.WithTTL(ttl))
		ctx := context.Background()

		ms[2].Fail(errors.New("down"))
		l, err := e.Campaign(ctx, "L1")
		require.NoError(t, err)
		term := strconv.FormatInt(l.Term(), 10)
		assert.Equal(t, term, termRecord(t, ms[0], l))
		assert.Equal(t, term, termRecord(t, ms[1], l))
		assert.Empty(t, termRecord(t, ms[2], l))
		ms[2].Fail(nil)
		time.Sleep(10 * ttl) // more than three key TTLs: the record's own time to live
		require.True(t, l.Valid())
		for i, m := range ms {
			assert.Equal(t, term, termRecord(t, m, l), "master %d", i)
		}
		require.NoError(t, l.Resign(ctx))
		for i, m := range ms {
			assert.Empty(t, termRecord(t, m, l), "master %d: deleted by Resign", i)
		}

		l2, err := e.Campaign(ctx, "L2")
		require.NoError(t, err)
		resume0, resume1 := ms[0].Pause(), ms[1].Pause()
		<-l2.Context().Done() // renewals fail: lost
		resume0()
		resume1()
		synctest.Wait()
		assert.Empty(t, termRecord(t, ms[2], l2), "deleted when the loss was found")
		time.Sleep(3 * ttl) // the records the paused masters missed expire
		for i, m := range ms {
			assert.Empty(t, termRecord(t, m, l2), "master %d", i)
		}
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrNoLeader)
		_ = l2.Resign(ctx)
	})
}

// recordRefuser is an in-memory master that can refuse to write term
// records (keys with ":term:" in their name), and only those.
type recordRefuser struct {
	*memnode.Node
	refuse atomic.Bool
}

func (n *recordRefuser) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if n.refuse.Load() && strings.Contains(key, ":term:") {
		return false, errors.New("refused")
	}
	return n.Node.Acquire(ctx, key, value, ttl)
}

// A leader whose record no node took when it was elected is not reported
// (Leader cannot tell it from a failed campaign's leftovers) until its
// record is written again, which the leadership does every third of a key
// TTL until a quorum has it; then Leader reports it with its term.
func TestElectionRecordIsWrittenAgainUntilAQuorumHasIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, _ := mem(3)
		rs := make([]*recordRefuser, 3)
		nodes := make([]redlock.Node, 3)
		for i, m := range ms {
			rs[i] = &recordRefuser{Node: m}
			rs[i].refuse.Store(true)
			nodes[i] = rs[i]
		}
		const ttl = 3 * time.Second
		e := newElection(t, newClient(t, nodes), redlock.WithTTL(ttl))
		ctx := context.Background()
		l, err := e.Campaign(ctx, "L1")
		require.NoError(t, err)
		_, err = e.Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrNoLeader, "no record yet")
		for _, r := range rs {
			r.refuse.Store(false)
		}
		time.Sleep(ttl/3 + 100*time.Millisecond) // the next write of the record
		got, err := e.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, redlock.Leader{Value: "L1", Term: l.Term()}, got)
		require.NoError(t, l.Resign(ctx))
	})
}
