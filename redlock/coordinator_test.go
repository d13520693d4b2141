package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// For every subset of masters held by a foreign value, the lock is obtained
// exactly when the free masters reach a quorum; otherwise the error names
// the taken masters, and no key of ours is left anywhere.
func TestPreoccupiedSubsetsInMemory(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint("N=", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, nodes := mem(n)
				ctx := context.Background()
				for mask := 0; mask < 1<<n; mask++ {
					c := newClient(t, nodes) // Close below ends each client
					m := newMutex(t, c)
					taken := 0
					for i, node := range ms {
						node.Restart(false)
						if mask&(1<<i) != 0 {
							_, err := node.Acquire(ctx, lockName, "foreign", time.Minute)
							require.NoError(t, err)
							taken++
						}
					}
					lease, err := m.TryLock(ctx)
					if n-taken >= n/2+1 {
						require.NoError(t, err, "mask %b", mask)
						require.NoError(t, lease.Unlock(ctx))
					} else {
						require.ErrorIs(t, err, redlock.ErrNotObtained, "mask %b", mask)
						named := 0
						for i, e := range nodeErrs(t, err) {
							if errors.Is(e, redlock.ErrNodeTaken) {
								named++
								assert.NotZero(t, mask&(1<<i), "mask %b: free node %d named taken", mask, i)
								assert.Contains(t, err.Error(), ms[i].Addr())
							}
						}
						assert.GreaterOrEqual(t, named, n-(n/2+1)+1, "mask %b: %v", mask, err)
					}
					require.NoError(t, c.Close(ctx))
					for i, node := range ms {
						want := map[string]string{}
						if mask&(1<<i) != 0 {
							want[lockName] = "foreign"
						}
						assert.Equal(t, want, node.Keys(), "mask %b node %d", mask, i)
					}
				}
			})
		})
	}
}

// Issue 8, defect 5: a failed TryLock whose deciding master timed out
// returns after the node timeout, without waiting a release timeout for a
// release to that master (it finishes in the background).
func TestFailedTryLockDoesNotWaitForTimedOutNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes, redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithReleaseTimeout(400*time.Millisecond))
		ctx := context.Background()
		m := newMutex(t, c)
		warmUp(t, m)    // identify the servers first
		synctest.Wait() // every release of the warm-up has landed

		ok, err := ms[1].Acquire(ctx, lockName, "foreign", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		resume := ms[2].Pause()
		start := time.Now()
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		assert.Equal(t, 50*time.Millisecond, time.Since(start), "waited beyond the deciding node's timeout")
		resume() // the straggler acquire applies, then its guarded release
		require.NoError(t, c.Close(ctx))
		assert.Empty(t, ms[0].Keys())
		assert.Empty(t, ms[2].Keys(), "orphan key from the straggler")
	})
}

// Issue 8, defect 1 (in memory; TestPauseShorterThanTTLLeavesNoOrphan is the
// real-server twin): a master paused for less than the TTL applies a
// straggler acquire when it resumes, with a fresh TTL. Releases sent during
// the pause are lost (modelled by failing calls). The old backlog dropped
// its retry one TTL after queueing it, just before the master came back; the
// release must be retried until the master answers.
func TestReleaseRetriedUntilPausedNodeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		c := newClient(t, nodes)
		ctx := context.Background()
		ttl := 2 * time.Second
		m := newMutex(t, c, redlock.WithTTL(ttl))
		warmUp(t, m)    // identify the servers first
		synctest.Wait() // the warm-up's calls have all landed
		resume := ms[0].Pause()
		lease, err := m.TryLock(ctx) // its acquire waits in master 0's queue
		require.NoError(t, err)
		ms[0].Fail(errors.New("connection reset")) // releases get lost meanwhile
		require.NoError(t, lease.Unlock(ctx))
		time.Sleep(100 * time.Millisecond) // the release follows the acquire's timeout
		assert.Equal(t, 1, c.Stats().Backlog[0])
		time.Sleep(1800 * time.Millisecond)
		ms[0].Fail(nil)
		resume() // the straggler applies with a full TTL
		closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, c.Close(closeCtx))
		assert.Empty(t, ms[0].Keys(), "orphan key on the paused master")
	})
}

// Issue 8, defect 2: Close returns by its deadline plus the node and release
// timeouts while other goroutines keep locking, and operations started after
// Close fail with ErrClosed.
func TestCloseReturnsByItsDeadlineWhileInUse(t *testing.T) {
	for _, fault := range []string{"paused", "slow"} {
		t.Run(fault, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, nodes := mem(5)
				c, err := redlock.New(nodes)
				require.NoError(t, err)
				if fault == "paused" {
					defer ms[0].Pause()()
				} else {
					ms[0].SetDelay(30 * time.Millisecond)
				}
				stop := make(chan struct{})
				var wg sync.WaitGroup
				var closedErrs atomic.Int32
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						m, err := c.NewMutex(fmt.Sprint("close-", g%3))
						if !assert.NoError(t, err) {
							return
						}
						for {
							select {
							case <-stop:
								return
							default:
							}
							lctx, cancel := context.WithTimeout(context.Background(), time.Second)
							lease, err := m.Lock(lctx)
							cancel()
							if errors.Is(err, redlock.ErrClosed) {
								closedErrs.Add(1)
								time.Sleep(time.Millisecond)
								continue
							}
							if err == nil {
								time.Sleep(time.Millisecond)
								_ = lease.Unlock(context.Background())
							}
						}
					}()
				}
				time.Sleep(500 * time.Millisecond)
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				start := time.Now()
				returned := make(chan error, 1)
				go func() { returned <- c.Close(ctx) }()
				select {
				case err = <-returned:
				case <-time.After(10 * time.Second):
					t.Error("Close did not return within 10s while the client was in use")
				}
				close(stop)
				wg.Wait()
				if err != nil {
					require.ErrorIs(t, err, context.DeadlineExceeded)
				}
				assert.LessOrEqual(t, time.Since(start), 200*time.Millisecond+50*time.Millisecond+100*time.Millisecond)
				assert.Positive(t, closedErrs.Load(), "no operation saw ErrClosed after Close")
				require.NoError(t, c.Close(context.Background()))
			})
		})
	}
}

// alias is a second address for the same in-memory server.
type alias struct {
	*memnode.Node
	addr string
}

func (a alias) Addr() string { return a.addr }

// Issue 8, defect 3: one server listed under two addresses never casts two
// votes: with 2 of 3 needed, the server and its alias could otherwise grant
// the lock alone. The error names both addresses.
func TestSameServerUnderTwoAddressesIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, _ := mem(2)
		ms[1].Fail(fmt.Errorf("dial: %w", redlock.ErrNotSent))
		nodes := []redlock.Node{ms[0], alias{ms[0], "localhost-alias"}, ms[1]}
		c := newClient(t, nodes)
		_, err := newMutex(t, c).TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.ErrorIs(t, err, redlock.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "mem-0")
		assert.Contains(t, err.Error(), "localhost-alias")
		// Every later operation is refused at once.
		_, err = newMutex(t, c).TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrInvalidConfig)
		require.NoError(t, c.Close(context.Background()))
		assert.Empty(t, ms[0].Keys())
	})
}

// counting wraps a node and counts the acquires sent with a context that
// had already ended, and the guarded releases.
type counting struct {
	redlock.Node
	calls atomic.Int32
}

func (c *counting) Acquire(ctx context.Context, k, v string, ttl time.Duration) (bool, error) {
	if ctx.Err() != nil {
		c.calls.Add(1)
	}
	return c.Node.Acquire(ctx, k, v, ttl)
}

func (c *counting) Release(ctx context.Context, k, v string, guard time.Duration) (bool, error) {
	if guard > 0 {
		c.calls.Add(1)
	}
	return c.Node.Release(ctx, k, v, guard)
}

// Issue 8, defect 8: a Lock whose context had already ended sends nothing,
// so it leaves no release guard either (TestCancelledLockWritesNoGuard is
// the real-server twin).
func TestCancelledLockSendsNothing(t *testing.T) {
	_, base := mem(3)
	nodes := make([]redlock.Node, len(base))
	counters := make([]*counting, len(base))
	for i, n := range base {
		counters[i] = &counting{Node: n}
		nodes[i] = counters[i]
	}
	c := newClient(t, nodes)
	m := newMutex(t, c)
	warmUp(t, m) // identify the servers first
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		_, err := m.Lock(ctx)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
	}
	require.NoError(t, c.Close(context.Background()))
	for i, cn := range counters {
		assert.Zero(t, cn.calls.Load(), "node %d was called", i)
	}
}

// Issue 8, defect 6: when Lock returns because its context ended, the error
// wraps ctx.Err(), always (the old code lost it about once in 20,000 calls
// when the deadline passed between two checks).
func TestLockErrorAlwaysWrapsContextError(t *testing.T) {
	ms, nodes := mem(3)
	for _, n := range ms {
		_, err := n.Acquire(context.Background(), lockName, "foreign", time.Hour)
		require.NoError(t, err)
	}
	c := newClient(t, nodes)
	m := newMutex(t, c, redlock.WithRetryBackoff(time.Microsecond, 50*time.Microsecond))
	for i := range 10000 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(300))*time.Microsecond)
		_, err := m.Lock(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "call %d", i)
		require.ErrorIs(t, err, redlock.ErrNotObtained, "call %d", i)
	}
}

// Issue 8, defect 7: bad input gives errors, never panics.
func TestBadInputNeverPanics(t *testing.T) {
	var typedNil *memnode.Node
	_, err := redlock.New([]redlock.Node{memnode.New("a"), typedNil, memnode.New("c")})
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "node 1 is nil")
	_, err = redlock.New([]redlock.Node{nil})
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.NotPanics(t, func() { _ = (&redlock.QuorumError{}).Error() })
	assert.NotPanics(t, func() { _ = (&redlock.QuorumError{}).Unwrap() })
}

func TestConfigValidation(t *testing.T) {
	_, nodes := mem(3)
	cases := []struct {
		client []redlock.ClientOption
		lock   []redlock.LockOption
		name   string
		want   string
	}{
		{client: []redlock.ClientOption{redlock.WithQuorum(1)}, want: "quorum 1"},
		{client: []redlock.ClientOption{redlock.WithQuorum(4)}, want: "quorum 4"},
		{client: []redlock.ClientOption{redlock.WithQuorum(-1)}, want: "quorum -1"},
		{client: []redlock.ClientOption{redlock.WithQuorum(0)}, want: "quorum 0 must be in (3/2, 3]"},
		{client: []redlock.ClientOption{redlock.WithNodeTimeout(0)}, want: "node timeout 0s"},
		{client: []redlock.ClientOption{redlock.WithReleaseTimeout(-time.Second)}, want: "release timeout -1s"},
		{client: []redlock.ClientOption{redlock.WithDriftFactor(0.5)}, want: "drift factor 0.5"},
		{client: []redlock.ClientOption{redlock.WithMaxInFlight(0)}, want: "max in flight 0"},
		{lock: []redlock.LockOption{redlock.WithTTL(time.Microsecond)}, want: "TTL 1µs"},
		{client: []redlock.ClientOption{redlock.WithNodeTimeout(time.Second)}, lock: []redlock.LockOption{redlock.WithTTL(time.Second)}, want: "node timeout 1s must be below the TTL 1s"},
		{lock: []redlock.LockOption{redlock.WithMinValidity(10 * time.Second)}, want: "minimum validity 10s"},
		// Issue 32, item 4: a node timeout that leaves no validity (TTL less
		// drift 12ms). A minimum validity above what a slow quorum leaves is
		// allowed: a fast quorum still leaves enough
		// (TestValidityTooShortRollsBack).
		{client: []redlock.ClientOption{redlock.WithNodeTimeout(990 * time.Millisecond)}, lock: []redlock.LockOption{redlock.WithTTL(time.Second)},
			want: "node timeout 990ms leaves no validity of the TTL 1s (less drift 12ms)"},
		// Issue 32, item 3: a restart quarantine shorter than the keys live
		// protects nothing (3 of 3 trials gave two holders).
		{client: []redlock.ClientOption{redlock.WithRestartQuarantine(time.Second)}, lock: []redlock.LockOption{redlock.WithTTL(3 * time.Second)},
			want: "restart quarantine 1s is shorter than the lock's keys live (TTL 3s plus lock delay 0s: 3s)"},
		{client: []redlock.ClientOption{redlock.WithRestartQuarantine(3 * time.Second)}, lock: []redlock.LockOption{redlock.WithTTL(3 * time.Second), redlock.WithLockDelay(time.Second)},
			want: "restart quarantine 3s is shorter than the lock's keys live (TTL 3s plus lock delay 1s: 4.010101011s)"},
		{lock: []redlock.LockOption{redlock.WithRetryBackoff(time.Second, time.Millisecond)}, want: "minimum 1s is above maximum 1ms"},
		// Issue 8, defect 9: min 0 never backs off (min*2^k stays 0).
		{lock: []redlock.LockOption{redlock.WithRetryBackoff(0, 250*time.Millisecond)}, want: "retry backoff minimum 0 with maximum 250ms never backs off"},
		// Options that cannot work.
		{lock: []redlock.LockOption{redlock.WithLockDelay(math.MaxInt64)}, want: "lock delay 2562047h47m16.854775807s must not exceed"},
		{lock: []redlock.LockOption{redlock.WithTTL(math.MaxInt64)}, want: "TTL 2562047h47m16.854775807s plus lock delay 0s"},
		{lock: []redlock.LockOption{redlock.WithAutoRenew(1e-300)}, want: "auto-renew fraction 1e-300 of TTL 10s renews every 0s, below 1ms"},
		{lock: []redlock.LockOption{redlock.WithCancelMargin(-time.Millisecond)}, want: "cancel margin -1ms"},
		{lock: []redlock.LockOption{redlock.WithCancelMargin(10 * time.Second)}, want: "cancel margin 10s"},
		{lock: []redlock.LockOption{nil}, want: `NewMutex "ok": lock option 0 of 1 is nil`},
		{client: []redlock.ClientOption{redlock.WithQuorum(2), nil}, want: "client option 1 of 2 is nil"},
		{name: "", want: "empty lock name"},
		{name: "a}b", want: `lock name "a}b"`},
		{name: "x{}y", want: `lock name "x{}y"`},
		{name: "a{b", want: `lock name "a{b"`}, // a '{' without a '}' keeps no slot
	}
	for _, tc := range cases {
		name := tc.name
		if name == "" && tc.want != "empty lock name" {
			name = "ok"
		}
		c, err := redlock.New(nodes, tc.client...)
		if err == nil {
			_, err = c.NewMutex(name, tc.lock...)
		}
		require.ErrorIs(t, err, redlock.ErrInvalidConfig, tc.want)
		assert.Contains(t, err.Error(), tc.want)
	}
	c := newClient(t, nodes)
	for _, ok := range []string{"plain", "{tag}rest", "a{b}c"} {
		_, err := c.NewMutex(ok, redlock.WithRetryBackoff(0, 0))
		require.NoError(t, err, ok)
	}
	// The quarantine is a client option, the TTL a lock option: every
	// constructor checks the one against the other. A quarantine that
	// covers the keys, or 0 (the longest TTL in use), is accepted.
	q := newClient(t, nodes, redlock.WithRestartQuarantine(3*time.Second))
	_, err := q.NewMutex("ok", redlock.WithTTL(3*time.Second))
	require.NoError(t, err)
	for ctor, build := range map[string]func() error{
		"NewElection":  func() error { _, err := q.NewElection("e", redlock.WithTTL(4*time.Second)); return err },
		"NewRWMutex":   func() error { _, _, err := q.NewRWMutex("rw", redlock.WithTTL(4*time.Second)); return err },
		"NewSemaphore": func() error { _, err := q.NewSemaphore("s", 2, redlock.WithTTL(4*time.Second)); return err },
		"NewReentrant": func() error { _, err := q.NewReentrant("r", "me", redlock.WithTTL(4*time.Second)); return err },
	} {
		err := build()
		require.ErrorIs(t, err, redlock.ErrInvalidConfig, ctor)
		assert.ErrorContains(t, err, "restart quarantine 3s is shorter than the lock's keys live (TTL 4s", ctor)
	}
	_, err = newClient(t, nodes, redlock.WithRestartQuarantine(0)).NewMutex("ok", redlock.WithTTL(time.Hour))
	require.NoError(t, err)
	_, err = redlock.New(nil)
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	_, err = redlock.New([]redlock.Node{nodes[0], nodes[0], nodes[1]})
	require.ErrorContains(t, err, `duplicate node address "mem-0"`)
}

// Lock retries with backoff until the holder releases; the waiter gets the
// lock at the first attempt after that.
func TestLockWaitsForRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(5)
		c := newClient(t, nodes)
		m := newMutex(t, c)
		holder, err := m.TryLock(context.Background())
		require.NoError(t, err)
		got := make(chan *redlock.Lease)
		go func() {
			lease, err := m.Lock(context.Background())
			assert.NoError(t, err)
			got <- lease
		}()
		time.Sleep(time.Second)
		select {
		case <-got:
			t.Fatal("Lock succeeded while the lock was held")
		default:
		}
		require.NoError(t, holder.Unlock(context.Background()))
		released := time.Now()
		lease := <-got
		assert.LessOrEqual(t, time.Since(released), 250*time.Millisecond, "waited longer than the backoff maximum")
		require.NoError(t, lease.Unlock(context.Background()))
	})
}

// Many goroutines on several in-memory masters never hold the lock at once.
func TestMutualExclusionInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		for i, n := range ms {
			n.SetDelay(time.Duration(i+1) * time.Millisecond)
		}
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		var holders, acquired atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					lease, err := m.Lock(context.Background())
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, int32(1), holders.Add(1), "two holders")
					acquired.Add(1)
					time.Sleep(2 * time.Millisecond)
					holders.Add(-1)
					assert.True(t, lease.Valid())
					assert.NoError(t, lease.Unlock(context.Background()))
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, int32(160), acquired.Load())
		require.NoError(t, c.Close(context.Background()))
		assert.Zero(t, ownKeys(ms))
	})
}

// A paused master costs each operation at most its node timeout and never
// more than the in-flight cap of outstanding calls.
func TestPausedNodeWorkIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		c := newClient(t, nodes, redlock.WithMaxInFlight(4))
		m := newMutex(t, c)
		warmUp(t, m)    // identify the servers first
		synctest.Wait() // the warm-up's calls have all landed
		resume := ms[0].Pause()
		maxIn := 0
		for range 300 {
			lease, err := m.TryLock(context.Background())
			require.NoError(t, err)
			require.NoError(t, lease.Unlock(context.Background()))
			maxIn = max(maxIn, c.Stats().InFlight[0])
		}
		assert.LessOrEqual(t, maxIn, 4)
		time.Sleep(time.Second) // the calls on the paused master time out
		assert.Zero(t, c.Stats().InFlight[0])
		assert.Positive(t, c.Stats().Backlog[0], "releases to the paused master wait for a retry")
		resume()
		require.NoError(t, c.Close(context.Background()))
		assert.Zero(t, ownKeys(ms))
		assert.Equal(t, []int{0, 0, 0, 0, 0}, c.Stats().Backlog)
	})
}

// infoCounter counts a node's INFO calls (its first contacts).
type infoCounter struct {
	redlock.Node
	n atomic.Int32
}

func (c *infoCounter) Info(ctx context.Context) (redlock.ServerInfo, error) {
	c.n.Add(1)
	return c.Node.Info(ctx)
}

// Calls that find a node's first contact running wait for it: a burst of
// TryLocks on a new client all get the lock in turn, and each node is
// asked for its identity twice: alone, then in the one pass that takes
// every node in (docs/algorithm.md, "One vote per server").
func TestConcurrentFirstContactsWaitForOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		counters := make([]*infoCounter, len(nodes))
		for i := range nodes {
			ms[i].SetDelay(20 * time.Millisecond) // the first contact takes a while
			counters[i] = &infoCounter{Node: nodes[i]}
			nodes[i] = counters[i]
		}
		c := newClient(t, nodes)
		var wg sync.WaitGroup
		var got atomic.Int32
		for g := range 8 {
			m, err := c.NewMutex(fmt.Sprintf("name-%d", g))
			require.NoError(t, err)
			wg.Go(func() {
				lease, err := m.TryLock(context.Background())
				if assert.NoError(t, err) {
					got.Add(1)
					assert.NoError(t, lease.Unlock(context.Background()))
				}
			})
		}
		wg.Wait()
		assert.Equal(t, int32(8), got.Load())
		for i, n := range counters {
			assert.Equal(t, int32(2), n.n.Load(), "node %d asked for its identity twice", i)
		}
	})
}
