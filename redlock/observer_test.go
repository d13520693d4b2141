package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/obslabel"
	"github.com/quorumlock/quorumlock/redlock"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	starts []redlock.OpEvent
	dones  []redlock.OpEvent
	nodes  []redlock.NodeEvent
	ends   []redlock.LeaseEndEvent
	states []redlock.NodeStateEvent
}

var _ redlock.Observer = (*recorder)(nil)

type ctxKey struct{}

func (r *recorder) OpStart(ctx context.Context, e redlock.OpEvent) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, e)
	return context.WithValue(ctx, ctxKey{}, string(e.Op)+" "+e.Lock.Name)
}

func (r *recorder) OpDone(_ context.Context, e redlock.OpEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dones = append(r.dones, e)
}

func (r *recorder) NodeCall(_ context.Context, e redlock.NodeEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = append(r.nodes, e)
}

func (r *recorder) LeaseEnd(_ context.Context, e redlock.LeaseEndEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ends = append(r.ends, e)
}

func (r *recorder) NodeState(_ context.Context, e redlock.NodeStateEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, e)
}

// runs returns the NodeState events of server runs met (RunID set), and
// quarantines those of them that started a quarantine; r.mu must be held.
func (r *recorder) runs() (runs, quarantines []redlock.NodeStateEvent) {
	for _, e := range r.states {
		if e.RunID == "" {
			continue
		}
		runs = append(runs, e)
		if e.Quarantine > 0 {
			quarantines = append(quarantines, e)
		}
	}
	return runs, quarantines
}

// backlog returns the NodeState events of backlog changes (no RunID); r.mu
// must be held.
func (r *recorder) backlog() []redlock.NodeStateEvent {
	var out []redlock.NodeStateEvent
	for _, e := range r.states {
		if e.RunID == "" {
			out = append(out, e)
		}
	}
	return out
}

// votes counts the node calls of op by their label (obslabel.Vote: the
// one the logger and the observe modules use).
func (r *recorder) votes(op redlock.Op) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, e := range r.nodes {
		if e.Op == op {
			out[obslabel.Vote(e.Err)]++
		}
	}
	return out
}

// done returns the OpDone events of op.
func (r *recorder) done(op redlock.Op) []redlock.OpEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []redlock.OpEvent
	for _, e := range r.dones {
		if e.Op == op {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) leaseEnds() []redlock.LeaseEndEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]redlock.LeaseEndEvent(nil), r.ends...)
}

// outcome is an operation's label (obslabel.Outcome).
func outcome(e redlock.OpEvent) string { return obslabel.Outcome(e.Err) }

// One fenced lock cycle: the acquisition (its attempts, its fencing token:
// a new lock's starts an epoch; the next one goes on from the counters when
// a quorum of them is there), every node's vote, the release and the
// lease's end.
func TestObserverSeesALockCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(3)
		rec := &recorder{}
		c := newClient(t, nodes, redlock.WithObserver(rec))
		m := newMutex(t, c, redlock.WithFencing())
		var prev int64
		for cycle := range 2 {
			lease, err := m.Lock(context.Background())
			require.NoError(t, err)
			time.Sleep(time.Second)
			require.NoError(t, lease.Unlock(context.Background()))
			synctest.Wait()

			acq := rec.done(redlock.OpAcquire)
			require.Len(t, acq, cycle+1)
			a := acq[cycle]
			assert.Equal(t, "ok", outcome(a))
			assert.Equal(t, 1, a.Attempts)
			assert.Equal(t, fenceOf(t, lease), a.Fence)
			assert.Equal(t, redlock.LockInfo{Name: lockName, Shape: "mutex", Fenced: true}, a.Lock)
			assert.NoError(t, a.Err)
			// A new lock's first token starts an epoch. The next is max+1
			// when a quorum of the counters it read exist: the write-back
			// may have reached a node before its acquire (it then says
			// not held), leaving that node without a counter, and the
			// token then starts a new epoch from the clock.
			if cycle == 0 || a.FenceEpoch {
				assert.True(t, a.FenceEpoch)
				assert.Greater(t, a.Fence, prev+1, "an epoch starts from the clock")
			} else {
				assert.Equal(t, prev+1, a.Fence)
			}
			prev = a.Fence

			rel := rec.done(redlock.OpRelease)
			require.Len(t, rel, cycle+1)
			assert.Equal(t, "ok", outcome(rel[cycle]))

			ends := rec.leaseEnds()
			require.Len(t, ends, cycle+1)
			assert.NoError(t, ends[cycle].Err, "released")
			assert.False(t, ends[cycle].Expired)
			assert.Equal(t, time.Second, ends[cycle].Held, "virtual time: held exactly the second slept")
		}
		assert.Equal(t, map[string]int{"yes": 6}, rec.votes(redlock.OpAcquire))
		assert.Equal(t, map[string]int{"yes": 6}, rec.votes(redlock.OpRelease))
		assert.Empty(t, rec.votes(redlock.OpRollback), "no attempt was rolled back")
		fence := rec.votes(redlock.OpFence)
		assert.Equal(t, 6, fence["yes"]+fence["not_held"])
	})
}

// ctxNode records the value an Observer put in the context of each call.
type ctxNode struct {
	redlock.Node
	mu   sync.Mutex
	seen []string
}

func (n *ctxNode) record(ctx context.Context) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, _ := ctx.Value(ctxKey{}).(string)
	n.seen = append(n.seen, s)
}

func (n *ctxNode) Acquire(ctx context.Context, k, v string, ttl time.Duration) (bool, error) {
	n.record(ctx)
	return n.Node.Acquire(ctx, k, v, ttl)
}

func (n *ctxNode) Extend(ctx context.Context, k, v string, ttl time.Duration) (bool, error) {
	n.record(ctx)
	return n.Node.Extend(ctx, k, v, ttl)
}

func (n *ctxNode) Release(ctx context.Context, k, v string, guard time.Duration) (bool, error) {
	n.record(ctx)
	return n.Node.Release(ctx, k, v, guard)
}

// The context OpStart returns is the one every node call of the operation
// gets (the release too, though it runs detached from the caller's
// cancellation): that is how a span becomes the parent of a node's own
// tracing (go-redis's redisotel spans).
func TestObserverContextReachesTheNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, mems := mem(3)
		nodes := make([]redlock.Node, 3)
		wrapped := make([]*ctxNode, 3)
		for i, n := range mems {
			wrapped[i] = &ctxNode{Node: n}
			nodes[i] = wrapped[i]
		}
		c := newClient(t, nodes, redlock.WithObserver(&recorder{}))
		m := newMutex(t, c)
		ctx, cancel := context.WithCancel(context.Background())
		lease, err := m.Lock(ctx)
		require.NoError(t, err)
		synctest.Wait() // the calls behind the quorum finish too
		require.NoError(t, lease.Extend(ctx))
		synctest.Wait() // the calls behind the quorum finish too
		cancel()        // the release still runs, under the operation's context's values
		require.ErrorIs(t, lease.Unlock(ctx), context.Canceled)
		synctest.Wait()
		for _, n := range wrapped {
			n.mu.Lock()
			assert.Equal(t, []string{"acquire " + lockName, "extend " + lockName, "release " + lockName}, n.seen)
			n.mu.Unlock()
		}
	})
}

// A contended wait: the first attempts find the lock taken on every node
// (votes taken, each rolled back), the last gets it once the holder
// unlocks; the acquisition reports its attempts and the whole wait.
func TestObserverSeesAContendedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, nodes := mem(3)
		holder := newMutex(t, newClient(t, nodes))
		rec := &recorder{}
		waiter := newMutex(t, newClient(t, nodes, redlock.WithObserver(rec)), redlock.WithRetryBackoff(100*time.Millisecond, 100*time.Millisecond))
		held, err := holder.Lock(context.Background())
		require.NoError(t, err)
		go func() {
			time.Sleep(time.Second)
			_ = held.Unlock(context.Background())
		}()
		lease, err := waiter.Lock(context.Background())
		require.NoError(t, err)
		require.NoError(t, lease.Unlock(context.Background()))
		synctest.Wait()

		acq := rec.done(redlock.OpAcquire)
		require.Len(t, acq, 1)
		assert.Equal(t, "ok", outcome(acq[0]))
		assert.Greater(t, acq[0].Attempts, 1)
		assert.GreaterOrEqual(t, acq[0].Took, time.Second, "the wait lasted until the holder unlocked (virtual time)")
		// Each attempt is one vote per node; every failed attempt met the
		// holder's key (the last one's votes may already meet it gone, or
		// there is no last one: a waiter that holds with the keys the
		// release handed it makes no round after it, docs/handoff.md),
		// or was not sent: a vote still waiting for the node's earlier
		// call when its attempt was decided is dropped at the requeue
		// (busy: "its waiter left the line").
		votes := rec.votes(redlock.OpAcquire)
		assert.Equal(t, 3*acq[0].Attempts, votes["yes"]+votes["taken"]+votes["busy"], "%v", votes)
		assert.GreaterOrEqual(t, votes["taken"], acq[0].Attempts-1)
		if votes["yes"] > 0 {
			assert.GreaterOrEqual(t, votes["yes"], 2, "the last attempt's quorum")
		} else {
			assert.Equal(t, 3*acq[0].Attempts, votes["taken"]+votes["busy"], "held with the hand-overs: every round was refused (or dropped)")
		}
	})
}

// A rollback: one node is taken by another owner, one fails, so the one yes
// vote is released (a rollback call); the failed node's release fails too,
// goes to the backlog, and leaves it once the node answers.
func TestObserverSeesARollbackAndTheBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		rec := &recorder{}
		c := newClient(t, nodes, redlock.WithObserver(rec))
		m := newMutex(t, c)
		warmUp(t, m)
		synctest.Wait()
		rec.mu.Lock()
		rec.dones, rec.nodes = nil, nil
		rec.mu.Unlock()

		ok, err := ms[0].Acquire(context.Background(), lockName, "another owner", time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		ms[1].Fail(errors.New("connection reset"))
		_, err = m.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		synctest.Wait()
		acq := rec.done(redlock.OpAcquire)
		require.Len(t, acq, 1)
		assert.Equal(t, "contended", outcome(acq[0]))
		assert.Equal(t, 1, acq[0].Attempts)
		var qe *redlock.QuorumError
		require.ErrorAs(t, acq[0].Err, &qe)
		assert.ErrorIs(t, qe.Nodes[0].Err, redlock.ErrNodeTaken)
		assert.Equal(t, map[string]int{"yes": 1, "taken": 1, "error": 1}, rec.votes(redlock.OpAcquire))
		assert.Equal(t, map[string]int{"yes": 1, "error": 1}, rec.votes(redlock.OpRollback),
			"the yes vote released; the failed node's release failed too (its acquire's effect is unknown)")
		assert.Equal(t, 1, c.Stats().Backlog[1])

		ms[1].Fail(nil)
		require.NoError(t, c.Close(context.Background()))
		rec.mu.Lock()
		defer rec.mu.Unlock()
		backlog := rec.backlog()
		require.Len(t, backlog, 2)
		assert.Equal(t, redlock.NodeStateEvent{Lock: backlog[0].Lock, Node: "mem-1", Index: 1, Backlog: 1, Delta: 1}, backlog[0])
		assert.Equal(t, redlock.NodeStateEvent{Lock: backlog[0].Lock, Node: "mem-1", Index: 1, Backlog: 0, Delta: -1}, backlog[1])
		assert.Equal(t, []string{"queued", "done"}, []string{obslabel.BacklogChange(backlog[0].Err, backlog[0].Delta), obslabel.BacklogChange(backlog[1].Err, backlog[1].Delta)})
		assert.Equal(t, lockName, backlog[0].Lock.Name)
	})
}

// A renewal that fails (a majority paused) is reported with its cause (the
// nodes that timed out), and so is the lease's end: expired, its error
// wrapping the last renewal's *QuorumError, which Do's cancel cause carries
// too.
func TestObserverSeesARenewalFailureWithItsCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		rec := &recorder{}
		var logs bytes.Buffer
		var logMu sync.Mutex
		log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c := newClient(t, nodes, redlock.WithObserver(rec), redlock.WithLogger(log))
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		warmUp(t, m)
		var cause error
		err := m.Do(context.Background(), func(ctx context.Context, _ *redlock.Lease) error {
			// Lock returns at a quorum: its last call may still be on its
			// way, and would meet a paused node (its key never written).
			synctest.Wait()
			resume1, resume2 := ms[1].Pause(), ms[2].Pause()
			defer resume1()
			defer resume2()
			<-ctx.Done()
			cause = context.Cause(ctx)
			return nil
		})
		require.ErrorIs(t, err, redlock.ErrLockLost)
		var qe *redlock.QuorumError
		require.ErrorAs(t, cause, &qe, "Do's cancel cause names the failed renewal: %v", cause)
		assert.Equal(t, "extend", qe.Op)
		assert.ErrorIs(t, cause, redlock.ErrNotExtended)
		synctest.Wait()

		var failed []redlock.OpEvent
		for _, e := range rec.done(redlock.OpExtend) {
			assert.True(t, e.Renewal)
			switch outcome(e) {
			case "no_quorum":
				failed = append(failed, e)
			case "ok", "ended": // before the pause; running when Do released
			default:
				t.Errorf("renewal outcome %q: %v", outcome(e), e.Err)
			}
		}
		require.NotEmpty(t, failed)
		for _, e := range failed {
			require.ErrorAs(t, e.Err, &qe)
			assert.ErrorIs(t, qe.Nodes[1].Err, context.DeadlineExceeded, "the cause: node 1 timed out")
			assert.ErrorIs(t, qe.Nodes[2].Err, context.DeadlineExceeded, "the cause: node 2 timed out")
		}
		assert.Positive(t, rec.votes(redlock.OpExtend)["timeout"])
		logMu.Lock()
		text := logs.String()
		logMu.Unlock()
		assert.Contains(t, text, `level=WARN msg="redlock: renewal failed" lock=quorumlock:test outcome=no_quorum`)
		assert.Contains(t, text, "mem-1 (memnode mem-1: context deadline exceeded)")
	})
}

// lockedWriter serialises writes to a buffer shared with the test.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A lease whose renewals fail ends expired at its deadline, its error
// wrapping the last renewal's; an Extend that finds the token gone on a
// majority ends the lease lost. Each lease ends once.
func TestObserverSeesLeasesExpireAndGetLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		rec := &recorder{}
		c := newClient(t, nodes, redlock.WithObserver(rec))
		m := newMutex(t, c, redlock.WithTTL(time.Second), redlock.WithAutoRenew(0))
		lease, err := m.Lock(context.Background())
		require.NoError(t, err)
		resume1, resume2 := ms[1].Pause(), ms[2].Pause()
		<-lease.Done()
		resume1()
		resume2()
		synctest.Wait()
		ends := rec.leaseEnds()
		require.Len(t, ends, 1)
		assert.True(t, ends[0].Expired)
		assert.Equal(t, "expired", obslabel.LeaseEnd(ends[0].Err, ends[0].Expired))
		assert.ErrorIs(t, ends[0].Err, redlock.ErrLockLost)
		var qe *redlock.QuorumError
		assert.ErrorAs(t, ends[0].Err, &qe, "the expiry carries the last renewal's error")
		assert.Contains(t, lease.Err().Error(), "validity ended; the last extend failed")
		require.NoError(t, lease.Unlock(context.Background()))
		synctest.Wait()

		rec.mu.Lock()
		rec.nodes = nil // the calls of the lease below only
		rec.mu.Unlock()
		lost, err := newMutex(t, c).Lock(context.Background())
		require.NoError(t, err)
		synctest.Wait() // every node has the key
		ms[0].Restart(false)
		ms[1].Restart(false)
		require.ErrorIs(t, lost.Extend(context.Background()), redlock.ErrLockLost)
		require.ErrorIs(t, lost.Unlock(context.Background()), redlock.ErrLockLost)
		synctest.Wait()
		ends = rec.leaseEnds()
		require.Len(t, ends, 2, "each lease ends once")
		assert.False(t, ends[1].Expired)
		assert.ErrorIs(t, ends[1].Err, redlock.ErrLockLost)
		assert.Equal(t, "lost", obslabel.LeaseEnd(ends[1].Err, ends[1].Expired))
		ext := rec.done(redlock.OpExtend)
		assert.Equal(t, "lost", outcome(ext[len(ext)-1]))
		assert.False(t, ext[len(ext)-1].Renewal)
		rel := rec.done(redlock.OpRelease)
		assert.Equal(t, "lost", outcome(rel[len(rel)-1]))
		assert.GreaterOrEqual(t, rec.votes(redlock.OpExtend)["not_held"], 2, "the two restarted masters")
	})
}

// A quarantine's start is reported: a young server met for the first time,
// then a restart of a known one.
func TestObserverSeesQuarantines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		rec := &recorder{}
		c := newClient(t, nodes, redlock.WithObserver(rec), redlock.WithRestartQuarantine(10*time.Second))
		m := newMutex(t, c)
		time.Sleep(5 * time.Second)
		_, err := m.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		rec.mu.Lock()
		_, quarantines := rec.runs()
		require.Len(t, quarantines, 3)
		for _, q := range quarantines {
			assert.False(t, q.Restart)
			assert.Equal(t, 6*time.Second, q.Quarantine, "10s less an uptime of 5s read as 4s")
		}
		rec.mu.Unlock()
		synctest.Wait()
		assert.Equal(t, map[string]int{"quarantined": 3}, rec.votes(redlock.OpAcquire))

		time.Sleep(10 * time.Second)
		ms[0].Restart(true)
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		require.NoError(t, lease.Unlock(context.Background()))
		synctest.Wait()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		runs, quarantines := rec.runs()
		require.Len(t, quarantines, 4)
		require.Len(t, runs, 4, "each run met is reported once, with its quarantine")
		assert.Equal(t, "mem-0", quarantines[3].Node)
		assert.True(t, quarantines[3].Restart)
		assert.Equal(t, 10*time.Second, quarantines[3].Quarantine)
	})
}

// A nil observer or logger is refused, naming the option.
func TestNilObserverIsRefused(t *testing.T) {
	_, nodes := mem(3)
	_, err := redlock.New(nodes, redlock.WithObserver(nil))
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "WithObserver")
	_, err = redlock.New(nodes, redlock.WithLogger(nil))
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
}

// WithLogger writes a lost lease as a warning, with the lock's name, and
// stays silent below its handler's level.
func TestLoggerWritesALostLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		var buf bytes.Buffer
		var mu sync.Mutex
		c := newClient(t, nodes, redlock.WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))))
		m := newMutex(t, c, redlock.WithTTL(time.Second))
		lease, err := m.Lock(context.Background())
		require.NoError(t, err)
		synctest.Wait() // every node has the key
		ms[0].Restart(false)
		ms[1].Restart(false)
		require.ErrorIs(t, lease.Extend(context.Background()), redlock.ErrLockLost)
		_ = lease.Unlock(context.Background())
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		require.Len(t, lines, 1, "only the warning at the default (Info) level: %q", buf.String())
		assert.Contains(t, lines[0], `level=WARN msg="redlock: lease lost" lock=quorumlock:test end=lost`)
	})
}
