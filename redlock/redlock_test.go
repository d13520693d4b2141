package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/node"
	"github.com/quorumlock/quorumlock/redlock"
)

const lockName = "quorumlock:test"

// newClient builds a client whose node and release timeouts default to 1 s
// instead of 50/100 ms: under -race on a loaded 2-core machine a first call
// (dial, HELLO, script load) can take longer than 50 ms. Tests that are about
// timeouts pass their own, which override these.
func newClient(t *testing.T, nodes []node.Node, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	opts = append([]redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithReleaseTimeout(time.Second)}, opts...)
	c, err := redlock.New(nodes, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, c.Close(ctx))
	})
	return c
}

func newMutex(t *testing.T, c *redlock.Client, opts ...redlock.Option) *redlock.Mutex {
	t.Helper()
	m, err := c.NewMutex(lockName, opts...)
	require.NoError(t, err)
	return m
}

// For every subset of nodes pre-occupied by a foreign token, the lock is
// obtained exactly when the free nodes reach a quorum; otherwise the error
// names the taken nodes, and no key of ours is left on any node.
func TestPreoccupiedSubsets(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			cl := startCluster(t, n)
			c := newClient(t, cl.nodes)
			m := newMutex(t, c)
			ctx := context.Background()
			quorum := n/2 + 1
			for mask := 0; mask < 1<<n; mask++ {
				cl.flush(t)
				var taken []string
				for i := 0; i < n; i++ {
					if mask&(1<<i) != 0 {
						require.NoError(t, cl.raw[i].Set(ctx, lockName, "foreign", time.Minute).Err())
						taken = append(taken, cl.nodes[i].Addr())
					}
				}
				free := n - len(taken)
				lease, err := m.TryLock(ctx)
				if free >= quorum {
					require.NoError(t, err, "mask %b: %d free nodes of %d", mask, free, n)
					assert.Len(t, lease.Token(), 32)
					ok := 0
					for _, o := range lease.Outcomes() {
						if o.Result == redlock.Succeeded {
							ok++
						}
					}
					assert.GreaterOrEqual(t, ok, quorum)
					require.NoError(t, c.Close(ctx)) // let stragglers land before scanning
					require.NoError(t, lease.Unlock(ctx))
					require.NoError(t, c.Close(ctx))
				} else {
					require.ErrorIs(t, err, redlock.ErrNotObtained, "mask %b", mask)
					assert.Nil(t, lease)
					var qe *redlock.QuorumError
					require.ErrorAs(t, err, &qe)
					// The attempt is decided as soon as quorum is out of reach,
					// so a taken node may still be pending; every node named
					// taken is, and enough are named to explain the failure.
					got := qe.NodesWith(redlock.ErrNodeTaken)
					sort.Strings(got)
					assert.Subset(t, taken, got, "mask %b", mask)
					assert.GreaterOrEqual(t, len(got), n-quorum+1, "mask %b: %v", mask, err)
					for i, o := range qe.Nodes {
						if mask&(1<<i) == 0 {
							assert.NotEqual(t, redlock.Rejected, o.Result, "mask %b: free node %d", mask, i)
						} else if o.Result != redlock.Pending {
							assert.Contains(t, err.Error(), o.Node)
						}
					}
					require.NoError(t, c.Close(ctx))
				}
				// Only the foreign keys remain, untouched.
				for i := 0; i < n; i++ {
					want := map[string]string{}
					if mask&(1<<i) != 0 {
						want[lockName] = "foreign"
					}
					assert.Equal(t, want, cl.keys(t, i), "mask %b node %d", mask, i)
				}
			}
		})
	}
}

func TestPausedNodeIsNotWaitedFor(t *testing.T) {
	cl := startCluster(t, 5)
	// A long node timeout makes "did not wait for the paused node" visible
	// without a tight timing bound: waiting would cost 2 s, not waiting ~1 ms.
	const nodeTimeout = 2 * time.Second
	c := newClient(t, cl.nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithReleaseTimeout(nodeTimeout))
	m := newMutex(t, c)
	ctx := context.Background()
	// Warm the connection pools so that timings measure the algorithm.
	lease, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, lease.Unlock(ctx))
	require.NoError(t, c.Close(ctx))

	resume := cl.pause(t, 4)

	// Not waiting is shown by the outcomes, not by a clock: when Lock and
	// Unlock return, the paused node's call is still pending (its deadline,
	// 2 s, is far away).
	start := time.Now()
	lease, err = m.Lock(ctx)
	lockTook := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, redlock.Pending, lease.Outcomes()[4].Result, "Lock waited for the paused node")

	start = time.Now()
	require.NoError(t, lease.Unlock(ctx))
	unlockTook := time.Since(start)
	assert.Equal(t, redlock.Pending, lease.Outcomes()[4].Result, "Unlock waited for the paused node")
	t.Logf("with one of 5 nodes paused: lock %v, unlock %v (node timeout %v)", lockTook, unlockTook, nodeTimeout)

	// The calls to the paused node time out in the background; its acquire
	// and release are queued in the server. After SIGCONT both execute, in
	// either order, and no key of ours may remain.
	// A release that timed out waits in the per-node backlog for a retry.
	require.Eventually(t, func() bool { return c.Backlog()[4] > 0 }, 5*time.Second, 5*time.Millisecond)
	resume()
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, c.Close(closeCtx))
	assert.Equal(t, []int{0, 0, 0, 0, 0}, c.Backlog())
	cl.assertNoLockKeyFor(t, 4, 200*time.Millisecond)
	for i := 0; i < 4; i++ {
		assert.Empty(t, cl.keys(t, i), "node %d", i)
	}
}

func TestPausedNodeFailedLockLeavesNoOrphan(t *testing.T) {
	cl := startCluster(t, 5)
	const nodeTimeout = 200 * time.Millisecond
	c := newClient(t, cl.nodes, redlock.WithNodeTimeout(nodeTimeout), redlock.WithReleaseTimeout(nodeTimeout))
	m := newMutex(t, c)
	ctx := context.Background()
	for _, i := range []int{0, 1} {
		require.NoError(t, cl.raw[i].Set(ctx, lockName, "foreign", time.Minute).Err())
	}
	resume := cl.pause(t, 4)
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.Eventually(t, func() bool { return c.Backlog()[4] > 0 }, 5*time.Second, 5*time.Millisecond)
	resume()
	require.NoError(t, c.Close(ctx))
	cl.assertNoLockKeyFor(t, 4, 200*time.Millisecond)
	for i := 2; i < 4; i++ {
		assert.Empty(t, cl.keys(t, i), "node %d", i)
	}
}

func TestKilledNodes(t *testing.T) {
	cl := startCluster(t, 5)
	// Dead nodes refuse connections at once; with a 2 s node timeout, failing
	// fast means not waiting for any deadline.
	c := newClient(t, cl.nodes, redlock.WithNodeTimeout(2*time.Second))
	m := newMutex(t, c, redlock.WithMaxAttempts(1))
	ctx := context.Background()

	require.NoError(t, cl.servers[0].Kill())
	lease, err := m.Lock(ctx)
	require.NoError(t, err, "4 of 5 nodes alive must be enough")
	assert.Equal(t, redlock.Failed, lease.Outcomes()[0].Result)
	require.NoError(t, lease.Unlock(ctx))

	require.NoError(t, cl.servers[1].Kill())
	require.NoError(t, cl.servers[2].Kill())
	_, err = m.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's context did not end")
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.LessOrEqual(t, qe.Succeeded, 2)
	// Failing fast is shown by why it failed: the 3 dead nodes refused the
	// connection (node.ErrNotSent) and decided it; none ran into its 2 s
	// deadline.
	dead := qe.NodesWith(node.ErrNotSent)
	sort.Strings(dead)
	want := []string{cl.nodes[1].Addr(), cl.nodes[2].Addr(), cl.nodes[0].Addr()}
	sort.Strings(want)
	assert.Equal(t, want, dead)
	assert.Empty(t, qe.NodesWith(context.DeadlineExceeded))
	require.NoError(t, c.Close(ctx))
	for i := 3; i < 5; i++ {
		assert.Empty(t, cl.keys(t, i), "node %d after a failed lock", i)
	}
}

func TestExpiredAndStolenLocks(t *testing.T) {
	cl := startCluster(t, 3)
	c := newClient(t, cl.nodes)
	ctx := context.Background()

	t.Run("expired", func(t *testing.T) {
		m := newMutex(t, c, redlock.WithTTL(150*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond),
			redlock.WithReleaseTimeout(50*time.Millisecond))
		lease, err := m.TryLock(ctx)
		require.NoError(t, err)
		assert.True(t, lease.Valid())
		require.Eventually(t, func() bool { return !lease.Valid() }, 2*time.Second, 5*time.Millisecond)
		err = lease.Extend(ctx)
		require.ErrorIs(t, err, redlock.ErrLockLost)
		assert.Contains(t, err.Error(), "validity ended")
		// The keys expire on the servers shortly after (drift allowance).
		require.Eventually(t, func() bool { return len(cl.ours(t, lease.Token())) == 0 }, 2*time.Second, 5*time.Millisecond)
		err = lease.Unlock(ctx)
		require.ErrorIs(t, err, redlock.ErrLockLost)
		for i := range cl.nodes {
			assert.Zero(t, cl.raw[i].Exists(ctx, lockName).Val(), "Extend must not resurrect the key")
		}
	})

	t.Run("stolen", func(t *testing.T) {
		cl.flush(t)
		m := newMutex(t, c)
		lease, err := m.TryLock(ctx)
		require.NoError(t, err)
		for i := 0; i < 2; i++ { // a majority taken over
			require.NoError(t, cl.raw[i].Set(ctx, lockName, "thief", time.Minute).Err())
		}
		assert.True(t, lease.Valid())
		err = lease.Extend(ctx)
		require.ErrorIs(t, err, redlock.ErrLockLost)
		require.NotErrorIs(t, err, redlock.ErrNotExtended)
		assert.False(t, lease.Valid(), "a lease whose Extend found it lost is no longer valid")
		err = lease.Unlock(ctx)
		require.ErrorIs(t, err, redlock.ErrLockLost)
		var qe *redlock.QuorumError
		require.ErrorAs(t, err, &qe)
		assert.LessOrEqual(t, qe.Succeeded, 1)
		require.NoError(t, c.Close(ctx)) // the release on node 2 may finish after the verdict
		for i := 0; i < 2; i++ {
			assert.Equal(t, "thief", cl.raw[i].Get(ctx, lockName).Val(), "Unlock must not delete another owner's key")
		}
		assert.Zero(t, cl.raw[2].Exists(ctx, lockName).Val())
		require.ErrorIs(t, lease.Unlock(ctx), redlock.ErrLockLost, "second unlock")

		// Unlock with an already cancelled context still releases (on a
		// detached context) but reports that it could not confirm it.
		cl.flush(t)
		lease, err = m.TryLock(ctx)
		require.NoError(t, err)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err = lease.Unlock(cctx)
		if err != nil { // a fast quorum may beat the cancelled wait
			require.ErrorIs(t, err, redlock.ErrNotReleased)
			require.ErrorIs(t, err, context.Canceled)
			require.NotErrorIs(t, err, redlock.ErrLockLost)
		}
		require.NoError(t, c.Close(ctx))
		assert.Empty(t, cl.ours(t, lease.Token()), "the release went out despite the cancelled context")
	})

	t.Run("extend", func(t *testing.T) {
		cl.flush(t)
		m := newMutex(t, c, redlock.WithTTL(2*time.Second))
		lease, err := m.TryLock(ctx)
		require.NoError(t, err)
		before := lease.Until()
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, lease.Extend(ctx))
		assert.True(t, lease.Until().After(before))
		for i := range cl.nodes {
			assert.Greater(t, cl.raw[i].PTTL(ctx, lockName).Val(), 1900*time.Millisecond)
		}
		require.NoError(t, lease.Unlock(ctx))
		require.ErrorIs(t, lease.Extend(ctx), redlock.ErrLockLost, "extend after unlock")
	})
}

// holdingNode applies the acquire on the real server but then withholds the
// reply until the caller's context ends, like a reply lost in the network.
type holdingNode struct {
	node.Node
}

func (h holdingNode) Acquire(ctx context.Context, key, value string, ttl time.Duration) (node.AcquireResult, error) {
	res, err := h.Node.Acquire(ctx, key, value, ttl)
	if err != nil {
		return res, err
	}
	<-ctx.Done()
	return res, ctx.Err()
}

func TestCancelledLockRollsBack(t *testing.T) {
	cl := startCluster(t, 5)
	nodes := append([]node.Node(nil), cl.nodes...)
	for i := 2; i < 5; i++ {
		nodes[i] = holdingNode{cl.nodes[i]}
	}
	c := newClient(t, nodes, redlock.WithNodeTimeout(time.Second), redlock.WithReleaseTimeout(time.Second))
	m := newMutex(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the keys are on every node (the replies are withheld).
		for {
			n := 0
			for i := range cl.raw {
				n += int(cl.raw[i].Exists(context.Background(), lockName).Val())
			}
			if n == 5 {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err := m.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.Canceled)
	closeCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	require.NoError(t, c.Close(closeCtx))
	for i := range cl.raw {
		assert.Zero(t, cl.raw[i].Exists(context.Background(), lockName).Val(), "node %d kept our key after a cancelled Lock", i)
	}
}

func TestLockGivesUpWhenContextEnds(t *testing.T) {
	cl := startCluster(t, 3)
	ctx := context.Background()
	for i := range cl.raw {
		require.NoError(t, cl.raw[i].Set(ctx, lockName, "foreign", time.Minute).Err())
	}
	c := newClient(t, cl.nodes)
	m := newMutex(t, c)
	cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	_, err := m.Lock(cctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, "lock", qe.Op)
	// The last attempt may have been cut short by the deadline: its nodes
	// are then pending, otherwise taken; never acquired.
	for _, o := range qe.Nodes {
		assert.NotEqual(t, redlock.Succeeded, o.Result)
	}

	m2 := newMutex(t, c, redlock.WithMaxAttempts(3), redlock.WithRetryBackoff(time.Millisecond, 2*time.Millisecond))
	_, err = m2.Lock(ctx)
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
}

// A paused node and many lock cycles: the work left behind on it stays
// bounded by the in-flight cap instead of growing with every cycle.
func TestPausedNodeBacklogIsBounded(t *testing.T) {
	cl := startCluster(t, 5)
	const maxInFlight = 4
	c := newClient(t, cl.nodes, redlock.WithNodeTimeout(2*time.Second), redlock.WithMaxInFlight(maxInFlight))
	m := newMutex(t, c)
	ctx := context.Background()
	resume := cl.pause(t, 4)
	base := runtime.NumGoroutine()
	peakG, peakInFlight := 0, 0
	busy := 0
	for i := 0; i < 300; i++ {
		// Lock, not TryLock: on a starved machine a healthy node can still
		// hold the previous cycle's key for a moment (its release had not
		// landed when Unlock decided); Lock retries past that.
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		lease, err := m.Lock(lctx)
		cancel()
		require.NoError(t, err)
		o := lease.Outcomes()[4]
		require.NotEqual(t, redlock.Succeeded, o.Result, "a paused node cannot answer")
		if errors.Is(o.Err, redlock.ErrNodeBusy) {
			busy++
		}
		require.NoError(t, lease.Unlock(ctx))
		peakG = max(peakG, runtime.NumGoroutine())
		peakInFlight = max(peakInFlight, c.InFlight()[4])
	}
	t.Logf("300 cycles with a paused node: goroutines base %d peak %d, in flight on paused node peak %d, cycles that found it busy %d",
		base, peakG, peakInFlight, busy)
	assert.LessOrEqual(t, peakInFlight, maxInFlight)
	// Outcomes decided before the node's goroutine ran are Pending instead.
	assert.Greater(t, busy, 0, "the paused node must be skipped once at its cap")
	// Each cycle leaves at most its acquire and release goroutines for the
	// paused node (waiting for a slot or the acquire); bounded, not 300x.
	assert.Less(t, peakG-base, 100, "goroutines grew with the number of cycles")
	resume()
}

func TestMutualExclusionUnderContention(t *testing.T) {
	cl := startCluster(t, 5)
	ctx := context.Background()
	var inside, maxInside, acquisitions atomic.Int32
	var wg sync.WaitGroup
	deadline := time.Now().Add(1500 * time.Millisecond)
	for w := 0; w < 6; w++ {
		c := newClient(t, cl.nodes, redlock.WithRetryBackoff(time.Millisecond, 5*time.Millisecond))
		m := newMutex(t, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				lease, err := m.Lock(lctx)
				cancel()
				if err != nil {
					continue
				}
				n := inside.Add(1)
				for {
					old := maxInside.Load()
					if n <= old || maxInside.CompareAndSwap(old, n) {
						break
					}
				}
				acquisitions.Add(1)
				time.Sleep(200 * time.Microsecond)
				inside.Add(-1)
				_ = lease.Unlock(ctx)
			}
		}()
	}
	wg.Wait()
	t.Logf("acquisitions: %d", acquisitions.Load())
	assert.Equal(t, int32(1), maxInside.Load(), "two holders at once")
	assert.Greater(t, acquisitions.Load(), int32(20))
}

func TestInspectShowsOwner(t *testing.T) {
	cl := startCluster(t, 3)
	c := newClient(t, cl.nodes, redlock.WithOwnerLabel("billing worker"))
	m := newMutex(t, c)
	ctx := context.Background()
	lease, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))
	holders, err := c.Inspect(ctx, lockName)
	require.NoError(t, err)
	require.Len(t, holders, 3)
	for i, h := range holders {
		require.NoError(t, h.Err)
		assert.Equal(t, cl.nodes[i].Addr(), h.Node)
		assert.True(t, h.Holder.Exists)
		assert.Equal(t, lease.Token(), h.Owner.Token)
		assert.Equal(t, "billing worker", h.Owner.Label)
		assert.NotZero(t, h.Owner.PID)
		assert.Greater(t, h.Holder.TTL, 9*time.Second)
	}
	require.NoError(t, lease.Unlock(ctx))
	require.NoError(t, c.Close(ctx)) // Unlock returns at quorum; let the last release land
	holders, err = c.Inspect(ctx, lockName)
	require.NoError(t, err)
	for _, h := range holders {
		assert.False(t, h.Holder.Exists)
	}
	require.NoError(t, cl.servers[1].Kill())
	holders, err = c.Inspect(ctx, lockName)
	require.NoError(t, err)
	assert.Error(t, holders[1].Err)
}

// lostReplyNode applies the acquire on the real server but reports a broken
// connection (the reply was lost), and refuses the first releases as a
// partitioned node would, then heals.
type lostReplyNode struct {
	node.Node
	refusals atomic.Int32
}

func (l *lostReplyNode) Acquire(ctx context.Context, key, value string, ttl time.Duration) (node.AcquireResult, error) {
	if _, err := l.Node.Acquire(ctx, key, value, ttl); err != nil {
		return node.Taken, err
	}
	return node.Taken, io.ErrUnexpectedEOF
}

func (l *lostReplyNode) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	if l.refusals.Add(-1) >= 0 {
		return false, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return l.Node.Release(ctx, key, value, guard)
}

func TestReleaseRetriedAfterPartitionHeals(t *testing.T) {
	cl := startCluster(t, 3)
	lost := &lostReplyNode{Node: cl.nodes[2]}
	lost.refusals.Store(2)
	nodes := []node.Node{cl.nodes[0], cl.nodes[1], lost}
	c := newClient(t, nodes)
	m := newMutex(t, c)
	ctx := context.Background()
	lease, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))
	assert.NotEqual(t, redlock.Succeeded, lease.Outcomes()[2].Result) // Failed, or Pending if decided first
	assert.Equal(t, int64(1), cl.raw[2].Exists(ctx, lockName).Val(), "the lost-reply acquire was applied")
	require.NoError(t, lease.Unlock(ctx))
	require.NoError(t, c.Close(ctx)) // waits for the queued retries
	assert.Equal(t, int32(-1), lost.refusals.Load(), "two refused releases, then one that went through")
	assert.Empty(t, cl.ours(t, lease.Token()), "the key behind the lost reply was released once the node healed")
}

func TestCloseGivesUpOnUnreachableNode(t *testing.T) {
	cl := startCluster(t, 3)
	lost := &lostReplyNode{Node: cl.nodes[2]}
	lost.refusals.Store(1 << 30) // never heals
	c, err := redlock.New([]node.Node{cl.nodes[0], cl.nodes[1], lost})
	require.NoError(t, err)
	m := newMutex(t, c)
	ctx := context.Background()
	lease, err := m.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, lease.Unlock(ctx))
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.Close(cctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, []int{0, 0, 0}, c.Backlog())
}
