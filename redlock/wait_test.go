package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// plainNodes hides every optional capability of nodes (QueueNode,
// FencingNode, ...): a client over them can only poll.
func plainNodes(nodes []redlock.Node) []redlock.Node {
	out := make([]redlock.Node, len(nodes))
	for i, n := range nodes {
		out[i] = struct{ redlock.Node }{n}
	}
	return out
}

// queueOnly keeps the nodes' waiting lines but refuses every Watch: a fair
// client that polls.
func queueOnly(nodes []redlock.Node) []redlock.Node {
	out := make([]redlock.Node, len(nodes))
	for i, n := range nodes {
		out[i] = unwatched{n.(redlock.QueueNode)}
	}
	return out
}

// unwatched is a QueueNode that cannot watch.
type unwatched struct{ redlock.QueueNode }

func (unwatched) Watch(context.Context, string, string, func(string)) (func(), error) {
	return nil, errors.New("unwatched: no release notifications")
}

// lockResult is what a Lock call in a goroutine returned, and when.
type lockResult struct {
	lease *redlock.Lease
	err   error
	at    time.Time
}

func lockAsync(ctx context.Context, m *redlock.Mutex) <-chan lockResult {
	out := make(chan lockResult, 1)
	go func() {
		l, err := m.Lock(ctx)
		out <- lockResult{l, err, time.Now()}
	}()
	return out
}

// releaseTo lets the waiting Lock behind got fall asleep, releases lease a
// second later (virtual time), and returns what that Lock returned and how
// long after the release it did.
func releaseTo(t *testing.T, lease *redlock.Lease, got <-chan lockResult) (lockResult, time.Duration) {
	t.Helper()
	synctest.Wait() // the waiter sleeps its backoff
	time.Sleep(time.Second)
	released := time.Now()
	require.NoError(t, lease.Unlock(context.Background()))
	r := <-got
	require.NoError(t, r.err)
	return r, r.at.Sub(released)
}

// A waiting Lock is woken by the holder's release instead of sleeping out
// its backoff (an hour here, on synctest's virtual clock): it acquires at
// the instant of the Unlock. Over nodes that cannot notify, the same call
// sleeps its hour.
func TestLockWokenByRelease(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run(map[bool]string{true: "notifying nodes", false: "polling only"}[notify], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, nodes := mem(3)
				waitNodes := nodes
				if !notify {
					waitNodes = plainNodes(nodes)
				}
				holder := newMutex(t, newClient(t, nodes))
				waiter := newMutex(t, newClient(t, waitNodes), redlock.WithRetryBackoff(time.Hour, time.Hour))
				lease, err := holder.TryLock(context.Background())
				require.NoError(t, err)
				r, waited := releaseTo(t, lease, lockAsync(context.Background(), waiter))
				if notify {
					assert.Zero(t, waited, "woken by the release")
				} else {
					assert.GreaterOrEqual(t, waited, 29*time.Minute, "polled after its backoff")
				}
				require.NoError(t, r.lease.Unlock(context.Background()))
			})
		})
	}
}

// A release wakes one waiting call per client (the oldest), not every one:
// with two calls of one client waiting, the first release lets the older
// one acquire and leaves the younger asleep; the next release wakes it.
func TestOneWaiterWokenPerClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(3)
		holder := newMutex(t, newClient(t, nodes))
		waiters := newClient(t, nodes)
		m := newMutex(t, waiters, redlock.WithRetryBackoff(time.Hour, time.Hour))
		lease, err := holder.TryLock(context.Background())
		require.NoError(t, err)
		synctest.Wait() // the holder holds every node (see TestOneWakeUpPerReleaseAcrossClients)
		first := lockAsync(context.Background(), m)
		synctest.Wait()
		time.Sleep(time.Millisecond)
		second := lockAsync(context.Background(), m)
		synctest.Wait()
		require.NoError(t, lease.Unlock(context.Background()))
		r := <-first
		require.NoError(t, r.err)
		synctest.Wait()
		select {
		case r2 := <-second:
			t.Fatalf("the second waiter returned too (err %v): a release woke both", r2.err)
		default:
		}
		released := time.Now()
		require.NoError(t, r.lease.Unlock(context.Background()))
		r2 := <-second
		require.NoError(t, r2.err)
		assert.Equal(t, released, r2.at, "woken by the second release")
		require.NoError(t, r2.lease.Unlock(context.Background()))
	})
}

// A node that had not replied when a waiter's attempt was decided may have
// been held: its release report counts. Node 2 is held by another client
// (alone on it), nodes 0 and 1 by the holder; node 1 is slow, so the
// waiter's attempts are decided by the refusals of 0 and 2 before node 1
// answers. The holder's release is reported by 0 and 1 only: counting 1's
// report wakes the waiter at once (it takes 0 and 1); ignoring it (a node
// without a reply counted as not held) left it asleep for its hour
// (the release that freed a quorum was lost as a wake-up).
func TestWokenByANodeThatHadNotReplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		other := newMutex(t, newClient(t, nodes[2:]))
		_, err := other.TryLock(context.Background())
		require.NoError(t, err)
		holder := newMutex(t, newClient(t, nodes))
		lease, err := holder.TryLock(context.Background())
		require.NoError(t, err)
		ms[1].SetDelay(10 * time.Millisecond)
		waiter := newMutex(t, newClient(t, nodes), redlock.WithRetryBackoff(time.Hour, time.Hour))
		r, waited := releaseTo(t, lease, lockAsync(context.Background(), waiter))
		assert.Less(t, waited, time.Minute, "woken by the release, not by its backoff")
		require.NoError(t, r.lease.Unlock(context.Background()))
	})
}

// acquireClock is a memnode that notes when each acquire (Acquire,
// AcquireQueued, AcquireHold) reaches it, per client (one acquireClock per
// client and node).
type acquireClock struct {
	*memnode.Node
	at *[]time.Time // shared by the client's nodes; under mu
	mu *sync.Mutex
}

func (n acquireClock) note() {
	n.mu.Lock()
	*n.at = append(*n.at, time.Now())
	n.mu.Unlock()
}

func (n acquireClock) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	n.note()
	return n.Node.Acquire(ctx, key, value, ttl)
}

func (n acquireClock) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, w redlock.Waiter) (bool, int64, error) {
	n.note()
	return n.Node.AcquireQueued(ctx, key, value, ttl, w)
}

func (n acquireClock) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	n.note()
	return n.Node.AcquireHold(ctx, key, h, ttl)
}

// clocked returns clients whose nodes note each acquire's time per client.
func clocked(t *testing.T, ms []*memnode.Node, clients int) ([]*redlock.Client, func() [][]time.Time) {
	var mu sync.Mutex
	ats := make([][]time.Time, clients)
	cs := make([]*redlock.Client, clients)
	for c := range cs {
		wrapped := make([]redlock.Node, len(ms))
		for i, m := range ms {
			wrapped[i] = acquireClock{Node: m, at: &ats[c], mu: &mu}
		}
		cs[c] = newClient(t, wrapped)
	}
	return cs, func() [][]time.Time {
		mu.Lock()
		defer mu.Unlock()
		out := make([][]time.Time, len(ats))
		for c := range ats {
			out[c] = append([]time.Time(nil), ats[c]...)
		}
		return out
	}
}

// One wake-up per release across clients: three clients wait for a plain
// lock (arriving 1ms apart), each polling once an hour; a release names
// the line's first waiter and only its client attempts, and each Unlock
// wakes the next one, in the order they arrived, at the instant of the
// release.
func TestOneWakeUpPerReleaseAcrossClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		holder := newMutex(t, newClient(t, nodes))
		lease, err := holder.TryLock(context.Background())
		require.NoError(t, err)
		// TryLock returns at a quorum: its third call may still be on its
		// way, and a waiter's acquire could take that node first. Then a
		// release wakes the first waiter as soon as one node reports
		// (with the free one they make a quorum), and its attempt may reach
		// the other node before the release does; its removal from that
		// line then hands the key on and wakes the second waiter (a wake-up
		// the protocol allows, not the one this test is about).
		synctest.Wait()
		clients, attempts := clocked(t, ms, 3)
		got := make([]<-chan lockResult, len(clients))
		for c, cl := range clients {
			got[c] = lockAsync(context.Background(), newMutex(t, cl, redlock.WithRetryBackoff(time.Hour, time.Hour)))
			synctest.Wait() // it waits in line
			time.Sleep(time.Millisecond)
		}
		for c := range clients {
			before := attempts()
			released := time.Now()
			require.NoError(t, lease.Unlock(context.Background()))
			r := <-got[c]
			require.NoError(t, r.err, "client %d", c)
			assert.Equal(t, released, r.at, "client %d: woken by the release, in arrival order", c)
			synctest.Wait()
			after := attempts()
			for o := range clients {
				if o != c && len(after[o]) != len(before[o]) {
					t.Errorf("release %d woke client %d too (%d acquires after it): want one wake-up per release", c, o, len(after[o])-len(before[o]))
				}
			}
			lease = r.lease
		}
		require.NoError(t, lease.Unlock(context.Background()))
	})
}

// A shared lock's waiters have no line: a release wakes a waiting call in
// every client with one, and their attempts are scattered over a few
// attempt durations instead of all starting at the instant of the release
// (at once they split the nodes' votes, fail together and roll back, and
// the rollbacks' reports wake them all again). Three clients wait for a
// one-holder semaphore, masters 1ms away: the first attempt each makes
// after the release must not all start at one instant.
func TestWokenHoldWaitersAreScattered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		for _, m := range ms {
			m.SetDelay(time.Millisecond)
		}
		sem := func(c *redlock.Client) *redlock.Mutex {
			s, err := c.NewSemaphore("sem", 1, redlock.WithRetryBackoff(time.Hour, time.Hour))
			require.NoError(t, err)
			return s
		}
		lease, err := sem(newClient(t, nodes)).TryLock(context.Background())
		require.NoError(t, err)
		clients, attempts := clocked(t, ms, 3)
		got := make(chan lockResult, len(clients))
		for _, cl := range clients {
			s := sem(cl)
			go func() {
				l, err := s.Lock(context.Background())
				got <- lockResult{l, err, time.Now()}
			}()
		}
		synctest.Wait() // every waiter sleeps its backoff
		time.Sleep(time.Second)
		released := time.Now()
		before := attempts()
		require.NoError(t, lease.Unlock(context.Background()))
		for range clients { // each holder's Unlock wakes the next
			r := <-got
			require.NoError(t, r.err)
			require.Less(t, r.at.Sub(released), time.Minute, "woken by a release")
			require.NoError(t, r.lease.Unlock(context.Background()))
		}
		after := attempts()
		firsts := map[time.Time]bool{}
		for c := range clients {
			require.Greater(t, len(after[c]), len(before[c]), "client %d made no attempt after the release", c)
			firsts[after[c][len(before[c])]] = true
		}
		assert.Greater(t, len(firsts), 1, "the three woken clients attempted at one instant: %v", firsts)
	})
}
