package redlock_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// lostReply applies the acquire on its master but loses the reply (the link
// broke right after the command went out), and fails the first releases as a
// broken link does until it heals.
type lostReply struct {
	*memnode.Node
	failures atomic.Int32 // releases still to fail
	releases atomic.Int32 // releases attempted
}

func (l *lostReply) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if _, err := l.Node.Acquire(ctx, key, value, ttl); err != nil {
		return false, err
	}
	return false, io.ErrUnexpectedEOF
}

func (l *lostReply) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	l.releases.Add(1)
	if l.failures.Add(-1) >= 0 {
		return false, errors.New("read tcp: connection reset by peer")
	}
	return l.Node.Release(ctx, key, value, guard)
}

// An acquire applied just before the link to a master broke loses its
// reply; the releases fail until the link heals. The release is retried in
// the background until the master answers, so the key does not outlive the
// lease (the chaos suite's minority-partitioned found such keys when a
// failed release was not retried).
func TestReleaseRetriedAfterPartitionHeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms, nodes := mem(3)
		lost := &lostReply{Node: ms[2]}
		nodes[2] = lost
		c, err := redlock.New(nodes)
		require.NoError(t, err)
		m := newMutex(t, c)
		ctx := context.Background()
		lease, err := m.TryLock(ctx)
		require.NoError(t, err)
		synctest.Wait() // the attempt decided at 2 of 3: let the third acquire land
		assert.Contains(t, ms[2].Keys(), lockName, "the acquire whose reply was lost was applied")
		lost.failures.Store(2)
		require.NoError(t, lease.Unlock(ctx)) // a quorum (masters 0 and 1) confirmed
		synctest.Wait()
		assert.Contains(t, ms[2].Keys(), lockName, "the first release failed")
		assert.Equal(t, 1, c.Stats().Backlog[2], "queued for a retry")

		closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, c.Close(closeCtx)) // waits for the retries
		assert.Equal(t, int32(3), lost.releases.Load(), "two failed releases, then one that went through")
		assert.Empty(t, ms[2].Keys(), "the key behind the lost reply was released once the link healed")
	})
}
