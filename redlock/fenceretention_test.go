package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// counters returns each in-memory master's fencing counter of lockName (0
// where it has none).
func counters(t *testing.T, ms []*memnode.Node) []int64 {
	t.Helper()
	out := make([]int64, len(ms))
	for i, m := range ms {
		_, f, err := m.Peek(context.Background(), lockName)
		require.NoError(t, err)
		out[i] = f
	}
	return out
}

// fencedCycle locks and unlocks m and returns the lease's token and the
// acquisition's OpDone event, which the client reported for it.
func fencedCycle(t *testing.T, m *redlock.Mutex, rec *recorder) (int64, redlock.OpEvent) {
	t.Helper()
	lease, err := m.Lock(context.Background())
	require.NoError(t, err)
	require.NoError(t, lease.Unlock(context.Background()))
	synctest.Wait()
	acq := rec.done(redlock.OpAcquire)
	require.NotEmpty(t, acq)
	e := acq[len(acq)-1]
	require.Equal(t, fenceOf(t, lease), e.Fence)
	return e.Fence, e
}

// Fence counters are kept WithFenceRetention after the last acquisition
// that wrote them back: a lock in use keeps them (each acquisition renews
// them, so its tokens go on from the counters), an idle lock loses them
// after the retention, and its next token starts a new epoch from the
// clock, above every token before. With the epoch rule switched off
// (knobs.NoFenceEpoch), the lock's first token comes back after the
// cleanup: the test can fail.
func TestFenceCountersAreCleanedUpAndTokensStayMonotonic(t *testing.T) {
	for _, epoch := range []bool{true, false} {
		t.Run(fmt.Sprint("epoch=", epoch), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				knobs.NoFenceEpoch.Store(!epoch)
				defer knobs.NoFenceEpoch.Store(false)
				const keep = 10 * time.Second
				ms, nodes := mem(3)
				rec := &recorder{}
				c := newClient(t, nodes, redlock.WithObserver(rec))
				m := newMutex(t, c, redlock.WithFencing(), redlock.WithTTL(time.Second), redlock.WithFenceRetention(keep))

				var tokens []int64
				first, ev := fencedCycle(t, m, rec)
				tokens = append(tokens, first)
				assert.Equal(t, epoch, ev.FenceEpoch, "a new lock starts an epoch")
				// In use: an acquisition every 0.6 of the retention, for
				// three retentions; the counters never go, and each token
				// is the highest counter read plus one.
				for range 5 {
					time.Sleep(keep * 6 / 10)
					require.Less(t, countZeros(counters(t, ms)), len(ms), "the counters written back 0.6 retention ago are there")
					tok, ev := fencedCycle(t, m, rec)
					if !ev.FenceEpoch { // a quorum of the counters was read
						assert.Equal(t, tokens[len(tokens)-1]+1, tok, "max+1 from the renewed counters")
					}
					tokens = append(tokens, tok)
				}
				// Idle for the retention: every counter is gone.
				time.Sleep(keep)
				assert.Equal(t, []int64{0, 0, 0}, counters(t, ms))
				after, ev := fencedCycle(t, m, rec)
				last := tokens[len(tokens)-1]
				if !epoch {
					assert.LessOrEqual(t, after, last, "without the epoch rule the token after the cleanup repeats: the check below can fail")
					return
				}
				assert.True(t, ev.FenceEpoch, "no counter was left to read")
				assert.Greater(t, after, last, "the first token after the cleanup is above every token before it")
				for i := 1; i < len(tokens); i++ {
					assert.Greater(t, tokens[i], tokens[i-1])
				}
			})
		})
	}
}

// A counter outlives the lease that wrote it (it is kept the retention from
// the write-back, not the lease's TTL), and WithFenceRetention(0) keeps it
// for ever.
func TestFenceCountersOutliveTheirLease(t *testing.T) {
	for _, keep := range []time.Duration{time.Minute, 0} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, nodes := mem(3)
				rec := &recorder{}
				c := newClient(t, nodes, redlock.WithObserver(rec))
				m := newMutex(t, c, redlock.WithFencing(), redlock.WithTTL(time.Second), redlock.WithFenceRetention(keep))
				tok, _ := fencedCycle(t, m, rec)
				time.Sleep(time.Minute - time.Millisecond)
				written := 0
				for _, f := range counters(t, ms) {
					if f == tok {
						written++
					}
				}
				assert.GreaterOrEqual(t, written, 2, "a quorum of counters holds the token a lease's TTL and more after it")
				time.Sleep(time.Millisecond)
				if keep == 0 {
					assert.Equal(t, written, len(ms)-countZeros(counters(t, ms)), "kept for ever")
				} else {
					assert.Equal(t, []int64{0, 0, 0}, counters(t, ms), "gone after the retention")
				}
			})
		})
	}
}

func countZeros(xs []int64) int {
	n := 0
	for _, x := range xs {
		if x == 0 {
			n++
		}
	}
	return n
}

// WithFenceRetention needs fencing, and a retention that outlives the
// lease (or 0, for ever); the default follows a TTL above a day.
func TestFenceRetentionIsChecked(t *testing.T) {
	_, nodes := mem(3)
	c := newClient(t, nodes)
	for _, tc := range []struct {
		opts []redlock.LockOption
		says string
	}{
		{[]redlock.LockOption{redlock.WithFenceRetention(time.Hour)}, "fenced locks only"},
		{[]redlock.LockOption{redlock.WithFencing(), redlock.WithFenceRetention(-time.Second)}, "fence retention -1s must be in [0, "},
		{[]redlock.LockOption{redlock.WithFencing(), redlock.WithTTL(time.Minute), redlock.WithLockDelay(time.Minute), redlock.WithFenceRetention(90 * time.Second)},
			"fence retention 1m30s must be 0 (for ever) or at least the TTL 1m0s plus the lock delay 1m0s"},
	} {
		_, err := c.NewMutex(lockName, tc.opts...)
		require.ErrorIs(t, err, redlock.ErrInvalidConfig)
		assert.Contains(t, err.Error(), tc.says)
	}
	for _, opts := range [][]redlock.LockOption{
		{redlock.WithFencing(), redlock.WithFenceRetention(0)},
		{redlock.WithFencing(), redlock.WithTTL(48 * time.Hour)}, // the default retention follows the TTL
	} {
		_, err := c.NewMutex(lockName, opts...)
		require.NoError(t, err)
	}
}

// On real masters: a counter's time to live is the retention, set by the
// write-back and kept after the lease is released; once it has passed on
// every master the counters are gone, and the next token is still above
// every token before (a new epoch). With the epoch rule switched off the
// first token comes back: the check can fail.
func TestFenceCountersExpireOnRealMasters(t *testing.T) {
	const keep = time.Second
	for _, epoch := range []bool{true, false} {
		t.Run(fmt.Sprint("epoch=", epoch), func(t *testing.T) {
			knobs.NoFenceEpoch.Store(!epoch)
			defer knobs.NoFenceEpoch.Store(false)
			ms := startMasters(t, 3)
			c := realClient(t, ms.nodes, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithReleaseTimeout(100*time.Millisecond))
			m := newMutex(t, c, redlock.WithFencing(), redlock.WithTTL(300*time.Millisecond), redlock.WithFenceRetention(keep))
			ctx := context.Background()
			fk := "{" + lockName + "}:fence"
			var last int64
			for range 3 {
				before := time.Now()
				lease, err := m.Lock(ctx)
				require.NoError(t, err)
				tok := fenceOf(t, lease)
				require.Greater(t, tok, last)
				last = tok
				require.NoError(t, lease.Unlock(ctx))
				held := 0
				for _, raw := range ms.raw {
					asked := time.Now()
					pttl, err := raw.PTTL(ctx, fk).Result()
					require.NoError(t, err)
					if pttl > 0 { // -2: this master's write-back came before its acquire
						held++
						assert.LessOrEqual(t, pttl, keep, "the counter's time to live is the retention")
						// Written back after before, it lives until about
						// before+keep (to the server's clock), far past the
						// lease's TTL: more than halfway from the TTL to keep.
						assert.Greater(t, asked.Add(pttl).Sub(before), (keep+300*time.Millisecond)/2,
							"the counter is kept the retention from its write-back, so it outlives the lease (TTL 300ms)")
					}
				}
				assert.GreaterOrEqual(t, held, 2, "a quorum of masters keep the counter after the release")
			}
			// Wait until every master has dropped its counter.
			deadline := time.Now().Add(30 * time.Second)
			for {
				n := int64(0)
				for _, raw := range ms.raw {
					k, err := raw.Exists(ctx, fk).Result()
					require.NoError(t, err)
					n += k
				}
				if n == 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "counters kept %v still there after 30s", keep)
				time.Sleep(50 * time.Millisecond)
			}
			lease, err := m.Lock(ctx)
			require.NoError(t, err)
			if epoch {
				assert.Greater(t, fenceOf(t, lease), last, "the first token after the cleanup is above every token before")
			} else {
				assert.LessOrEqual(t, fenceOf(t, lease), last, "without the epoch rule a token comes back after the cleanup")
			}
			require.NoError(t, lease.Unlock(ctx))
		})
	}
}
