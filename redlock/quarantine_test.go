package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// The RedLock hole of a restart without persistence: A holds a bare quorum
// {0, 1} of three masters, master 0 restarts empty, and B takes {0, 2}: two
// holders. With the restart quarantine master 0's vote does not count until
// it has been up for the quarantine, so B is refused (and its error says
// why); without it B gets the lock.
func TestRestartQuarantineKeepsARestartedMasterFromVoting(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprint("quarantine=", quarantine), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms, nodes := mem(3)
				var opts []redlock.ClientOption
				if quarantine {
					opts = append(opts, redlock.WithRestartQuarantine(0))
				}
				ttl := 2 * time.Second
				a := newMutex(t, newClient(t, nodes, opts...), redlock.WithTTL(ttl))
				b := newMutex(t, newClient(t, nodes, opts...), redlock.WithTTL(ttl))
				time.Sleep(ttl + time.Second) // up for the quarantine (uptime reads 1s less, as from Redis)

				down := fmt.Errorf("partitioned: %w", redlock.ErrNotSent)
				ms[2].Fail(down)
				held, err := a.TryLock(context.Background()) // A holds {0, 1}
				require.NoError(t, err)
				synctest.Wait() // A's call to master 2 has failed before it heals
				ms[2].Fail(nil)
				ms[0].Restart(false) // loses A's key
				ms[1].Fail(down)     // B reaches {0, 2}
				start := time.Now()
				other, err := b.TryLock(context.Background())
				if !quarantine {
					require.NoError(t, err, "the unprotected twin shows the violation")
					assert.True(t, held.Valid() && other.Valid(), "two valid holders")
					return
				}
				require.ErrorIs(t, err, redlock.ErrNotObtained)
				errs := nodeErrs(t, err)
				require.ErrorIs(t, errs[0], redlock.ErrNodeQuarantined)
				assert.Contains(t, err.Error(), "quarantined: mem-0")
				ms[1].Fail(nil)
				// A's keys are on master 1 only now: its Unlock says so.
				require.ErrorIs(t, held.Unlock(context.Background()), redlock.ErrLockLost)

				// After the quarantine (the longest TTL) master 0 votes again.
				time.Sleep(time.Until(start.Add(ttl + time.Second))) // B met it after its restart: its uptime reads up to 1s less
				other, err = b.TryLock(context.Background())
				require.NoError(t, err)
				require.NoError(t, other.Unlock(context.Background()))
				synctest.Wait()
				assert.Zero(t, ownKeys(ms), "the quarantined vote's key was released too")
			})
		})
	}
}

// A master met for the first time with an uptime below the quarantine is
// quarantined for the rest of it; a master declared durable is not.
func TestYoungAndDurableMasters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		c := newClient(t, nodes, redlock.WithRestartQuarantine(5*time.Second, "mem-2"))
		m := newMutex(t, c, redlock.WithTTL(5*time.Second)) // the quarantine covers it
		time.Sleep(time.Second)
		_, err := m.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		errs := nodeErrs(t, err)
		assert.ErrorIs(t, errs[0], redlock.ErrNodeQuarantined)
		assert.ErrorIs(t, errs[1], redlock.ErrNodeQuarantined)
		if errs[2] != nil { // the attempt may be decided before its reply
			assert.ErrorIs(t, errs[2], redlock.ErrNoReply, "a durable master is not quarantined")
		}
		time.Sleep(5 * time.Second) // its uptime reads 1s less, as from Redis
		lease, err := m.TryLock(context.Background())
		require.NoError(t, err)
		require.NoError(t, lease.Unlock(context.Background()))
		require.NoError(t, c.Close(context.Background()))
		assert.Zero(t, ownKeys(ms))

		_, err = redlock.New(nodes, redlock.WithRestartQuarantine(0, "nowhere:1"))
		require.ErrorIs(t, err, redlock.ErrInvalidConfig)
		assert.Contains(t, err.Error(), `"nowhere:1"`)
	})
}

// failover is one node whose server can be replaced (a Sentinel failover):
// Addr stays, the server behind it changes, and the switch is a new
// connection.
type failover struct {
	*memnode.Node
	mu sync.Mutex
}

func (f *failover) server() *memnode.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Node
}

func (f *failover) to(n *memnode.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Node = n
}

func (f *failover) Addr() string { return "mem-0" }
func (f *failover) Info(ctx context.Context) (redlock.ServerInfo, error) {
	return f.server().Info(ctx)
}
func (f *failover) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return f.server().Acquire(ctx, key, value, ttl)
}
func (f *failover) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return f.server().Extend(ctx, key, value, ttl)
}
func (f *failover) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	return f.server().Release(ctx, key, value, guard)
}

// A failover to a standby that started after the client last saw the old
// master (its uptime is shorter than the time since), while the old master
// kept granting keys to another client: the standby lacks a key granted
// just now, so it must wait the whole quarantine. Taking its uptime as the
// age of what it lost (right for a restart of the same server) let B in
// while A held the lock; the chaos scenario failover-no-key-quarantined
// found it.
func TestQuarantineAfterAFailoverToAYoungStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		pivot := &failover{Node: ms[0]}
		nodes[0] = pivot
		ttl := 2 * time.Second
		opt := redlock.WithRestartQuarantine(0)
		a := newMutex(t, newClient(t, nodes, opt), redlock.WithTTL(ttl))
		b := newMutex(t, newClient(t, nodes, opt), redlock.WithTTL(ttl))
		time.Sleep(ttl + time.Second)                 // up for the quarantine (uptime reads 1s less)
		lease, err := b.TryLock(context.Background()) // B meets the pivot
		require.NoError(t, err)
		require.NoError(t, lease.Unlock(context.Background()))
		synctest.Wait()

		time.Sleep(500 * time.Millisecond) // B has not seen the pivot since
		standby := memnode.New("mem-0-standby")
		time.Sleep(ttl + 1500*time.Millisecond) // up longer than the quarantine, younger than B's last look
		down := fmt.Errorf("partitioned: %w", redlock.ErrNotSent)
		ms[2].Fail(down)
		held, err := a.TryLock(context.Background()) // A holds {pivot, 1}
		require.NoError(t, err)
		synctest.Wait()
		ms[2].Fail(nil)
		pivot.to(standby) // fails over: the standby lacks A's key
		ms[1].Fail(down)  // B reaches {pivot, 2}
		_, err = b.TryLock(context.Background())
		require.ErrorIs(t, err, redlock.ErrNotObtained, "B got the lock while A held it")
		require.ErrorIs(t, nodeErrs(t, err)[0], redlock.ErrNodeQuarantined)
		assert.True(t, held.Valid())
		ms[1].Fail(nil)
		require.ErrorIs(t, held.Unlock(context.Background()), redlock.ErrLockLost, "the standby lost A's key")
	})
}
