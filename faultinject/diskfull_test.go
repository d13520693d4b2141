package faultinject

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestDiskFullAnswersWritesWithMISCONF: on a full disk a master with
// appendfsync everysec refuses writes with MISCONF and reports the failed
// AOF write in INFO, still answers reads, and after Undo writes again; the
// other master is untouched.
func TestDiskFullAnswersWritesWithMISCONF(t *testing.T) {
	f := DiskFull{Nodes: []int{0}}
	RequireFault(t, f)
	c := StartT(t, Config{N: 2, Tmpfs: true, Persistence: []Persistence{AOFEverySec}})
	r, other := client(t, c.Addr(0)), client(t, c.Addr(1))
	ctx := ctxT(t, time.Minute)
	require.NoError(t, r.Set(ctx, "before", "1", 0).Err())
	require.NoError(t, f.Inject(ctx, c))
	err := r.Set(ctx, "k", "v", 0).Err()
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "MISCONF"), "a write on a full disk: %v", err)
	v, err := r.Get(ctx, "before").Result()
	require.NoError(t, err, "reads still answer")
	assert.Equal(t, "1", v)
	assert.Equal(t, "err", infoField(t, c.ServerAddr(0), "persistence", "aof_last_write_status"))
	ok, err := c.Node(0).Acquire(ctx, "lock", "a", time.Minute)
	require.Error(t, err, "an acquire's write is refused")
	assert.False(t, ok)
	assert.Contains(t, err.Error(), "MISCONF")
	require.NoError(t, other.Set(ctx, "k", "v", 0).Err(), "the other master writes")

	require.NoError(t, f.Undo(ctx, c))
	assert.Equal(t, "ok", infoField(t, c.ServerAddr(0), "persistence", "aof_last_write_status"))
	require.NoError(t, r.Set(ctx, "k", "v", 0).Err(), "writes again after Undo")
	require.NoError(t, f.Undo(ctx, c), "undoing twice does nothing")
}

// TestDiskFullStopsAnAlwaysMaster: with appendfsync always, Redis exits at
// its first write on a full disk (a crash); Undo frees the disk and starts
// it again, with the keys its AOF has.
func TestDiskFullStopsAnAlwaysMaster(t *testing.T) {
	f := DiskFull{Nodes: []int{0}}
	RequireFault(t, f)
	c := StartT(t, Config{N: 1, Tmpfs: true, Persistence: []Persistence{AOFAlways}})
	r := client(t, c.Addr(0))
	ctx := ctxT(t, time.Minute)
	require.NoError(t, r.Set(ctx, "before", "1", 0).Err())
	before, err := c.Node(0).Info(ctx)
	require.NoError(t, err)
	require.NoError(t, f.Inject(ctx, c))
	_, err = do(t, func(ctx context.Context) (string, error) { return r.Ping(ctx).Result() })
	require.Error(t, err, "redis-server exited")
	require.NoError(t, f.Undo(ctx, c))
	waitUp(t, r)
	after, err := c.Node(0).Info(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, before.RunID, after.RunID, "started again")
	v, err := r.Get(ctx, "before").Result()
	require.NoError(t, err)
	assert.Equal(t, "1", v, "the keys its AOF had")
}

// TestDiskFullNeedsTmpfsAndAnAOF: the errors name the fault and what is
// missing.
func TestDiskFullNeedsTmpfsAndAnAOF(t *testing.T) {
	f := DiskFull{Nodes: []int{0}}
	RequireFault(t, f)
	ctx := ctxT(t, time.Minute)
	c := StartT(t, Config{N: 1, Backend: Process, Persistence: []Persistence{AOFEverySec}})
	err := f.Inject(ctx, c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "disk-full[0]")
	assert.Contains(t, err.Error(), "Config.Tmpfs")
	c = StartT(t, Config{N: 1, Tmpfs: true})
	err = f.Inject(ctx, c)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "append-only")
	require.NoError(t, f.Undo(ctx, c))
	_, err = Start(ctx, Config{N: 1, Backend: Memory, Tmpfs: true})
	require.Error(t, err, "Tmpfs on the memory backend")
}

// TestUnlockAndExtendOnAFullDisk: with a majority of the masters on full
// disks (MISCONF), Extend and Unlock report node errors, not a lost lock:
// Extend fails with ErrNotExtended and the lease stays valid; Unlock fails
// with ErrNotReleased, its releases are retried in the background, and
// once the disks are free Client.Close leaves no key behind. With
// knobs.NoBusyRetry (MISCONF taken as a final answer) the releases are not
// retried and the keys outlive the client.
func TestUnlockAndExtendOnAFullDisk(t *testing.T) {
	for _, tc := range []struct {
		name string
		knob bool
	}{{"MISCONF retried", false}, {"knob NoBusyRetry: keys left", true}} {
		t.Run(tc.name, func(t *testing.T) {
			knobs.NoBusyRetry.Store(tc.knob)
			t.Cleanup(func() { knobs.NoBusyRetry.Store(false) })
			f := DiskFull{Nodes: []int{0, 1}}
			RequireFault(t, f)
			c := StartT(t, Config{N: 3, Tmpfs: true, Persistence: []Persistence{AOFEverySec}})
			ctx := ctxT(t, time.Minute)
			cl, err := redlock.New(c.Nodes(), redlock.WithNodeTimeout(500*time.Millisecond), redlock.WithReleaseTimeout(500*time.Millisecond))
			require.NoError(t, err)
			mu, err := cl.NewMutex("job", redlock.WithTTL(10*time.Second))
			require.NoError(t, err)
			lease, err := mu.Lock(ctx)
			require.NoError(t, err)
			// Lock returns at a quorum: the third acquire may still be on
			// its way, and the full disk would refuse it.
			require.Eventually(t, func() bool {
				for i := range c.N() {
					if h, err := c.Node(i).Inspect(ctx, "job"); err != nil || !h.Exists {
						return false
					}
				}
				return true
			}, 10*time.Second, time.Millisecond, "the key on every master")
			require.NoError(t, f.Inject(ctx, c))

			err = lease.Extend(ctx)
			require.Error(t, err)
			assert.ErrorIs(t, err, redlock.ErrNotExtended)
			assert.False(t, errors.Is(err, redlock.ErrLockLost), "a full disk is a node error, not a lost lock: %v", err)
			assert.Contains(t, err.Error(), "MISCONF")
			assert.True(t, lease.Valid(), "the lease keeps its validity")

			err = lease.Unlock(ctx)
			require.Error(t, err)
			assert.ErrorIs(t, err, redlock.ErrNotReleased)
			assert.False(t, errors.Is(err, redlock.ErrLockLost), "a full disk is a node error, not a lost lock: %v", err)
			for i := range 2 {
				h, err := c.Node(i).Inspect(ctx, "job")
				require.NoError(t, err)
				assert.True(t, h.Exists, "master %d kept the key it could not delete", i)
			}

			require.NoError(t, f.Undo(ctx, c))
			closeErr := cl.Close(ctx)
			left := 0
			for i := range c.N() {
				h, err := c.Node(i).Inspect(ctx, "job")
				require.NoError(t, err)
				if h.Exists {
					left++
				}
			}
			if tc.knob {
				assert.Equal(t, 2, left, "the releases refused with MISCONF were not retried: both keys outlive the client")
				return
			}
			require.NoError(t, closeErr, "the background releases reach the freed masters")
			assert.Zero(t, left, "no key left after Close")
		})
	}
}

// serverChecks records a client's server checks: the NodeState events of
// the server runs it met.
type serverChecks struct {
	redlock.NopObserver
	mu     sync.Mutex
	events []redlock.NodeStateEvent
}

func (o *serverChecks) NodeState(_ context.Context, e redlock.NodeStateEvent) {
	if e.RunID == "" { // a backlog change
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

// TestServerCheckSeesAFullDisk: a client that meets a master whose disk is
// full (its AOF write failed) reports it at first contact, at level bad
// (check "disk"), as quorumlock doctor does; the masters next to it have
// no such finding.
func TestServerCheckSeesAFullDisk(t *testing.T) {
	f := DiskFull{Nodes: []int{0}}
	RequireFault(t, f)
	c := StartT(t, Config{N: 3, Tmpfs: true, Persistence: []Persistence{AOFEverySec}})
	ctx := ctxT(t, time.Minute)
	require.NoError(t, f.Inject(ctx, c))
	obs := &serverChecks{}
	cl, err := redlock.New(c.Nodes(), redlock.WithObserver(obs))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close(context.Background()) })
	mu, err := cl.NewMutex("job")
	require.NoError(t, err)
	lease, err := mu.TryLock(ctx)
	require.NoError(t, err, "two masters of three take writes")
	require.NoError(t, lease.Unlock(ctx))
	obs.mu.Lock()
	defer obs.mu.Unlock()
	disk := map[int]string{}
	for _, e := range obs.events {
		for _, fd := range e.Findings {
			if fd.Check == "disk" {
				disk[e.Index] = fd.Level
			}
		}
	}
	assert.Equal(t, map[int]string{0: "bad"}, disk, "the full master's disk is bad, the other's not reported")
	require.NoError(t, f.Undo(ctx, c))
}
