package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/redlock"
)

const electionName = "quorumlock:election"

func newElection(t *testing.T, c *redlock.Client, opts ...redlock.LockOption) *redlock.Election {
	t.Helper()
	e, err := c.NewElection(electionName, opts...)
	require.NoError(t, err)
	return e
}

// A leader campaigns, stays elected through renewals, resigns; the waiting
// candidate is elected with a higher term; Observe and Leader report each;
// a leader whose renewals fail (a majority paused) learns it (Done, Err,
// Context) before its validity deadline, and the next term is higher again.
func TestElectionCampaignObserveResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		ttl := time.Second
		a := newElection(t, newClient(t, nodes), redlock.WithTTL(ttl))
		b := newElection(t, newClient(t, nodes), redlock.WithTTL(ttl))
		watcher := newElection(t, newClient(t, nodes), redlock.WithTTL(ttl))
		ctx := context.Background()

		octx, stopObserving := context.WithCancel(ctx)
		seen := watcher.Observe(octx)
		assert.Equal(t, redlock.Leader{}, <-seen, "no leader yet")
		_, err := watcher.Leader(ctx)
		require.ErrorIs(t, err, redlock.ErrNoLeader)

		la, err := a.Campaign(ctx, "a:8080")
		require.NoError(t, err)
		assert.Positive(t, la.Term())
		assert.Equal(t, redlock.Leader{Value: "a:8080", Term: la.Term()}, <-seen)
		got, err := watcher.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, redlock.Leader{Value: "a:8080", Term: la.Term()}, got)

		elected := make(chan *redlock.Leadership)
		go func() {
			lb, err := b.Campaign(ctx, "b:8080")
			assert.NoError(t, err)
			elected <- lb
		}()
		time.Sleep(5 * ttl) // a stays leader: its renewals keep it
		assert.True(t, la.Valid())
		select {
		case <-la.Context().Done():
			t.Fatalf("a lost its leadership: %v", context.Cause(la.Context()))
		case <-elected:
			t.Fatal("b was elected while a led")
		default:
		}
		assert.Equal(t, la.Term(), fenceOf(t, la.Lease()))
		require.NoError(t, la.Resign(ctx))
		<-la.Context().Done()
		assert.ErrorIs(t, context.Cause(la.Context()), redlock.ErrReleased)
		assert.False(t, la.Valid())
		lb := <-elected
		assert.Greater(t, lb.Term(), la.Term(), "terms are fencing tokens: each above the last")
		assert.Equal(t, redlock.Leader{Value: "b:8080", Term: lb.Term()}, nextLeader(seen), "after no leader, maybe")

		// b's renewals fail: it learns it before its validity deadline,
		// before anyone else can be elected.
		resume1, resume2 := ms[1].Pause(), ms[2].Pause()
		<-lb.Context().Done()
		require.ErrorIs(t, context.Cause(lb.Context()), redlock.ErrLockLost)
		var qe *redlock.QuorumError
		assert.ErrorAs(t, context.Cause(lb.Context()), &qe, "the loss names the failed renewal: %v", context.Cause(lb.Context()))
		assert.ErrorIs(t, context.Cause(lb.Context()), redlock.ErrLockLost)
		resume1()
		resume2()
		la2, err := a.Campaign(ctx, "a:8080")
		require.NoError(t, err)
		assert.Greater(t, la2.Term(), lb.Term())
		assert.Equal(t, redlock.Leader{Value: "a:8080", Term: la2.Term()}, nextLeader(seen), "after b's end (and maybe no leader)")
		require.NoError(t, lb.Resign(ctx), "resigning a lost leadership releases what is left")
		require.NoError(t, la2.Resign(ctx))
		stopObserving()
		for range seen { // closed once ctx ends
		}
	})
}

// nextLeader returns the next leader Observe reports, skipping reports of
// no leader (a read between two terms).
func nextLeader(seen <-chan redlock.Leader) redlock.Leader {
	for l := range seen {
		if l.Term != 0 {
			return l
		}
	}
	return redlock.Leader{}
}

// A candidate's Campaign waits only as long as its context: then it fails
// with ErrNotObtained and ctx.Err(). NewElection refuses nodes without
// fencing, and Leader names a node that cannot be read.
func TestElectionErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(3)
		e := newElection(t, newClient(t, nodes))
		l, err := e.Campaign(context.Background(), "first")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = newElection(t, newClient(t, nodes)).Campaign(ctx, "second")
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NoError(t, l.Lease().Unlock(context.Background()))
		<-l.Context().Done() // Unlock of the lease ends the leadership too
		require.ErrorIs(t, context.Cause(l.Context()), redlock.ErrReleased)
		require.NoError(t, l.Resign(context.Background()), "released already")

		plains := []redlock.Node{plain{nodes[0]}, plain{nodes[1]}, plain{nodes[2]}}
		_, err = newClient(t, plains).NewElection(electionName)
		require.ErrorIs(t, err, redlock.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "does not implement FencingNode")

		fenceOnly := []redlock.Node{fencingOnly{nodes[0].(redlock.FencingNode)}, nodes[1], nodes[2]}
		_, err = newElection(t, newClient(t, fenceOnly)).Leader(context.Background())
		require.ErrorIs(t, err, redlock.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "node 0 (mem-0, redlock_test.fencingOnly) does not implement PeekNode")
	})
}

// A majority of masters restart empty while A leads. With the restart
// quarantine, B is elected only after A's leadership has ended (A's next
// renewal finds the keys gone: Done closes); with the quarantine switched
// off (knobs.NoQuarantine), B is elected at once, while A still believes it
// leads: the check catches two leaders, so it can fail.
func TestElectionLossIsObservedBeforeTheNextLeader(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprint("quarantine=", quarantine), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				knobs.NoQuarantine.Store(!quarantine)
				defer knobs.NoQuarantine.Store(false)
				ms, nodes := mem(3)
				a := newElection(t, newClient(t, nodes, redlock.WithRestartQuarantine(0)), redlock.WithTTL(time.Second))
				b := newElection(t, newClient(t, nodes, redlock.WithRestartQuarantine(0)), redlock.WithTTL(time.Second))
				time.Sleep(2 * time.Second) // the masters are older than the quarantine
				la, err := a.Campaign(context.Background(), "a")
				require.NoError(t, err)
				synctest.Wait() // every master holds a's key
				ms[0].Restart(false)
				ms[1].Restart(false)
				lb, err := b.Campaign(context.Background(), "b")
				require.NoError(t, err)
				select {
				case <-la.Context().Done():
					require.True(t, quarantine, "without the quarantine b is elected at once, before a's next renewal")
					assert.ErrorIs(t, context.Cause(la.Context()), redlock.ErrLockLost)
				default:
					require.False(t, quarantine, "b was elected while a still led")
					t.Logf("caught: b elected (term %d) while a (term %d) still leads", lb.Term(), la.Term())
				}
				require.NoError(t, lb.Resign(context.Background()))
				_ = la.Resign(context.Background())
			})
		})
	}
}

// fencingOnly hides every capability of a node but fencing.
type fencingOnly struct{ redlock.FencingNode }

// One leader at a time on real masters under faults: three candidates
// campaign, lead for 1.5 to 3 TTLs and resign; each time a leader is
// elected, the next fault of the cycle strikes: a majority of masters paused
// past the TTL (the leader's renewals fail, it loses its leadership), a
// master killed and restarted without its keys (the restart quarantine keeps
// it from voting), a minority paused; twice over. No two terms overlap:
// every leadership, lost or resigned, had ended (its Done observed) before
// the next leader was elected; terms increase with each election; and the
// majority pauses made leaders lose their leadership.
func TestElectionOneLeaderAtATimeUnderFaults(t *testing.T) {
	ms := startMasters(t, 3)
	const ttl = time.Second
	type term struct {
		who      int
		term     int64
		from, to time.Time
		lost     bool
	}
	var mu sync.Mutex
	var terms []term
	stop := make(chan struct{})
	elected := make(chan struct{}, 1) // a leader was elected just now
	var wg sync.WaitGroup
	for k := range 3 {
		c := realClient(t, ms.nodes, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithReleaseTimeout(100*time.Millisecond),
			redlock.WithRestartQuarantine(0))
		e := newElection(t, c, redlock.WithTTL(ttl), redlock.WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				l, err := e.Campaign(ctx, fmt.Sprint("candidate-", k))
				cancel()
				if err != nil {
					continue
				}
				from := time.Now()
				select {
				case elected <- struct{}{}:
				default:
				}
				// Lead for 1.5 to 3 TTLs: longer than a leader that a
				// majority pause cut off takes to learn it (under a TTL).
				hold := time.NewTimer(3*ttl/2 + time.Duration(rand.Int64N(int64(3*ttl/2))))
				lost := false
				select {
				case <-l.Context().Done():
					lost = errors.Is(context.Cause(l.Context()), redlock.ErrLockLost)
				case <-hold.C:
				case <-stop:
				}
				hold.Stop()
				to := time.Now() // Done observed, or Resign about to end it
				if err := l.Resign(context.Background()); err != nil && !lost {
					t.Logf("candidate %d: resign: %v", k, err)
				}
				mu.Lock()
				terms = append(terms, term{k, l.Term(), from, to, lost})
				mu.Unlock()
			}
		}()
	}
	// waitLeader waits for the next election.
	waitLeader := func() {
		select {
		case <-elected: // an older one
		default:
		}
		select {
		case <-elected:
		case <-time.After(30 * time.Second):
			t.Error("no leader elected within 30s")
		}
	}
	for round := range 2 {
		waitLeader() // a majority paused past the TTL: the leader's renewals fail
		r0, r1 := ms.pause(t, 0), ms.pause(t, 1)
		time.Sleep(3 * ttl / 2)
		r0()
		r1()
		waitLeader() // a master killed and restarted empty
		assert.NoError(t, ms.servers[2].Restart())
		waitLeader() // a minority paused
		r := ms.pause(t, round%2)
		time.Sleep(300 * time.Millisecond)
		r()
	}
	close(stop)
	wg.Wait()

	sort.Slice(terms, func(i, j int) bool { return terms[i].from.Before(terms[j].from) })
	lost := 0
	for i, tm := range terms {
		if tm.lost {
			lost++
		}
		if i == 0 {
			continue
		}
		prev := terms[i-1]
		assert.True(t, tm.from.After(prev.to), "candidate %d was elected (term %d) at %v, before candidate %d's term %d ended (lost: %v) at %v",
			tm.who, tm.term, tm.from.Format("15:04:05.000"), prev.who, prev.term, prev.lost, prev.to.Format("15:04:05.000"))
		assert.Greater(t, tm.term, prev.term, "terms increase with each election")
	}
	t.Logf("%d terms, %d lost to faults", len(terms), lost)
	assert.GreaterOrEqual(t, len(terms), 3, "leaders were elected, one after another")
	assert.GreaterOrEqual(t, lost, 2, "each majority pause made its leader lose its leadership")
}
