package redlock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/redlock"
)

// A fair waiter whose attempt a node granted and that then failed (rolled
// back) keeps its place: a grant leaves no tombstone, so its next attempt
// enters the line again at its first arrival. Node 2 is held by another
// client; node 1 answers after the node timeout, so the waiter's first
// attempts are granted on node 0 at once and on node 1 late, and fail.
// When node 2 is released the waiter takes the lock at once: requeued (a
// call went unanswered: it goes on under a new ID), and also under its
// first ID (knobs.NoFairRequeue), where nodes that left a tombstone on a
// grant kept it out until the tombstones expired: hours, with this backoff.
func TestFairWaiterGrantedThenRolledBack(t *testing.T) {
	for _, knob := range []bool{false, true} {
		t.Run(map[bool]string{false: "requeued", true: "NoFairRequeue"}[knob], func(t *testing.T) {
			if knob {
				knobs.NoFairRequeue.Store(true)
				defer knobs.NoFairRequeue.Store(false)
			}
			synctest.Test(t, func(t *testing.T) {
				ms, nodes := mem(3)
				holder := newMutex(t, newClient(t, nodes[2:]))
				lease, err := holder.TryLock(context.Background())
				require.NoError(t, err)
				ms[1].SetDelay(100 * time.Millisecond) // the node timeout is 50ms
				waiter := newMutex(t, newClient(t, nodes), redlock.WithFairQueue(), redlock.WithRetryBackoff(time.Hour, time.Hour))
				got := lockAsync(context.Background(), waiter)
				synctest.Wait() // its first attempts are made
				ms[1].SetDelay(0)
				r, waited := releaseTo(t, lease, got)
				assert.Less(t, waited, time.Minute, "the waiter takes the lock when node 2 is released")
				require.NoError(t, r.lease.Unlock(context.Background()))
			})
		})
	}
}

// WithFairQueue: the lock goes to the waiter that came first, even when a
// later one polls far more often. B waits (polling once a minute, no
// notifications), then C (polling every 10ms); A releases: C's polls are
// refused while B's entry lives, and B gets the lock at its next poll, then
// C after B's release. Without the queue C would take it within 10ms.
func TestFairQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(3)
		a := newMutex(t, newClient(t, nodes), redlock.WithFairQueue())
		b := newMutex(t, newClient(t, queueOnly(nodes)), redlock.WithFairQueue(), redlock.WithRetryBackoff(time.Minute, time.Minute))
		c := newMutex(t, newClient(t, nodes), redlock.WithFairQueue(), redlock.WithRetryBackoff(10*time.Millisecond, 10*time.Millisecond))
		lease, err := a.TryLock(context.Background())
		require.NoError(t, err)
		gotB := lockAsync(context.Background(), b)
		synctest.Wait()
		time.Sleep(time.Millisecond)
		gotC := lockAsync(context.Background(), c)
		time.Sleep(time.Second)
		require.NoError(t, lease.Unlock(context.Background()))
		rb := <-gotB
		require.NoError(t, rb.err)
		select {
		case rc := <-gotC:
			t.Fatalf("C took the lock (err %v) while B, ahead of it, still waited", rc.err)
		default:
		}
		require.NoError(t, rb.lease.Unlock(context.Background()))
		rc := <-gotC
		require.NoError(t, rc.err)
		require.NoError(t, rc.lease.Unlock(context.Background()))
	})
}

// A fair waiter that dies (its entry never renewed) holds the queue up
// only until its entry expires; one that gives up leaves at once.
func TestFairQueueSurvivesDeadAndLeavingWaiters(t *testing.T) {
	t.Run("dead", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, nodes := mem(3)
			dead := redlock.Waiter{ID: "dead", Arrival: time.Now().Add(-time.Minute), TTL: 5 * time.Second}
			for _, n := range nodes {
				ok, err := n.Acquire(context.Background(), lockName, "held", time.Hour)
				require.NoError(t, err)
				require.True(t, ok)
				ok, _, err = n.(redlock.QueueNode).AcquireQueued(context.Background(), lockName, "dead-value", time.Second, dead)
				require.NoError(t, err)
				require.False(t, ok, "the key is held: the dead waiter stays queued")
				ok, err = n.Release(context.Background(), lockName, "held", 0)
				require.NoError(t, err)
				require.True(t, ok)
			}
			entered := time.Now()
			m := newMutex(t, newClient(t, nodes), redlock.WithFairQueue())
			lease, err := m.Lock(context.Background())
			require.NoError(t, err)
			assert.GreaterOrEqual(t, time.Since(entered), 5*time.Second, "granted before the dead waiter's entry expired")
			require.NoError(t, lease.Unlock(context.Background()))
		})
	})
	t.Run("gave up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			_, nodes := mem(3)
			a := newMutex(t, newClient(t, nodes), redlock.WithFairQueue())
			bc := newClient(t, nodes)
			b := newMutex(t, bc, redlock.WithFairQueue())
			lease, err := a.TryLock(context.Background())
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			_, err = b.Lock(ctx)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, bc.Close(context.Background())) // its queue removals are done
			require.NoError(t, lease.Unlock(context.Background()))
			next, err := a.TryLock(context.Background())
			require.NoError(t, err, "B's entry, still first, refused it: B did not leave the queue")
			require.NoError(t, next.Unlock(context.Background()))
		})
	})
}

// WithFairQueue is refused where it cannot work, naming why.
func TestFairQueueConfig(t *testing.T) {
	_, nodes := mem(3)
	c := newClient(t, nodes)
	_, _, err := c.NewRWMutex(lockName, redlock.WithFairQueue())
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "WithFairQueue applies to NewMutex only")

	plain := newClient(t, plainNodes(nodes))
	_, err = plain.NewMutex(lockName, redlock.WithFairQueue())
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "does not implement QueueNode")

	for _, name := range []string{"{k}:queue", "{k}:queue:ttl"} {
		_, err = c.NewMutex(name)
		require.ErrorIs(t, err, redlock.ErrInvalidConfig, name)
	}
	m, err := c.NewMutex(lockName, redlock.WithFairQueue(), redlock.WithFencing())
	require.NoError(t, err, "fair and fenced")
	// Lock, not TryLock: the client's first call identifies the nodes,
	// which a loaded machine may take longer than one attempt's wait for.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := m.Lock(ctx)
	require.NoError(t, err)
	token, ok := lease.Fence()
	require.True(t, ok)
	assert.Positive(t, token)
	require.NoError(t, lease.Unlock(context.Background()))
}

// A fair TryLock that fails must leave no ghost in the queue: a copy of
// its acquire that reaches a node late (slow on the network) enters its
// waiter there after the TryLock has returned; were that entry to live a
// full entry TTL, first in the queue of two of three nodes, it would
// refuse every later waiter a quorum (a TryLock's entry lives 1ms; the
// simulator found schedules that granted nothing: docs/simulation.md).
// X's acquires to nodes 0 and 1 take 200ms (X gives up after 50ms). After
// the holder's release, Y's TryLock must succeed.
func TestFairTryLockLeavesNoGhost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		h := newMutex(t, newClient(t, nodes), redlock.WithFairQueue())
		x := newMutex(t, newClient(t, nodes), redlock.WithFairQueue())
		y := newMutex(t, newClient(t, nodes), redlock.WithFairQueue())
		lease, err := h.TryLock(context.Background())
		require.NoError(t, err)
		ms[0].SetDelay(200 * time.Millisecond)
		ms[1].SetDelay(200 * time.Millisecond)
		done := make(chan error, 1)
		go func() {
			_, err := x.TryLock(context.Background())
			done <- err
		}()
		time.Sleep(25 * time.Millisecond) // X's acquires are on their way
		ms[0].SetDelay(0)
		ms[1].SetDelay(0)
		require.ErrorIs(t, <-done, redlock.ErrNotObtained)
		time.Sleep(300 * time.Millisecond) // the late acquires have arrived
		require.NoError(t, lease.Unlock(context.Background()))
		next, err := y.TryLock(context.Background())
		require.NoError(t, err, "a ghost of X kept Y from a quorum")
		require.NoError(t, next.Unlock(context.Background()))
	})
}

// The fair queue on real redis-server masters through redisnode: three
// fair waiters get the lock in the order they came; no key is left behind
// (the queue's ZSETs included).
func TestFairQueueOnRealMasters(t *testing.T) {
	ms := startMasters(t, 3)
	ctx := context.Background()
	noKeyLeft := func() {
		for i := range ms.raw {
			pollUntil(t, "no key left", func() bool { return len(ms.keys(t, i)) == 0 })
		}
	}
	noKeyLeft()
	var ws []*redlock.Mutex
	for range 4 {
		ws = append(ws, newMutex(t, realClient(t, ms.nodes), redlock.WithFairQueue()))
	}
	// The holder must hold every master: on a free master the first
	// waiter would be granted (and roll back) at each attempt instead
	// of waiting in its queue.
	var lease *redlock.Lease
	for range 10 {
		l, err := ws[0].TryLock(ctx)
		require.NoError(t, err)
		everywhere := true
		for i := range ms.raw {
			_, held := ms.keys(t, i)[lockName]
			everywhere = everywhere && held
		}
		if everywhere {
			lease = l
			break
		}
		require.NoError(t, l.Unlock(ctx))
		noKeyLeft()
	}
	require.NotNil(t, lease, "the holder never took every master")
	order := make(chan int, 3)
	errs := make(chan error, 3)
	for i := 1; i < 4; i++ {
		go func() {
			l, err := ws[i].Lock(ctx)
			if err == nil {
				order <- i
				err = l.Unlock(ctx)
			}
			errs <- err
		}()
		// The next one starts only once this one is queued everywhere.
		pollUntil(t, "waiter queued on every master", func() bool {
			select {
			case err := <-errs:
				t.Fatalf("a waiter's Lock returned while the lock was held: %v", err)
			default:
			}
			for _, r := range ms.raw {
				n, err := r.ZCard(ctx, "{"+lockName+"}:queue").Result()
				require.NoError(t, err)
				if n < int64(i) {
					return false
				}
			}
			return true
		})
	}
	require.NoError(t, lease.Unlock(ctx))
	for range 3 {
		require.NoError(t, <-errs)
	}
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	assert.Equal(t, []int{1, 2, 3}, got, "taken in arrival order")

	noKeyLeft()
}
