package redlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestHandOverKnobs: B waits (no notifications, a one-second backoff) while
// A holds; A's Unlock hands B the key on every node at the value of B's
// first attempt; B's next attempt takes it over. With
// knobs.NoGrantTakeover B's own handed keys refuse each of B's attempts,
// and B's Lock runs out of time (the keys live an hour). On memnode under
// virtual time, where every call finishes before its attempt is decided,
// so that no requeue releases the handed keys in passing
// (TestHandedKeyIsTakenOver is the same on real servers).
func TestHandOverKnobs(t *testing.T) {
	for _, knob := range []bool{false, true} {
		t.Run(map[bool]string{false: "taken-over", true: "NoGrantTakeover"}[knob], func(t *testing.T) {
			if knob {
				knobs.NoGrantTakeover.Store(true)
				defer knobs.NoGrantTakeover.Store(false)
			}
			synctest.Test(t, func(t *testing.T) {
				_, nodes := mem(3)
				a := newMutex(t, newClient(t, nodes), redlock.WithTTL(time.Hour))
				b := newMutex(t, newClient(t, queueOnly(nodes)), redlock.WithTTL(time.Hour), redlock.WithRetryBackoff(time.Second, time.Second))
				lease, err := a.TryLock(context.Background())
				require.NoError(t, err)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				got := lockAsync(ctx, b)
				synctest.Wait() // B's first attempt is refused: B is in every line
				require.NoError(t, lease.Unlock(context.Background()))
				r := <-got
				if knob {
					require.ErrorIs(t, r.err, context.DeadlineExceeded, "B's own handed keys refuse B")
					return
				}
				require.NoError(t, r.err, "B takes over the keys handed to it")
				require.NoError(t, r.lease.Unlock(context.Background()))
			})
		})
	}
}

// TestHoldOnGrants: a waiter holds the lock with the keys a release handed
// it (docs/handoff.md, the hold on grants), without another round: B waits
// (an hour's backoff) while A holds every master; A's Unlock hands B the
// key on each, and B's Lock returns at that instant having sent no acquire
// since. Its lease is the lock's (C is refused), it extends, and its Unlock
// frees every master and takes B out of every line. With knobs.NoGrantHold
// B takes the handed keys over with a round: one acquire per master.
func TestHoldOnGrants(t *testing.T) {
	for _, knob := range []bool{false, true} {
		t.Run(map[bool]string{false: "held", true: "NoGrantHold"}[knob], func(t *testing.T) {
			if knob {
				knobs.NoGrantHold.Store(true)
				defer knobs.NoGrantHold.Store(false)
			}
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				ms, nodes := mem(3)
				lease := holdEverywhere(t, nodes)
				clients, attempts := clocked(t, ms, 1)
				got := lockAsync(ctx, newMutex(t, clients[0], redlock.WithRetryBackoff(time.Hour, time.Hour)))
				synctest.Wait() // B waits in every line
				before := len(attempts()[0])
				released := time.Now()
				require.NoError(t, lease.Unlock(ctx))
				r := <-got
				require.NoError(t, r.err)
				assert.Equal(t, released, r.at, "woken by the release")
				synctest.Wait() // a round's last call may run after its quorum
				sent := len(attempts()[0]) - before
				if knob {
					assert.Equal(t, len(ms), sent, "B takes the handed keys over: one acquire per master")
				} else {
					assert.Zero(t, sent, "B holds with the hand-overs: no acquire after the release")
				}
				_, err := newMutex(t, newClient(t, nodes)).TryLock(ctx)
				require.ErrorIs(t, err, redlock.ErrNotObtained, "B holds the lock")
				require.NoError(t, r.lease.Extend(ctx))
				require.NoError(t, r.lease.Unlock(ctx))
				synctest.Wait()
				for i, m := range ms {
					assert.Empty(t, m.Keys()[lockName], "master %d: B's Unlock released its key", i)
					assert.Empty(t, m.Line(lockName), "master %d: B is out of the line", i)
				}
			})
		})
	}
}

// TestHoldLeavesTheOtherLines: A holds masters 0 and 1, O holds master 2
// alone; B waits in all three lines. A's Unlock hands B masters 0 and 1, a
// quorum: B holds with them, and leaves master 2's line only (a leave where
// it counted a hand-over would release its own key). C, on all three, is
// refused. With knobs.GrantHoldLeaveAll B leaves every line, releasing the
// keys it holds with: C takes masters 0 and 1 while B holds (two holders).
func TestHoldLeavesTheOtherLines(t *testing.T) {
	for _, knob := range []bool{false, true} {
		t.Run(map[bool]string{false: "held", true: "GrantHoldLeaveAll"}[knob], func(t *testing.T) {
			if knob {
				knobs.GrantHoldLeaveAll.Store(true)
				defer knobs.GrantHoldLeaveAll.Store(false)
			}
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				ms, nodes := mem(3)
				_, err := newMutex(t, newClient(t, nodes[2:])).TryLock(ctx)
				require.NoError(t, err)
				lease, err := newMutex(t, newClient(t, nodes[:2], redlock.WithQuorum(2))).TryLock(ctx)
				require.NoError(t, err)
				synctest.Wait()
				got := lockAsync(ctx, newMutex(t, newClient(t, nodes), redlock.WithRetryBackoff(time.Hour, time.Hour)))
				synctest.Wait() // B waits in every line
				require.NoError(t, lease.Unlock(ctx))
				r := <-got
				require.NoError(t, r.err)
				synctest.Wait() // B's removals are done
				assert.Empty(t, ms[2].Line(lockName), "B left master 2's line")
				_, err = newMutex(t, newClient(t, nodes)).TryLock(ctx)
				if knob {
					assert.NoError(t, err, "B's leaves released the keys it held with: C got masters 0 and 1 (two holders)")
					return
				}
				require.ErrorIs(t, err, redlock.ErrNotObtained, "B holds masters 0 and 1")
				require.NoError(t, r.lease.Unlock(ctx))
			})
		})
	}
}

// TestHoldReleaseHandsOn: B and C wait, B first; A's Unlock hands B the
// key and B holds with it; B's Unlock takes B out of the lines and hands C
// the key, and C holds at that instant. With knobs.NoGrantHoldRelease B's
// Unlock leaves B first in every line: its release names B and hands
// nothing, and C waits for its backoff.
func TestHoldReleaseHandsOn(t *testing.T) {
	for _, knob := range []bool{false, true} {
		t.Run(map[bool]string{false: "handed on", true: "NoGrantHoldRelease"}[knob], func(t *testing.T) {
			if knob {
				knobs.NoGrantHoldRelease.Store(true)
				defer knobs.NoGrantHoldRelease.Store(false)
			}
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				_, nodes := mem(3)
				lease := holdEverywhere(t, nodes)
				b := lockAsync(ctx, newMutex(t, newClient(t, nodes), redlock.WithRetryBackoff(time.Hour, time.Hour)))
				synctest.Wait()
				time.Sleep(time.Millisecond)
				c := lockAsync(ctx, newMutex(t, newClient(t, nodes), redlock.WithRetryBackoff(time.Hour, time.Hour)))
				synctest.Wait()
				require.NoError(t, lease.Unlock(ctx))
				rb := <-b
				require.NoError(t, rb.err)
				released := time.Now()
				require.NoError(t, rb.lease.Unlock(ctx))
				rc := <-c
				require.NoError(t, rc.err)
				if knob {
					assert.Greater(t, rc.at.Sub(released), time.Minute, "C waited for its backoff")
				} else {
					assert.Equal(t, released, rc.at, "B's Unlock handed C the key")
				}
				require.NoError(t, rc.lease.Unlock(ctx))
			})
		})
	}
}

// TestHoldExpiredUnlockHandsOn: B holds a fair lock with the keys A's
// release handed it, and lets its lease expire (keys gone, no renewal);
// C waits behind it. B's Unlock finds its value gone on every master, so
// its releases take B out of no line: B's LeaveQueue there does, and hands
// C the key at that instant (without it C, behind B's entry, would wait for
// its backoff or the entry's expiry).
func TestHoldExpiredUnlockHandsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, nodes := mem(3)
		opts := []redlock.LockOption{redlock.WithFairQueue(), redlock.WithTTL(time.Second), redlock.WithRetryBackoff(time.Hour, time.Hour)}
		lease, err := newMutex(t, newClient(t, nodes), opts...).TryLock(ctx)
		require.NoError(t, err)
		synctest.Wait()
		b := lockAsync(ctx, newMutex(t, newClient(t, nodes), opts...))
		synctest.Wait()
		time.Sleep(time.Millisecond)
		c := lockAsync(ctx, newMutex(t, newClient(t, nodes), opts...))
		synctest.Wait()
		require.NoError(t, lease.Unlock(ctx))
		rb := <-b
		require.NoError(t, rb.err)
		time.Sleep(2 * time.Second) // B's lease and keys expire
		<-rb.lease.Done()
		released := time.Now()
		_ = rb.lease.Unlock(ctx) // its lock was lost: the error says so
		rc := <-c
		require.NoError(t, rc.err)
		assert.Equal(t, released, rc.at, "B's Unlock took B out of the lines and handed C the key")
		require.NoError(t, rc.lease.Unlock(ctx))
	})
}

// A waiter that holds on grants hears its turn, so it does not poll: its
// fallback is its longest backoff (up to a quarter of the TTL) from the
// first failed attempt (10ms to 10s here, TTL a minute, on synctest's
// virtual clock). Two waiters in line behind a holder
// for 4 seconds make their first attempt and the look once their watch
// started, nothing more (exponential from 10ms they made about ten each,
// and each attempt changes the value a release hands the key at); then
// each holds with the hand-overs, in order, without another acquire.
func TestHoldWaiterDoesNotPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ms, nodes := mem(3)
		lease := holdEverywhere(t, nodes)
		clients, attempts := clocked(t, ms, 2)
		var got []<-chan lockResult
		for _, c := range clients {
			got = append(got, lockAsync(ctx, newMutex(t, c, redlock.WithTTL(time.Minute), redlock.WithRetryBackoff(10*time.Millisecond, 10*time.Second))))
			synctest.Wait() // B is in every line before C arrives
			time.Sleep(time.Millisecond)
		}
		time.Sleep(4 * time.Second)
		before := attempts()
		for c, at := range before {
			assert.LessOrEqual(t, len(at), 2*len(ms), "waiter %d's acquires in 4s: its first attempt and one look", c)
		}
		require.NoError(t, lease.Unlock(ctx))
		for c, ch := range got {
			r := <-ch
			require.NoError(t, r.err)
			synctest.Wait()
			assert.Equal(t, len(before[c]), len(attempts()[c]), "waiter %d holds with the hand-overs: no acquire", c)
			require.NoError(t, r.lease.Unlock(ctx))
		}
	})
}

// A waiter that holds on grants sleeps its longest backoff, refused for a
// held lock; when one node hands it the key and the others never do (the
// lines differed as the keys were handed on: at a burst's start, waiters
// each handed some masters' keys, all of them asleep, nobody to release:
// cmd/bursttrace's stall), it makes its next attempt after its ordinary
// backoff, counted from that hand-over, which takes the handed key over.
// Here the holder's key on node 0 alone is released (the others stay the
// holder's), so the waiter is handed one node of three. With
// knobs.HandOverKeepsSleep it sleeps on: no attempt for seconds.
func TestPartialHandOverShortensTheSleep(t *testing.T) {
	for _, knob := range []bool{false, true} {
		t.Run(map[bool]string{false: "shortened", true: "HandOverKeepsSleep"}[knob], func(t *testing.T) {
			if knob {
				knobs.HandOverKeepsSleep.Store(true)
				defer knobs.HandOverKeepsSleep.Store(false)
			}
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				ms, nodes := mem(3)
				lease := holdEverywhere(t, nodes)
				clients, attempts := clocked(t, ms, 1)
				// Its longest backoff: min(10s, TTL/4), jittered down to 5s.
				got := lockAsync(ctx, newMutex(t, clients[0], redlock.WithTTL(time.Minute), redlock.WithRetryBackoff(10*time.Millisecond, 10*time.Second)))
				synctest.Wait() // refused everywhere: it sleeps its longest backoff
				time.Sleep(time.Second)
				before := len(attempts()[0])
				handed := time.Now()
				value := ms[0].Keys()[lockName]
				ok, err := ms[0].Release(ctx, lockName, value, 0) // node 0 hands the waiter the key
				require.NoError(t, err)
				require.True(t, ok)
				time.Sleep(time.Second)
				synctest.Wait()
				at := attempts()[0]
				if knob {
					assert.Len(t, at, before, "no attempt within a second of the hand-over")
				} else {
					require.Greater(t, len(at), before, "an attempt within a second of the hand-over")
					assert.Less(t, at[before].Sub(handed), time.Second)
				}
				require.NoError(t, lease.Unlock(ctx)) // nodes 1 and 2 hand it the key
				r := <-got
				require.NoError(t, r.err)
				require.NoError(t, r.lease.Unlock(ctx))
			})
		})
	}
}

// deafNode is a memnode whose notifications can be dropped (deaf), as a
// broken watch connection drops them, and whose watchers the test can tell
// that some were lost (resync), as redisnode does once it listens again.
type deafNode struct {
	*memnode.Node
	deaf *atomic.Bool
	mu   sync.Mutex
	fns  []func(string)
}

func (n *deafNode) Watch(ctx context.Context, key, group string, fn func(string)) (func(), error) {
	n.mu.Lock()
	n.fns = append(n.fns, fn)
	n.mu.Unlock()
	return n.Node.Watch(ctx, key, group, func(msg string) {
		if !n.deaf.Load() {
			fn(msg)
		}
	})
}

func (n *deafNode) resync() {
	n.mu.Lock()
	fns := slices.Clone(n.fns)
	n.mu.Unlock()
	for _, fn := range fns {
		fn("\n")
	}
}

// A waiter whose notifications were lost (the release handed it the keys
// while its watch connection was down) tries again as soon as its nodes
// say they listen again (a lone newline: QueueNode.Watch), and takes the
// handed keys over, instead of sleeping its backoff (an hour here).
func TestResyncWakesAWaiterThatLostItsNotifications(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ms, nodes := mem(3)
		lease := holdEverywhere(t, nodes)
		var deaf atomic.Bool
		deafs := make([]*deafNode, len(ms))
		wrapped := make([]redlock.Node, len(ms))
		for i, m := range ms {
			deafs[i] = &deafNode{Node: m, deaf: &deaf}
			wrapped[i] = deafs[i]
		}
		got := lockAsync(ctx, newMutex(t, newClient(t, wrapped), redlock.WithRetryBackoff(time.Hour, time.Hour)))
		synctest.Wait() // B waits in every line
		deaf.Store(true)
		require.NoError(t, lease.Unlock(ctx))
		synctest.Wait()
		select {
		case r := <-got:
			t.Fatalf("B got the lock without hearing of it: %v", r.err)
		default:
		}
		for i, m := range ms {
			assert.NotEmpty(t, m.Keys()[lockName], "master %d handed B the key", i)
		}
		deaf.Store(false)
		resynced := time.Now()
		for _, d := range deafs {
			d.resync()
		}
		r := <-got
		require.NoError(t, r.err)
		assert.Equal(t, resynced, r.at, "B tried again when its nodes listened again, not after its backoff")
		require.NoError(t, r.lease.Unlock(ctx))
	})
}

// cutNode is a deafNode whose link can be cut (cut: its acquires, after
// refuseAfter, and removals are refused unsent, as over a refused
// connection), whose Watch
// waits for gate when it has one, and whose first Watch can be refused
// (refuseWatch).
type cutNode struct {
	*deafNode
	cut         *atomic.Bool
	gate        chan struct{}
	refuseWatch bool
	refuseAfter time.Duration
	watches     atomic.Int32
}

var errRefused = fmt.Errorf("%w: dial tcp: connect: connection refused", redlock.ErrNotSent)

func (n *cutNode) Watch(ctx context.Context, key, group string, fn func(string)) (func(), error) {
	if n.watches.Add(1) == 1 && n.refuseWatch {
		return nil, errRefused
	}
	if n.gate != nil {
		<-n.gate
	}
	return n.deafNode.Watch(ctx, key, group, fn)
}

func (n *cutNode) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, w redlock.Waiter) (bool, int64, error) {
	if n.cut.Load() {
		time.Sleep(n.refuseAfter)
		return false, 0, errRefused
	}
	return n.deafNode.AcquireQueued(ctx, key, value, ttl, w)
}

func (n *cutNode) LeaveQueue(ctx context.Context, key string, w redlock.Waiter) error {
	if n.cut.Load() {
		return errRefused
	}
	return n.deafNode.LeaveQueue(ctx, key, w)
}

// A waiter whose attempt could not reach its nodes is woken by their word
// that they listen again, as one they refused for a held lock is: B's
// link breaks as its watch starts (after its first attempt), so its fresh
// look is refused unsent by nodes 0 and 1, which decides it (node 2 has
// not replied: a node that may have been held); A's release hands B the
// keys meanwhile, unheard. Once nodes 0 and 1 listen again (node 2 not
// yet), B tries again at once and takes the keys over, instead of sleeping
// its backoff (an hour).
func TestResyncWakesAWaiterItsNodesCouldNotHear(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ms, nodes := mem(3)
		lease := holdEverywhere(t, nodes)
		var deaf, cut atomic.Bool
		gate := make(chan struct{})
		cuts := make([]*cutNode, len(ms))
		wrapped := make([]redlock.Node, len(ms))
		for i, m := range ms {
			cuts[i] = &cutNode{deafNode: &deafNode{Node: m, deaf: &deaf}, cut: &cut, gate: gate, refuseAfter: time.Duration(i) * time.Millisecond}
			wrapped[i] = cuts[i]
		}
		got := lockAsync(ctx, newMutex(t, newClient(t, wrapped), redlock.WithRetryBackoff(time.Hour, time.Hour)))
		synctest.Wait() // B's first attempt is over (every call); its watch is starting
		cut.Store(true)
		deaf.Store(true)
		close(gate)
		time.Sleep(10 * time.Millisecond) // B's fresh look was refused unsent; it sleeps
		synctest.Wait()
		require.NoError(t, lease.Unlock(ctx))
		synctest.Wait()
		select {
		case r := <-got:
			t.Fatalf("B got the lock while cut off: %v", r.err)
		default:
		}
		for i, m := range ms {
			assert.NotEmpty(t, m.Keys()[lockName], "master %d handed B the key", i)
		}
		cut.Store(false)
		deaf.Store(false)
		resynced := time.Now()
		cuts[0].resync()
		cuts[1].resync()
		r := <-got
		require.NoError(t, r.err)
		assert.Equal(t, resynced, r.at, "B tried again when its nodes listened again, not after its backoff")
		require.NoError(t, r.lease.Unlock(ctx))
	})
}

// A call whose watch could not start (every node refused it at B's first
// failed attempt) starts it at a later failed attempt, and then hears its
// turn: A's release hands B the keys and B holds with them at once. With
// the watch tried at the first failed attempt only, B polls alone with a
// doubling backoff and takes the keys over only at its next attempt.
func TestAWatchThatCouldNotStartIsStartedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ms, nodes := mem(3)
		lease, err := newMutex(t, newClient(t, nodes), redlock.WithTTL(time.Minute)).TryLock(ctx)
		require.NoError(t, err)
		var deaf, cut atomic.Bool
		wrapped := make([]redlock.Node, len(ms))
		for i, m := range ms {
			wrapped[i] = &cutNode{deafNode: &deafNode{Node: m, deaf: &deaf}, cut: &cut, refuseWatch: true}
		}
		got := lockAsync(ctx, newMutex(t, newClient(t, wrapped), redlock.WithTTL(time.Minute), redlock.WithRetryBackoff(time.Second, time.Hour)))
		time.Sleep(5 * time.Second) // B's backoff doubles from a second
		synctest.Wait()
		select {
		case r := <-got:
			t.Fatalf("B got the lock while A held it: %v", r.err)
		default:
		}
		released := time.Now()
		require.NoError(t, lease.Unlock(ctx))
		r := <-got
		require.NoError(t, r.err)
		assert.Equal(t, released, r.at, "B heard the hand-overs of A's release")
		require.NoError(t, r.lease.Unlock(ctx))
	})
}

// A node that said yes after the attempt was decided is free for the next
// one (rolled back), as one that said yes on time is. B's client
// quarantines master 0 (new to it), so its yes votes do not count. A
// releases on masters 0 and 2 at once and on master 1 5ms later; B, woken
// by the first two hand-overs, takes master 0's key over (a yes that does
// not count) and is refused by master 1, which decides its attempt while
// master 2 (2ms per acquire) has not replied; master 2 then says yes, late,
// and is rolled back. Master 1's hand-over is then the only report: with
// master 2 counted free, it wakes B, which takes masters 1 and 2 (B holds
// within milliseconds); with master 2 not counted, B slept with the lock
// free until its backoff (2-4s here, shortened by the hand-overs; its
// longest, 15s, without them), as on real servers under load
// (TestHoldOnGrantsOnRealServers/quarantine: a minute).
func TestALateYesCountsAsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ms, _ := mem(3)
		opts := []redlock.LockOption{redlock.WithTTL(time.Minute), redlock.WithRetryBackoff(time.Second, time.Minute)}
		an := []redlock.Node{ms[0], slowCalls{Node: ms[1], release: 5 * time.Millisecond}, ms[2]}
		a := newMutex(t, newClient(t, an), opts...)
		bn := []redlock.Node{ms[0], ms[1], slowCalls{Node: ms[2], acquire: 2 * time.Millisecond}}
		b := newMutex(t, newClient(t, bn, redlock.WithRestartQuarantine(time.Hour, ms[1].Addr(), ms[2].Addr())), opts...)

		lease, err := a.TryLock(ctx)
		require.NoError(t, err)
		got := lockAsync(ctx, b)
		time.Sleep(100 * time.Millisecond) // B waits in every line
		synctest.Wait()
		released := time.Now()
		require.NoError(t, lease.Unlock(ctx))
		r := <-got
		require.NoError(t, r.err)
		assert.Less(t, r.at.Sub(released), time.Second, "B woke by master 1's hand-over, not by its backoff")
		require.NoError(t, r.lease.Unlock(ctx))
	})
}

// slowCalls is a memnode whose queued acquires, or releases, take delay
// (virtual time).
type slowCalls struct {
	*memnode.Node
	acquire, release time.Duration
}

func (n slowCalls) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, w redlock.Waiter) (bool, int64, error) {
	time.Sleep(n.acquire)
	return n.Node.AcquireQueued(ctx, key, value, ttl, w)
}

func (n slowCalls) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	time.Sleep(n.release)
	return n.Node.Release(ctx, key, value, guard)
}

// A call joins its client's listening watch at its first attempt, so the
// hand-overs reported while that attempt runs count. B's client still
// listens after B's first Lock (the watch lingers). B's second Lock's
// first attempt is refused at once by master 1 and after 10ms by masters
// 0 and 2. A's release, at 5ms, hands B master 1 at once, while that
// attempt runs, master 0 15ms later and master 2 200ms later. B holds with
// masters 1 and 0 at 20ms; had the report of 5ms named a waiter nobody had
// registered yet, B would have held only at 205ms, with masters 0 and 2.
func TestFirstAttemptHearsHandOvers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ms, _ := mem(3)
		opts := []redlock.LockOption{redlock.WithTTL(time.Minute), redlock.WithRetryBackoff(time.Hour, time.Hour)}
		an := []redlock.Node{slowCalls{Node: ms[0], release: 15 * time.Millisecond}, ms[1], slowCalls{Node: ms[2], release: 200 * time.Millisecond}}
		a := newMutex(t, newClient(t, an), opts...)
		bn := []redlock.Node{slowCalls{Node: ms[0], acquire: 10 * time.Millisecond}, ms[1], slowCalls{Node: ms[2], acquire: 10 * time.Millisecond}}
		b := newMutex(t, newClient(t, bn), opts...)

		lease, err := a.TryLock(ctx)
		require.NoError(t, err)
		synctest.Wait()
		got := lockAsync(ctx, b)
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, lease.Unlock(ctx))
		r := <-got // B's first Lock: its watch starts
		require.NoError(t, r.err)
		require.NoError(t, r.lease.Unlock(ctx))
		time.Sleep(500 * time.Millisecond) // A's last release is done; B's watch lingers (a second)

		lease, err = a.TryLock(ctx)
		require.NoError(t, err)
		synctest.Wait()
		start := time.Now()
		got = lockAsync(ctx, b)
		time.Sleep(5 * time.Millisecond)
		go func() { _ = lease.Unlock(ctx) }()
		r = <-got
		require.NoError(t, r.err)
		assert.Equal(t, 20*time.Millisecond, r.at.Sub(start), "B held with masters 1 and 0")
		require.NoError(t, r.lease.Unlock(ctx))
	})
}

// holdEverywhere takes the lock with a new client over nodes (memnode,
// inside a synctest bubble) and waits until its TryLock's calls have
// reached every node: TryLock returns at a quorum, and a straggling call
// could meet a waiter's acquire first.
func holdEverywhere(t *testing.T, nodes []redlock.Node) *redlock.Lease {
	t.Helper()
	lease, err := newMutex(t, newClient(t, nodes)).TryLock(context.Background())
	require.NoError(t, err)
	synctest.Wait()
	return lease
}
