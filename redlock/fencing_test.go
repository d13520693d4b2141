package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Three leases on three different quorums of five masters. An INCR on each
// node with the maximum over the replies would give 1, 2, 2 (the third
// quorum holds only counters of 2); the max-register gives t, t+1, t+2,
// where t is the first token, an epoch started from the clock because the
// lock had no counters yet.
func TestFencingTokensIncreaseAcrossDifferentQuorums(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		c := newClient(t, nodes)
		m := newMutex(t, c, redlock.WithFencing())
		down := errors.New("unreachable")
		start := time.Now().UnixMicro()
		var tokens []int64
		for _, quorum := range [][]int{{0, 1, 2}, {2, 3, 4}, {0, 1, 3}} {
			in := map[int]bool{}
			for _, i := range quorum {
				in[i] = true
			}
			for i, n := range ms {
				if in[i] {
					n.Fail(nil)
				} else {
					n.Fail(fmt.Errorf("%w: %w", down, redlock.ErrNotSent))
				}
			}
			// Lock, not TryLock: a node met for the first time does not
			// join the identified set in the attempt that finds a node of
			// the set unreadable (docs/algorithm.md, "One vote per server").
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			lease, err := m.Lock(ctx)
			cancel()
			require.NoError(t, err, "quorum %v", quorum)
			tokens = append(tokens, fenceOf(t, lease))
			require.NoError(t, lease.Unlock(context.Background()))
			synctest.Wait()
		}
		require.GreaterOrEqual(t, tokens[0], start, "a new lock's first token starts an epoch from the clock")
		// Strictly increasing (INCR-and-max would repeat one). Each is the
		// counters' max + 1 or, where fewer than a quorum of counters
		// exist, the clock's epoch, whichever is higher.
		assert.Less(t, tokens[0], tokens[1])
		assert.Less(t, tokens[1], tokens[2])
	})
}

// Two of three masters lose their counters (restarted without persistence)
// between two leases, and the next quorum is exactly those two: both read
// no counter. max+1 would hand out the first token again; fewer than a
// quorum of counters exist, so the token starts a new epoch from the clock,
// above it. With the epoch switched off (knobs.NoFenceEpoch) the token
// repeats: the test can fail.
func TestFencingTokenStartsANewEpochWhenCountersAreLost(t *testing.T) {
	for _, epoch := range []bool{true, false} {
		t.Run(fmt.Sprint("epoch=", epoch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				knobs.NoFenceEpoch.Store(!epoch)
				defer knobs.NoFenceEpoch.Store(false)
				ms, nodes := mem(3)
				c := newClient(t, nodes)
				m := newMutex(t, c, redlock.WithFencing())
				first, err := m.TryLock(context.Background())
				require.NoError(t, err)
				require.NoError(t, first.Unlock(context.Background()))
				synctest.Wait()
				time.Sleep(time.Millisecond) // restarts take time
				ms[0].Restart(false)
				ms[1].Restart(false)
				ms[2].Fail(fmt.Errorf("unreachable: %w", redlock.ErrNotSent))
				second, err := m.TryLock(context.Background())
				require.NoError(t, err)
				if epoch {
					assert.Greater(t, fenceOf(t, second), fenceOf(t, first), "tokens must increase across the loss of a quorum's counters")
				} else {
					assert.LessOrEqual(t, fenceOf(t, second), fenceOf(t, first), "without the epoch the lost counters hand out a token again")
				}
				require.NoError(t, second.Unlock(context.Background()))
			})
		})
	}
}

// A holder that pauses past its validity writes with a stale token; the
// fenced resource refuses it because the next holder's token is higher.
// Without fencing the leases have no token (FenceToken reports false, Fence
// reads 0): a resource cannot tell the stale write from the next one, which
// is the violation fencing exists for, and FencedStore refuses the 0 rather
// than take it for a token.
func TestFencedResourceRefusesAPausedHolder(t *testing.T) {
	for _, fencing := range []bool{true, false} {
		t.Run(fmt.Sprint("fencing=", fencing), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, nodes := mem(3)
				c := newClient(t, nodes)
				opts := []redlock.LockOption{redlock.WithTTL(time.Second)}
				if fencing {
					opts = append(opts, redlock.WithFencing())
				}
				m := newMutex(t, c, opts...)
				var store memnode.FencedStore
				paused, err := m.TryLock(context.Background())
				require.NoError(t, err)
				time.Sleep(2 * time.Second) // a GC pause past the validity
				next, err := m.TryLock(context.Background())
				require.NoError(t, err)
				if !fencing {
					_, ok := next.Fence()
					assert.False(t, ok, "a lease without fencing has no token")
					tok, _ := next.Fence()
					err := store.Write(tok, "next")
					require.Error(t, err)
					assert.Contains(t, err.Error(), "not a fencing token")
					require.NoError(t, next.Unlock(context.Background()))
					return
				}
				nextToken, ok := next.Fence()
				require.True(t, ok)
				pausedToken, ok := paused.Fence()
				require.True(t, ok)
				require.NoError(t, store.Write(nextToken, "next"))
				stale := store.Write(pausedToken, "paused") // it wakes up and writes
				require.Error(t, stale)
				assert.Contains(t, stale.Error(), "below the highest seen")
				v, _ := store.Read()
				assert.Equal(t, "next", v)
				require.NoError(t, next.Unlock(context.Background()))
			})
		})
	}
}

// Competing clients over five masters, random minorities unreachable or
// restarted with their data (AOF): every holder's token is above every
// earlier holder's, and the fenced resource accepts every write.
func TestFencingTokensStrictlyIncreaseUnderFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(5)
		var store memnode.FencedStore
		var mu sync.Mutex
		var last int64
		var got int
		var wg sync.WaitGroup
		for k := range 4 {
			c := newClient(t, nodes)
			m := newMutex(t, c, redlock.WithTTL(time.Second), redlock.WithFencing())
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 250 {
					lease, err := m.Lock(context.Background())
					if !assert.NoError(t, err, "client %d", k) {
						return
					}
					mu.Lock()
					assert.Greater(t, fenceOf(t, lease), last, "token not above the previous holder's")
					last = fenceOf(t, lease)
					got++
					mu.Unlock()
					assert.NoError(t, store.Write(fenceOf(t, lease), fmt.Sprint(k)))
					time.Sleep(time.Millisecond)
					_ = lease.Unlock(context.Background())
				}
			}()
		}
		faults := make(chan struct{})
		go func() {
			defer close(faults)
			rng := rand.New(rand.NewPCG(1, 2))
			for range 300 {
				a, b := rng.IntN(5), rng.IntN(5)
				ms[a].Fail(fmt.Errorf("unreachable: %w", redlock.ErrNotSent))
				ms[b].Fail(fmt.Errorf("unreachable: %w", redlock.ErrNotSent))
				time.Sleep(7 * time.Millisecond)
				ms[a].Fail(nil)
				ms[b].Fail(nil)
				ms[rng.IntN(5)].Restart(true)
				time.Sleep(3 * time.Millisecond)
			}
		}()
		wg.Wait()
		<-faults
		assert.Equal(t, 1000, got)
		_, highest := store.Read()
		assert.Equal(t, last, highest)
	})
}

// FenceToken tells a lease without fencing from one with a token: only a
// mutex made with WithFencing hands out tokens, and those start at 1.
func TestFenceTokenSaysWhetherFencingIsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(3)
		c := newClient(t, nodes)
		for _, fencing := range []bool{false, true} {
			var opts []redlock.LockOption
			if fencing {
				opts = append(opts, redlock.WithFencing())
			}
			m, err := c.NewMutex(fmt.Sprint("fence-token-", fencing), opts...)
			require.NoError(t, err)
			lease, err := m.TryLock(context.Background())
			require.NoError(t, err)
			token, ok := lease.Fence()
			assert.Equal(t, fencing, ok)
			if fencing {
				assert.GreaterOrEqual(t, token, int64(1))
				assert.Equal(t, fenceOf(t, lease), token)
			} else {
				assert.Zero(t, token)
			}
			require.NoError(t, lease.Unlock(context.Background()))
		}
	})
}
