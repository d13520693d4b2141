package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// The late family's seed 59066 on real servers: a waiting Lock call whose
// acquires on master 0 wait for that master's first identification
// (gatedInfo: its Info waits) requeues after each attempt (an unanswered call: a new
// waiter ID, and a LeaveQueue of the old one, which master 0 applies: a
// tombstone). Master 0 then restarts empty, losing the tombstones, and the
// identification ends. Each old ID's acquire, still unsent, would now reach
// an empty master 0 and put a waiter that left back in its line (the first
// takes the free key; a release hands it on to those that left: a key
// nobody releases). With the rule, requeue drops those calls (reported as
// ErrNodeBusy, "its waiter left the line"): at most the live waiter's call
// reaches master 0. With knobs.RequeueSendsUnsent the departed waiters are
// back in master 0's line.
func TestRequeueDropsUnsentCallsOnRealServers(t *testing.T) {
	for _, rule := range []bool{true, false} {
		t.Run(fmt.Sprint("rule=", rule), func(t *testing.T) {
			if !rule {
				knobs.RequeueSendsUnsent.Store(true)
				defer knobs.RequeueSendsUnsent.Store(false)
			}
			requeueDropsUnsentCalls(t, rule)
		})
	}
}

func requeueDropsUnsentCalls(t *testing.T, rule bool) {
	ms := startMasters(t, 3)
	ctx := context.Background()
	const ttl = 30 * time.Second // a handed key stays until it is looked at
	holder := newMutex(t, realClient(t, ms.nodes), redlock.WithTTL(ttl))
	held, err := holder.TryLock(ctx) // the waiter's attempts are refused on 1 and 2
	require.NoError(t, err)

	gated, err := redisnode.Dial(ms.servers[0].Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = gated.Close() })
	g := &gatedInfo{Node: gated, open: make(chan struct{}), every: true, first: make(chan struct{})}
	var openOnce sync.Once
	open := func() { openOnce.Do(func() { close(g.open) }) }
	defer open()
	rec := &recorder{}
	nodes := []redlock.Node{g, ms.nodes[1], ms.nodes[2]}
	wc := newClient(t, nodes, redlock.WithObserver(rec),
		// A vote waits for its node's first identification as long as its
		// node timeout (at least a second): long enough for the restart
		// below on a loaded machine. Attempts are decided sooner, by the
		// refusals of masters 1 and 2.
		redlock.WithNodeTimeout(10*time.Second), redlock.WithReleaseTimeout(time.Second))
	waiter := newMutex(t, wc, redlock.WithTTL(ttl), redlock.WithRetryBackoff(5*time.Millisecond, 10*time.Millisecond))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Lock(wctx)
		done <- err
	}()

	// Three old IDs left master 0's line (tombstones) while their acquires
	// there wait for the identification:
	// each requeue takes about a backoff.
	tombstones := func() int64 {
		n, _ := ms.raw[0].ZCard(ctx, wire.QueueTTLKey(lockName)).Result()
		return n
	}
	require.Eventually(t, func() bool { return tombstones() >= 3 }, 20*time.Second, time.Millisecond,
		"the waiter's old IDs leave master 0's line")
	left := tombstones()                        // each left ID's acquire there still waits, as does the live one's
	require.NoError(t, ms.servers[0].Restart()) // kill -9, start empty: the tombstones are gone
	open()

	// Each acquire that waited on master 0 ends (at least one per ID that
	// left, and the live one's): dropped (the rule) or sent to the
	// restarted master.
	var dropped, sent int
	ended := func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		dropped, sent = 0, 0
		for _, e := range rec.nodes {
			if e.Op != redlock.OpAcquire || e.Index != 0 {
				continue
			}
			switch {
			case errors.Is(e.Err, redlock.ErrNodeBusy) && strings.Contains(e.Err.Error(), "left the line"):
				dropped++
			case e.Err == nil || errors.Is(e.Err, redlock.ErrNodeTaken):
				sent++ // applied, and answered
			}
		}
		return int64(dropped+sent) > left
	}
	require.Eventually(t, ended, 20*time.Second, time.Millisecond, "the acquires that waited on master 0 end")
	// Those sent have been applied (each reported its reply): how many of
	// the waiter's IDs master 0's line now holds.
	line, err := ms.raw[0].ZRange(ctx, wire.QueueKey(lockName), 0, -1).Result()
	require.NoError(t, err)
	t.Logf("master 0: %d acquires dropped, %d sent; its line: %v", dropped, sent, line)
	if !rule {
		assert.Zero(t, dropped)
		assert.GreaterOrEqual(t, len(line), 2, "waiters that left are back in master 0's line")
	} else {
		assert.GreaterOrEqual(t, dropped, 2, "the old IDs' acquires are dropped")
		assert.LessOrEqual(t, len(line), 1, "only the live waiter may be in master 0's line")
	}

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, held.Unlock(ctx))
	if rule {
		// Every call ended and was cleaned up (Close waits for the
		// removals): no key is left on master 0.
		require.NoError(t, wc.Close(ctx))
		v, err := ms.raw[0].Get(ctx, lockName).Result()
		assert.Empty(t, v, "a key left on master 0 (err %v)", err)
	}
}
