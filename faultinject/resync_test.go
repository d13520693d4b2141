package faultinject

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestAWaiterThatLostItsNotificationsLooksAgain, on real servers: a waiter
// (its own link) is in every master's line, its watch listens on every
// master and it sleeps (its first attempt and the one after its watch
// started were refused on every master), when its link is cut, which
// closes its connections, the watch's too; the holder's Unlock then hands
// it the key on every master, and the notifications reach nobody. Once the link is healed, the waiter's watch
// subscribes again, hears that it may have lost some (wire.Resync), and
// the waiter takes the handed keys over at once: its backoff is an hour,
// so without the resync its Lock would run out of time. (A cut that met the
// second attempt would leave the test to chance: a removal of the
// requeue that went through before it, and an entry under the new ID that
// did not, leave a master with no line to hand the key to. redlock's
// TestResyncWakesAWaiterItsNodesCouldNotHear covers such an attempt.)
func TestAWaiterThatLostItsNotificationsLooksAgain(t *testing.T) {
	RequireBackend(t, Process)
	c := StartT(t, Config{N: 3, Backend: Process})
	ctx := ctxT(t, 2*time.Minute)
	l, err := c.NewLink("waiter")
	require.NoError(t, err)
	holder, err := redlock.New(c.Nodes())
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close(ctxT(t, time.Minute)) })
	votes := &takenVotes{}
	waiter, err := redlock.New(l.Nodes(), redlock.WithObserver(votes))
	require.NoError(t, err)
	t.Cleanup(func() { _ = waiter.Close(ctxT(t, time.Minute)) })
	hm, err := holder.NewMutex("job")
	require.NoError(t, err)
	wm, err := waiter.NewMutex("job", redlock.WithRetryBackoff(time.Hour, time.Hour))
	require.NoError(t, err)

	lease, err := hm.TryLock(ctx)
	require.NoError(t, err)
	// held: every master holds the key, the holder's (mine) or another's.
	held := func(mine bool) func() bool {
		return func() bool {
			for i := range c.N() {
				h, err := c.Node(i).Inspect(ctx, "job")
				token, _ := wire.ValueToken(h.Value)
				if err != nil || !h.Exists || (token == lease.Token()) != mine {
					return false
				}
			}
			return true
		}
	}
	eventually(t, 10*time.Second, held(true), "the holder's key on every master")
	type result struct {
		lease *redlock.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		l, err := wm.Lock(ctx)
		got <- result{l, err}
	}()
	raw := make([]*redis.Client, c.N())
	for i := range raw {
		raw[i] = client(t, c.ServerAddr(i))
	}
	// waiting: the waiter's two attempts were refused on every master, it
	// is in every master's line, and its watch listens on every master (the
	// holder's client has no watch: it never waited).
	waiting := func() bool {
		if votes.n.Load() < int32(2*c.N()) {
			return false
		}
		for _, r := range raw {
			n, err := r.ZCard(ctx, "{job}:queue").Result()
			if err != nil || n == 0 {
				return false
			}
			chans, err := r.PubSubChannels(ctx, "{job}:released*").Result()
			if err != nil || len(chans) == 0 {
				return false
			}
		}
		return true
	}
	eventually(t, 30*time.Second, waiting, "the waiter asleep in every master's line, its watch listening")

	cut := Partition{Nodes: []int{0, 1, 2}, Link: "waiter"}
	require.NoError(t, cut.Inject(ctx, c))
	require.NoError(t, lease.Unlock(ctx))
	eventually(t, 10*time.Second, held(false), "every master handed the waiter the key")
	select {
	case r := <-got:
		t.Fatalf("the waiter got the lock while cut off: %v", r.err)
	default:
	}
	require.NoError(t, cut.Undo(ctx, c))
	r := <-got
	require.NoError(t, r.err, "the waiter looked again once its watch listened again")
	assert.True(t, r.lease.Valid())
	require.NoError(t, r.lease.Unlock(ctx))
}

// takenVotes counts the acquire votes refused because the lock was held.
type takenVotes struct {
	redlock.NopObserver
	n atomic.Int32
}

func (v *takenVotes) NodeCall(_ context.Context, e redlock.NodeEvent) {
	if e.Op == redlock.OpAcquire && errors.Is(e.Err, redlock.ErrNodeTaken) {
		v.n.Add(1)
	}
}
