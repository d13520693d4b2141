package redlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestOutOfMemoryMasterDoesNotStallFencedLocks: one master of three
// answers every acquire with OOM (maxmemory 1, noeviction): Redis refuses
// a script's first write, so the acquire changed nothing there. Such a
// reply is an answer (redlock's unrun): no rollback, release or retry goes
// to that master for it, and no waiter requeues because of it. Three
// fenced clients then each lock and unlock 10 times on the other two
// masters. An outside tester found the old rule (knobs.ErrorReplyMayApply:
// the reply counted as unanswered, so each attempt rolled that master back
// and requeued its waiter) let such clients take the lock about once in 8
// seconds, as with a master that answers QLCONFIG none (restarted without
// its configuration record); with the knob, a single Lock shows the
// rollback sent to that master.
func TestOutOfMemoryMasterDoesNotStallFencedLocks(t *testing.T) {
	ctx := context.Background()
	ms := startMasters(t, 3)
	const oom = 2
	for _, cmd := range [][]any{{"config", "set", "maxmemory-policy", "noeviction"}, {"config", "set", "maxmemory", "1"}} {
		require.NoError(t, ms.raw[oom].Do(ctx, cmd...).Err())
	}
	// calls returns how many calls of ops recs saw on the OOM master.
	calls := func(recs []*recorder, ops ...redlock.Op) int {
		n := 0
		for _, r := range recs {
			r.mu.Lock()
			for _, e := range r.nodes {
				for _, op := range ops {
					if e.Op == op && e.Index == oom {
						n++
					}
				}
			}
			r.mu.Unlock()
		}
		return n
	}
	// lock runs clients fenced clients, each locking and unlocking times
	// times, and returns their recorders and the clients.
	lock := func(t *testing.T, clients, times int) ([]*recorder, []*redlock.Client) {
		var recs []*recorder
		var cs []*redlock.Client
		var wg sync.WaitGroup
		// The Locks' context ends after the clients closed (cleanups run
		// last first): a Lock returns at a quorum, and cancelling its
		// context then would cut its call to the OOM master short, an
		// unanswered call whose release that master refuses.
		lctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		t.Cleanup(cancel)
		for range clients {
			rec := &recorder{}
			recs = append(recs, rec)
			// A node timeout no loaded machine reaches: every call is
			// answered, and the OOM master's replies are refusals only.
			c := realClient(t, ms.nodes, redlock.WithObserver(rec), redlock.WithNodeTimeout(20*time.Second))
			cs = append(cs, c)
			identifyAll(t, c, rec, len(ms.nodes))
			m := newMutex(t, c, redlock.WithTTL(time.Minute), redlock.WithFencing())
			wg.Go(func() {
				for range times {
					lease, err := m.Lock(lctx)
					if !assert.NoError(t, err) {
						return
					}
					assert.NoError(t, lease.Unlock(ctx))
				}
			})
		}
		wg.Wait()
		return recs, cs
	}
	t.Run("answered", func(t *testing.T) {
		recs, cs := lock(t, 3, 10)
		for _, c := range cs {
			require.NoError(t, c.Close(ctx)) // its releases are done
		}
		require.Positive(t, refusedOOM(recs), "the OOM master refused acquires with OOM")
		assert.Zero(t, calls(recs, redlock.OpRollback, redlock.OpRelease, redlock.OpRetry), "no release sent to the OOM master for an acquire it refused")
	})
	t.Run("ErrorReplyMayApply", func(t *testing.T) {
		knobs.ErrorReplyMayApply.Store(true)
		defer knobs.ErrorReplyMayApply.Store(false)
		// The old rule's releases there are retried while the master
		// refuses them: it takes writes again before the client closes.
		defer func() { require.NoError(t, ms.raw[oom].ConfigSet(ctx, "maxmemory", "0").Err()) }()
		recs, _ := lock(t, 1, 1)
		// (Lock returns at a quorum: the OOM master's reply may come after.)
		waitFor(t, "the OOM master's refusal", func() bool { return refusedOOM(recs) > 0 })
		waitFor(t, "with the old rule, a release of the refused acquire there", func() bool {
			return calls(recs, redlock.OpRollback, redlock.OpRelease, redlock.OpRetry) > 0
		})
	})
}

// refusedOOM returns how many acquire calls recs saw refused with OOM.
func refusedOOM(recs []*recorder) int {
	n := 0
	for _, r := range recs {
		r.mu.Lock()
		for _, e := range r.nodes {
			if e.Op == redlock.OpAcquire && e.Err != nil && strings.HasPrefix(e.Err.Error(), "OOM ") {
				n++
			}
		}
		r.mu.Unlock()
	}
	return n
}
