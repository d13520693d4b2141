package redlock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// heldInfo holds a real node's Info calls, once armed, until open is
// closed, whatever their context does, and then makes them: a call whose
// context ended meanwhile is not sent (redisnode: ErrNotSent).
type heldInfo struct {
	*redisnode.Node
	armed   atomic.Bool
	started chan struct{} // closed when the first armed Info began
	open    chan struct{}
	once    sync.Once
}

func (h *heldInfo) Info(ctx context.Context) (redlock.ServerInfo, error) {
	if h.armed.Load() {
		h.once.Do(func() { close(h.started) })
		<-h.open
	}
	return h.Node.Info(ctx)
}

// An outside tester's find: with WithRestartQuarantine, a caller that
// cancels its Lock context as soon as Lock returns (defer cancel()) left
// the lease's key on a master about once in 30 leases. That master's yes
// came after the quorum, and the identity read the quarantine makes after
// each yes was then not sent (its context had ended: ErrNotSent); the
// release took the ErrNotSent for an acquire that never reached the
// master, sent it no release, and Unlock returned nil with the key there
// until its TTL. Here master 2's read after its yes waits (heldInfo) until
// the caller has cancelled. With the fix Close leaves no key on master 2;
// with knobs.HeldVoteUnreleased the lease's key is still there.
func TestHeldVoteUnsentIsReleasedOnRealServers(t *testing.T) {
	for _, rule := range []bool{true, false} {
		t.Run(fmt.Sprint("rule=", rule), func(t *testing.T) {
			if !rule {
				knobs.HeldVoteUnreleased.Store(true)
				defer knobs.HeldVoteUnreleased.Store(false)
			}
			heldVoteUnsent(t, rule)
		})
	}
}

func heldVoteUnsent(t *testing.T, rule bool) {
	ctx := context.Background()
	ms := startMasters(t, 3)
	n2, err := redisnode.Dial(ms.servers[2].Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = n2.Close() })
	h := &heldInfo{Node: n2, started: make(chan struct{}), open: make(chan struct{})}
	var openOnce sync.Once
	open := func() { openOnce.Do(func() { close(h.open) }) }
	defer open() // a failed step must not leave a read held
	c := realClient(t, []redlock.Node{ms.nodes[0], ms.nodes[1], h}, redlock.WithRestartQuarantine(0))
	// The masters are new: the client keeps them in quarantine for the
	// TTL (the longest a key they lost could live), which the first Lock
	// waits out; the key checked below must outlive the test's steps.
	m := newMutex(t, c, redlock.WithTTL(5*time.Second))
	// The client meets every master (its first contacts read their
	// identities) before the read after a yes is held.
	wctx, cancelWait := context.WithTimeout(ctx, 30*time.Second)
	defer cancelWait()
	first, err := m.Lock(wctx)
	require.NoError(t, err)
	require.NoError(t, first.Unlock(ctx))

	h.armed.Store(true)
	lctx, cancel := context.WithCancel(ctx)
	lease, err := m.TryLock(lctx) // masters 0 and 1 make the quorum
	require.NoError(t, err)
	select {
	case <-h.started: // master 2 said yes; its identity read waits
	case <-wctx.Done():
		t.Fatal("master 2's identity read after its yes never began")
	}
	cancel() // the caller's defer cancel(), just after Lock returned
	open()
	require.NoError(t, lease.Unlock(ctx))
	require.NoError(t, c.Close(ctx)) // the releases still running end first

	v, err := ms.raw[2].Get(ctx, lockName).Result()
	if rule {
		require.ErrorIs(t, err, redis.Nil, "master 2 still holds %q after Close", v)
		return
	}
	require.NoError(t, err, "with the knob master 2 keeps the lease's key")
	require.True(t, strings.HasPrefix(v, lease.Token()), "master 2 holds %q, not the lease's %q", v, lease.Token())
}
