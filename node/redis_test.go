package node_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node"
)

func TestMain(m *testing.M) {
	node.DiscardClientLog()
	goleak.VerifyTestMain(m)
}

func dial(t *testing.T, addr string, opts ...node.Option) *node.Redis {
	t.Helper()
	n, err := node.Dial(addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func TestScriptsLoadIntoRealServer(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dial(t, srv.Addr())
	ctx := context.Background()
	require.NoError(t, n.LoadScripts(ctx))

	// After SCRIPT FLUSH, EVALSHA gets NOSCRIPT and the adapter falls back to EVAL.
	require.NoError(t, n.Client().ScriptFlush(ctx).Err())
	res, err := n.Acquire(ctx, "k", "v", time.Second)
	require.NoError(t, err)
	assert.Equal(t, node.Acquired, res)
}

func TestLockActionsOnRealServer(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dial(t, srv.Addr())
	ctx := context.Background()
	rc := n.Client()

	res, err := n.Acquire(ctx, "lock", "mine", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, node.Acquired, res)
	pttl := rc.PTTL(ctx, "lock").Val()
	assert.InDelta(t, 10*time.Second, pttl, float64(200*time.Millisecond))

	res, err = n.Acquire(ctx, "lock", "theirs", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, node.Taken, res, "SET NX must not overwrite")
	assert.Equal(t, "mine", rc.Get(ctx, "lock").Val())

	h, err := n.Inspect(ctx, "lock")
	require.NoError(t, err)
	assert.True(t, h.Exists)
	assert.Equal(t, "mine", h.Value)
	assert.Greater(t, h.TTL, 9*time.Second)

	ok, err := n.Extend(ctx, "lock", "theirs", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "extend with a foreign value must fail")
	ok, err = n.Extend(ctx, "lock", "mine", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Greater(t, rc.PTTL(ctx, "lock").Val(), 50*time.Second)

	ok, err = n.Release(ctx, "lock", "theirs", 0)
	require.NoError(t, err)
	assert.False(t, ok, "release with a foreign value must not delete")
	assert.Equal(t, int64(1), rc.Exists(ctx, "lock").Val())
	assert.Equal(t, int64(0), rc.Exists(ctx, node.GuardKey("lock", "theirs")).Val(), "guard 0 leaves no guard")

	ok, err = n.Release(ctx, "lock", "mine", time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, int64(0), rc.DBSize(ctx).Val(), "a successful release leaves no key, not even a guard")

	// Extend never resurrects a missing key.
	ok, err = n.Extend(ctx, "lock", "mine", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, int64(0), rc.Exists(ctx, "lock").Val())

	h, err = n.Inspect(ctx, "lock")
	require.NoError(t, err)
	assert.Equal(t, node.Holder{}, h)

	_, err = n.Acquire(ctx, "lock", "mine", 500*time.Microsecond)
	require.ErrorContains(t, err, "500µs")
}

func TestReleaseGuardRefusesLateAcquire(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dial(t, srv.Addr())
	ctx := context.Background()
	rc := n.Client()

	// The release arrives before the straggling acquire of the same value.
	ok, err := n.Release(ctx, "lock", "v1", 2*time.Second)
	require.NoError(t, err)
	assert.False(t, ok)
	guardTTL := rc.PTTL(ctx, node.GuardKey("lock", "v1")).Val()
	assert.InDelta(t, 2*time.Second, guardTTL, float64(100*time.Millisecond))

	res, err := n.Acquire(ctx, "lock", "v1", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, node.Refused, res)
	assert.Equal(t, int64(0), rc.Exists(ctx, "lock").Val(), "a refused acquire leaves no key")

	// Another value is not affected by that guard.
	res, err = n.Acquire(ctx, "lock", "v2", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, node.Acquired, res)
}

func TestInfoReportsRunIDAndRestart(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dial(t, srv.Addr())
	ctx := context.Background()
	first, err := n.Info(ctx)
	require.NoError(t, err)
	assert.Len(t, first.RunID, 40)
	assert.Equal(t, srv.Addr(), first.Addr)
	assert.NotEmpty(t, first.Version)

	require.NoError(t, srv.Restart())
	var second node.ServerInfo
	require.Eventually(t, func() bool {
		second, err = n.Info(ctx)
		return err == nil
	}, 5*time.Second, 20*time.Millisecond)
	assert.NotEqual(t, first.RunID, second.RunID, "a restart changes run_id")
}

// A client built the go-redis default way ignores context deadlines on
// socket I/O; against a paused server the adapter must still return by the
// deadline, and cap the abandoned calls.
func TestDeadlineBoundsCallsOnPausedServer(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	for _, tc := range []struct {
		name   string
		client *redis.Client
	}{
		{"ContextTimeoutEnabled=false", redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 3 * time.Second})},
		{"LockClientOptions", redis.NewClient(node.LockClientOptions(srv.Addr()))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.client.Close()
			n, err := node.NewRedis(tc.client, node.WithMaxInFlight(3))
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, tc.client.Ping(ctx).Err())
			require.NoError(t, srv.Pause())
			resumed := false
			defer func() {
				if !resumed {
					_ = srv.Resume()
				}
			}()

			for i := 0; i < 3; i++ {
				cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				start := time.Now()
				_, err := n.Acquire(cctx, "k", "v", time.Second)
				took := time.Since(start)
				cancel()
				require.ErrorIs(t, err, context.DeadlineExceeded)
				assert.Less(t, took, time.Second, "call %d took %v despite a 50ms deadline", i, took)
			}
			if tc.name == "ContextTimeoutEnabled=false" {
				// The three abandoned calls still wait on the socket: the cap holds.
				assert.Equal(t, 3, n.InFlight())
				_, err := n.Acquire(ctx, "k", "v", time.Second)
				require.ErrorIs(t, err, node.ErrOverloaded)
			}
			require.NoError(t, srv.Resume())
			resumed = true
			require.Eventually(t, func() bool { return n.InFlight() == 0 }, 10*time.Second, 10*time.Millisecond)
		})
	}
}

// A user's client with go-redis's default retries may have sent a copy of the
// command before a later dial failed: the adapter must not claim ErrNotSent.
func TestRetryingClientNeverClaimsNotSent(t *testing.T) {
	port, err := redisproc.FreePort()
	require.NoError(t, err)
	rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + itoa(port), MaxRetries: 1, DialerRetries: 1})
	defer rc.Close()
	n, err := node.NewRedis(rc)
	require.NoError(t, err)
	_, err = n.Acquire(context.Background(), "k", "v", time.Second)
	require.Error(t, err)
	require.NotErrorIs(t, err, node.ErrNotSent)
}

func TestAcquireIsIdempotentForItsOwnValue(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dial(t, srv.Addr())
	ctx := context.Background()
	res, err := n.Acquire(ctx, "lock", "mine", 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, node.Acquired, res)
	// A retried copy of the same acquire finds its own value: acquired, and
	// the TTL is not reset.
	require.NoError(t, n.Client().PExpire(ctx, "lock", 5*time.Second).Err())
	res, err = n.Acquire(ctx, "lock", "mine", 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, node.Acquired, res)
	assert.LessOrEqual(t, n.Client().PTTL(ctx, "lock").Val(), 5*time.Second)
}

func TestConstructionRejectsBadInput(t *testing.T) {
	_, err := node.Dial("")
	require.ErrorContains(t, err, "empty address")
	_, err = node.Dial("127.0.0.1:1", node.WithCallTimeout(-time.Second))
	require.ErrorContains(t, err, "-1s")
	_, err = node.Dial("127.0.0.1:1", node.WithMaxInFlight(0))
	require.ErrorContains(t, err, "max in flight 0")
	_, err = node.NewRedis(nil)
	require.Error(t, err)
}

func TestDeadNodeFailsFast(t *testing.T) {
	port, err := redisproc.FreePort()
	require.NoError(t, err)
	// Count the dials instead of timing them: go-redis's default is 5
	// attempts 100 ms apart.
	var dials atomic.Int32
	n := dial(t, "127.0.0.1:"+itoa(port), node.WithCallTimeout(5*time.Second),
		node.WithClientOptions(func(o *redis.Options) {
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
		}))
	_, err = n.Acquire(context.Background(), "k", "v", time.Second)
	require.Error(t, err)
	assert.False(t, errors.Is(err, node.ErrOverloaded))
	require.ErrorIs(t, err, node.ErrNotSent, "Dial's client does not retry: a refused dial had no effect")
	assert.Equal(t, int32(1), dials.Load(), "a refused connection must not retry dials")
}

func itoa(i int) string { return strconv.Itoa(i) }
