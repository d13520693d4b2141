package redlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock"
)

// Issue 32, item 1: a leader that leads longer than the fence retention is
// still reported with its own term. Renewals do not write the fencing
// counter, so it expires one retention after the election; Leader took the
// highest counter among the leader's nodes as the term and reported term 0
// (no leader) for a valid leader once the counters were gone.
func TestElectionLeaderKeepsItsTermPastTheFenceRetention(t *testing.T) {
	ms := startMasters(t, 3)
	e := newElection(t, realClient(t, ms.nodes, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithReleaseTimeout(200*time.Millisecond)), redlock.WithTTL(time.Second), redlock.WithFenceRetention(time.Second))
	ctx := context.Background()
	l, err := e.Campaign(ctx, "L1")
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Resign(ctx)) }()

	counter := "{" + electionName + "}:fence"
	waitFor(t, "the fencing counters to expire on every master", func() bool {
		for _, raw := range ms.raw {
			if n, err := raw.Exists(ctx, counter).Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	require.True(t, l.Valid(), "the leader still leads: %v", context.Cause(l.Context()))
	want := redlock.Leader{Value: "L1", Term: l.Term()}
	got, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, got, "Leader reports the leader's own term")
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	assert.Equal(t, want, <-e.Observe(octx), "Observe reports the leader's own term")
	require.True(t, l.Valid(), "the leader led throughout: %v", context.Cause(l.Context()))
}

// ghostValue returns a lock value as Campaign writes it for candidate (the
// token, owner metadata and the candidate's value).
func ghostValue(t *testing.T, candidate string) string {
	t.Helper()
	var b [16]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return fmt.Sprintf("%s?host=ghost&pid=1&at=%d&candidate=%s", hex.EncodeToString(b[:]), time.Now().UnixMilli(), candidate)
}

// Issue 32, item 2: a candidate that was never elected is never reported.
// A failed campaign can leave its key on a quorum (acquires that paused
// masters run after the client gave up on them, or votes of quarantined
// masters); here the key is put on two of three masters with the node's
// own Acquire, as such a late acquire does, after a first leader resigned.
// Leader and Observe reported it, with the first leader's term; they must
// report no leader. The next real leader is reported with its term.
func TestElectionDoesNotReportACandidateThatWasNotElected(t *testing.T) {
	ms := startMasters(t, 3)
	const ttl = time.Second
	e := newElection(t, realClient(t, ms.nodes, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithReleaseTimeout(200*time.Millisecond)), redlock.WithTTL(ttl))
	ctx := context.Background()
	l1, err := e.Campaign(ctx, "L1")
	require.NoError(t, err)
	got, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, redlock.Leader{Value: "L1", Term: l1.Term()}, got)
	require.NoError(t, l1.Resign(ctx))

	ghost := ghostValue(t, "ghost")
	for _, nd := range ms.nodes[:2] {
		ok, err := nd.Acquire(ctx, electionName, ghost, 2*ttl)
		require.NoError(t, err)
		require.True(t, ok)
	}
	got, err = e.Leader(ctx)
	require.ErrorIs(t, err, redlock.ErrNoLeader, "the ghost was reported: %+v", got)
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	assert.Equal(t, redlock.Leader{}, <-e.Observe(octx), "Observe reports no leader")

	l2, err := e.Campaign(ctx, "L2") // once the ghost's keys expired
	require.NoError(t, err)
	assert.Greater(t, l2.Term(), l1.Term())
	got, err = e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, redlock.Leader{Value: "L2", Term: l2.Term()}, got)
	require.NoError(t, l2.Resign(ctx))
}
