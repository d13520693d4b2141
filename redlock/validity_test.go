package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/clock"
	"github.com/quorumlock/quorumlock/node"
	"github.com/quorumlock/quorumlock/redlock"
)

// scriptedNode is an in-memory node whose replies and delays are set by the
// test; "delay" advances the fake clock before replying, so elapsed time is
// exact.
type scriptedNode struct {
	addr  string
	clk   *clock.Fake
	delay time.Duration
	taken bool
	fail  error

	mu    sync.Mutex
	calls []string
}

func (s *scriptedNode) record(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, op)
}

func (s *scriptedNode) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func (s *scriptedNode) Addr() string { return s.addr }

func (s *scriptedNode) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func (s *scriptedNode) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail
}

func (s *scriptedNode) Acquire(ctx context.Context, key, value string, ttl time.Duration) (node.AcquireResult, error) {
	s.record("acquire")
	s.clk.Advance(s.delay)
	switch fail := s.failure(); {
	case fail != nil:
		return node.Taken, fail
	case s.taken:
		return node.Taken, nil
	}
	return node.Acquired, nil
}

func (s *scriptedNode) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	s.record("extend")
	s.clk.Advance(s.delay)
	fail := s.failure()
	return !s.taken && fail == nil, fail
}

func (s *scriptedNode) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	s.record(fmt.Sprintf("release guard=%v", guard))
	fail := s.failure()
	return !s.taken && fail == nil, fail
}

func (s *scriptedNode) Inspect(ctx context.Context, key string) (node.Holder, error) {
	return node.Holder{}, nil
}

func (s *scriptedNode) Info(ctx context.Context) (node.ServerInfo, error) {
	return node.ServerInfo{Addr: s.addr, RunID: "x"}, nil
}

func scripted(clk *clock.Fake, delays ...time.Duration) ([]*scriptedNode, []node.Node) {
	var sn []*scriptedNode
	var nodes []node.Node
	for i, d := range delays {
		s := &scriptedNode{addr: fmt.Sprintf("n%d", i), clk: clk, delay: d}
		sn = append(sn, s)
		nodes = append(nodes, s)
	}
	return sn, nodes
}

func TestValidityArithmetic(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	sn, nodes := scripted(clk, 0, 300*time.Millisecond, 0)
	sn[2].taken = true
	c := newClient(t, nodes, redlock.WithClock(clk), redlock.WithNodeTimeout(5*time.Second), redlock.WithReleaseTimeout(5*time.Second),
		redlock.WithTTL(10*time.Second))
	m := newMutex(t, c)
	drift := 10*time.Second/100 + redlock.DriftConstant
	assert.Equal(t, drift, m.Config().Drift())

	start := clk.Now()
	lease, err := m.TryLock(context.Background())
	require.NoError(t, err)
	// elapsed = 300ms (the quorum-th reply came after node 1's delay).
	assert.Equal(t, start.Add(10*time.Second-drift), lease.Until())
	assert.Equal(t, 10*time.Second-300*time.Millisecond-drift, lease.TTL())
	assert.True(t, lease.Valid())

	// Extend measures elapsed from its own start.
	clk.Advance(5 * time.Second)
	extStart := clk.Now()
	require.NoError(t, lease.Extend(context.Background()))
	assert.Equal(t, extStart.Add(10*time.Second-drift), lease.Until())

	// Past the validity deadline, Extend refuses without contacting a node.
	clk.Set(lease.Until())
	before := len(sn[0].Calls())
	err = lease.Extend(context.Background())
	require.ErrorIs(t, err, redlock.ErrLockLost)
	assert.Len(t, sn[0].Calls(), before, "Extend contacted a node after the validity ended")
	assert.False(t, lease.Valid())
}

func TestMinimumValidity(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	sn, nodes := scripted(clk, 0, 300*time.Millisecond, 0)
	sn[2].taken = true
	ttl := 10 * time.Second
	drift := ttl/100 + redlock.DriftConstant
	remaining := ttl - 300*time.Millisecond - drift
	c := newClient(t, nodes, redlock.WithClock(clk), redlock.WithNodeTimeout(5*time.Second), redlock.WithReleaseTimeout(5*time.Second))

	// Exactly at the minimum is too short: validity must exceed it.
	m := newMutex(t, c, redlock.WithMinValidity(remaining))
	_, err := m.TryLock(context.Background())
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrValidityTooShort)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, remaining, qe.Validity)
	assert.Equal(t, 2, qe.Succeeded)
	require.NoError(t, c.Close(context.Background()))
	// Rolled back where the key was set; the taken node is not touched.
	assert.Equal(t, []string{"acquire", "release guard=0s"}, sn[0].Calls())
	assert.Equal(t, []string{"acquire", "release guard=0s"}, sn[1].Calls())
	assert.Equal(t, []string{"acquire"}, sn[2].Calls())

	m = newMutex(t, c, redlock.WithMinValidity(remaining-time.Millisecond))
	_, err = m.TryLock(context.Background())
	require.NoError(t, err)
}

func TestFailedNodeGetsGuardedRelease(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	sn, nodes := scripted(clk, 0, 0, 0)
	sn[1].taken = true
	sn[2].fail = fmt.Errorf("wrapped: %w", context.DeadlineExceeded)
	c := newClient(t, nodes, redlock.WithClock(clk), redlock.WithNodeTimeout(5*time.Second), redlock.WithReleaseTimeout(5*time.Second),
		redlock.WithTTL(7*time.Second))
	m := newMutex(t, c)
	_, err := m.TryLock(context.Background())
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "a node's own deadline is not the caller's")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	require.ErrorIs(t, qe.Nodes[2].Err, context.DeadlineExceeded)
	var ne *redlock.NodeError
	require.ErrorAs(t, qe.Nodes[2].Err, &ne)
	assert.Equal(t, "n2", ne.Node)
	sn[2].setFail(nil) // let the backlog retry succeed
	require.NoError(t, c.Close(context.Background()))
	assert.Equal(t, []string{"acquire", "release guard=0s"}, sn[0].Calls())
	assert.Equal(t, []string{"acquire"}, sn[1].Calls())
	// Unknown outcome: the release leaves a guard for the TTL.
	assert.Equal(t, "release guard=7s", sn[2].Calls()[1])
}

// Releases that fail (timeouts, errors) leave the outcome undecided:
// ErrNotReleased, not ErrLockLost, which needs nodes saying "not held".
func TestUnlockFailuresAreNotLoss(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	sn, nodes := scripted(clk, 0, 0, 0)
	c := newClient(t, nodes, redlock.WithClock(clk))
	m := newMutex(t, c)
	lease, err := m.TryLock(context.Background())
	require.NoError(t, err)
	require.NoError(t, c.Close(context.Background()))
	for _, s := range sn[1:] {
		s.setFail(errors.New("connection reset by peer"))
	}
	err = lease.Unlock(context.Background())
	require.ErrorIs(t, err, redlock.ErrNotReleased)
	require.NotErrorIs(t, err, redlock.ErrLockLost)
	for _, s := range sn[1:] {
		s.setFail(nil) // the retried releases then go through
	}
	require.NoError(t, c.Close(context.Background()))
	for _, s := range sn {
		calls := s.Calls()
		assert.Equal(t, "release guard=0s", calls[len(calls)-1])
	}
}

func TestLockRetriesWithBackoffOnFakeClock(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	sn, nodes := scripted(clk, 0, 0, 0)
	for _, s := range sn {
		s.taken = true
	}
	c := newClient(t, nodes, redlock.WithClock(clk), redlock.WithRetryBackoff(100*time.Millisecond, 400*time.Millisecond),
		redlock.WithMaxAttempts(4))
	m := newMutex(t, c)
	done := make(chan error, 1)
	start := clk.Now()
	go func() {
		_, err := m.Lock(context.Background())
		done <- err
	}()
	// Three waits between four attempts: each fires once the clock passes it.
	for i := 0; i < 3; i++ {
		clk.BlockUntilWaiters(1)
		clk.Advance(400 * time.Millisecond)
	}
	err := <-done
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	assert.Len(t, sn[0].Calls(), 4)
	assert.Equal(t, 1200*time.Millisecond, clk.Since(start))
}

func TestConfigValidation(t *testing.T) {
	clk := clock.NewFake(time.Time{})
	_, three := scripted(clk, 0, 0, 0)
	dup := []node.Node{three[0], three[1], &scriptedNode{addr: "n0", clk: clk}}
	cases := []struct {
		name  string
		nodes []node.Node
		opts  []redlock.Option
		want  string
	}{
		{"no nodes", nil, nil, "no nodes"},
		{"nil node", []node.Node{three[0], nil}, nil, "node 1 is nil"},
		{"duplicate address", dup, nil, `duplicate node address "n0"`},
		{"zero ttl", three, []redlock.Option{redlock.WithTTL(0)}, "TTL 0s must be positive"},
		{"negative ttl", three, []redlock.Option{redlock.WithTTL(-time.Second)}, "TTL -1s"},
		{"drift negative", three, []redlock.Option{redlock.WithDriftFactor(-0.1)}, "drift factor -0.1"},
		{"drift too big", three, []redlock.Option{redlock.WithDriftFactor(0.5)}, "drift factor 0.5"},
		{"node timeout >= ttl", three, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(time.Second)}, "node timeout 1s must be below the TTL 1s"},
		{"node timeout zero", three, []redlock.Option{redlock.WithNodeTimeout(0)}, "node timeout 0s"},
		{"release timeout", three, []redlock.Option{redlock.WithReleaseTimeout(-1)}, "release timeout -1ns"},
		{"quorum too low", three, []redlock.Option{redlock.WithQuorum(1)}, "quorum 1 must be in (3/2, 3]"},
		{"quorum too high", three, []redlock.Option{redlock.WithQuorum(4)}, "quorum 4"},
		{"quorum negative", three, []redlock.Option{redlock.WithQuorum(-2)}, "quorum -2"},
		{"retry min negative", three, []redlock.Option{redlock.WithRetryBackoff(-time.Millisecond, time.Second)}, "retry backoff minimum -1ms"},
		{"retry min above max", three, []redlock.Option{redlock.WithRetryBackoff(time.Second, time.Millisecond)}, "minimum 1s is above maximum 1ms"},
		{"attempts negative", three, []redlock.Option{redlock.WithMaxAttempts(-1)}, "max attempts -1"},
		{"min validity too big", three, []redlock.Option{redlock.WithMinValidity(10 * time.Second)}, "minimum validity 10s"},
		{"in flight zero", three, []redlock.Option{redlock.WithMaxInFlight(0)}, "max in flight 0"},
		{"nil clock", three, []redlock.Option{redlock.WithClock(nil)}, "nil clock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redlock.New(tc.nodes, tc.opts...)
			require.ErrorIs(t, err, redlock.ErrInvalidConfig)
			assert.ErrorContains(t, err, tc.want)
		})
	}

	c, err := redlock.New(three)
	require.NoError(t, err)
	_, err = c.NewMutex("")
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.ErrorContains(t, err, "empty lock name")
	_, err = c.NewMutex("x", redlock.WithTTL(10*time.Millisecond))
	require.ErrorContains(t, err, "node timeout 50ms must be below the TTL 10ms", "mutex options are validated with the client's")

	_, err = c.NewMutex("x", redlock.WithClock(clk))
	require.ErrorContains(t, err, "WithClock is a client option")

	// Even N works: 4 nodes need 3.
	_, four := scripted(clk, 0, 0, 0, 0)
	c4, err := redlock.New(four)
	require.NoError(t, err)
	assert.Equal(t, 3, c4.Quorum())
	_, err = redlock.New(four, redlock.WithQuorum(2))
	require.Error(t, err, "2 of 4 allows two holders")
}

func TestOwnerRoundTrip(t *testing.T) {
	o := redlock.ParseOwner("00ff?host=web-1&label=a+b%26c&pid=42")
	assert.Equal(t, redlock.Owner{Token: "00ff", Host: "web-1", PID: 42, Label: "a b&c"}, o)
	assert.Equal(t, redlock.Owner{Token: "foreign"}, redlock.ParseOwner("foreign"))
	assert.False(t, errors.Is(nil, redlock.ErrLockLost))
}
