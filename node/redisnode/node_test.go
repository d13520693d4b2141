package redisnode

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/redlock"
)

func TestScriptsHaveHeaders(t *testing.T) {
	names, err := fs.Glob(Scripts, "scripts/*.lua")
	require.NoError(t, err)
	assert.Equal(t, []string{"scripts/acquire.lua", "scripts/acquire_fenced.lua", "scripts/acquire_hold.lua", "scripts/acquire_queued.lua", "scripts/config_check.lua", "scripts/extend.lua", "scripts/extend_hold.lua", "scripts/leave_queue.lua", "scripts/raise_fence.lua", "scripts/release.lua", "scripts/release_hold.lua"}, names)
	for _, name := range names {
		src, err := Scripts.ReadFile(name)
		require.NoError(t, err)
		var header strings.Builder
		for _, line := range strings.Split(string(src), "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header.WriteString(line + "\n")
		}
		wants := []string{"KEYS[1]", "ARGV[1]", "ARGV[2]", "Returns:", "Commands used:"}
		if name == "scripts/config_check.lua" { // a chunk run in front of others: it reads their last key and argument
			wants = []string{"KEYS[#KEYS]", "ARGV[#ARGV]", "Returns", "Commands used:"}
		}
		for _, want := range wants {
			assert.Contains(t, header.String(), want, name)
		}
	}
}

func TestScriptsRunAfterScriptFlush(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	rc := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	ok, err := n.Acquire(ctx, "k1", "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	// After SCRIPT FLUSH, EVALSHA gets NOSCRIPT and go-redis falls back to EVAL.
	require.NoError(t, rc.ScriptFlush(ctx).Err())
	ok, err = n.Acquire(ctx, "k2", "v", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestLockActionsOnRealServer(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	rc := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()

	ok, err := n.Acquire(ctx, "lock", "mine", 10*time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
	pttl := rc.PTTL(ctx, "lock").Val()
	assert.Greater(t, pttl, time.Duration(0))
	assert.LessOrEqual(t, pttl, 10*time.Second)

	ok, err = n.Acquire(ctx, "lock", "theirs", 10*time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "SET NX must not overwrite")
	assert.Equal(t, "mine", rc.Get(ctx, "lock").Val())

	ok, err = n.Extend(ctx, "lock", "theirs", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "extend with a foreign value must fail")
	ok, err = n.Extend(ctx, "lock", "mine", time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Greater(t, rc.PTTL(ctx, "lock").Val(), 10*time.Second, "the TTL was reset beyond the first one")

	ok, err = n.Release(ctx, "lock", "theirs", 0)
	require.NoError(t, err)
	assert.False(t, ok, "release with a foreign value must not delete")
	assert.Equal(t, int64(1), rc.Exists(ctx, "lock").Val())
	assert.Equal(t, int64(1), rc.DBSize(ctx).Val(), "the key alone: a refused acquire leaves nothing, and guard 0 leaves no guard")

	ok, err = n.Release(ctx, "lock", "mine", time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Empty(t, rc.Keys(ctx, "*").Val(), "a successful release leaves no key, not even a guard")

	ok, err = n.Extend(ctx, "lock", "mine", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "extend never resurrects a missing key")
	assert.Equal(t, int64(0), rc.Exists(ctx, "lock").Val())

	_, err = n.Acquire(ctx, "lock", "mine", 500*time.Microsecond)
	require.ErrorContains(t, err, "500µs")
	require.ErrorIs(t, err, redlock.ErrNotSent)
	_, err = n.Extend(ctx, "lock", "mine", 0)
	require.ErrorIs(t, err, redlock.ErrNotSent)
}

func TestReleaseGuardRefusesLateAcquire(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	rc := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()

	// The release arrives before the straggling acquire of the same value.
	ok, err := n.Release(ctx, "lock", "v1", time.Minute)
	require.NoError(t, err)
	assert.False(t, ok)
	g, err := guardKey("lock", "v1")
	require.NoError(t, err)
	assert.Greater(t, rc.PTTL(ctx, g).Val(), time.Duration(0), "the guard has a TTL")

	ok, err = n.Acquire(ctx, "lock", "v1", 10*time.Second)
	require.NoError(t, err)
	assert.False(t, ok, "the late acquire is refused")
	assert.Equal(t, int64(0), rc.Exists(ctx, "lock").Val(), "a refused acquire leaves no key")

	// Another value is not affected by that guard.
	ok, err = n.Acquire(ctx, "lock", "v2", 10*time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestAcquireIsIdempotentForItsOwnValue(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	rc := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	ok, err := n.Acquire(ctx, "lock", "mine", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	// A retried copy of the same acquire finds its own value: true, and the
	// TTL is not reset.
	require.NoError(t, rc.PExpire(ctx, "lock", time.Minute).Err())
	ok, err = n.Acquire(ctx, "lock", "mine", time.Hour)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.LessOrEqual(t, rc.PTTL(ctx, "lock").Val(), time.Minute)
}

func TestInfoRunIDChangesOnRestart(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	ctx := context.Background()
	first, err := n.Info(ctx)
	require.NoError(t, err)
	assert.Len(t, first.RunID, 40)

	require.NoError(t, srv.Restart())
	var second redlock.ServerInfo
	for i := 0; i < 200; i++ { // the pool may hold a dead connection first
		if second, err = n.Info(ctx); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, err)
	assert.Len(t, second.RunID, 40)
	assert.NotEqual(t, first.RunID, second.RunID, "a restart changes run_id")
}

// A paused server accepts connections and answers nothing: every call must
// still come back, with an error wrapping context.DeadlineExceeded, while the
// server is still paused. The New case uses go-redis's default ReadTimeout
// (3s) and MaxRetries (3): only ContextTimeoutEnabled bounds it.
func TestDeadlineBoundsCallsOnPausedServer(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	dialed := dialT(t, srv.Addr())
	uc := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer uc.Close()
	wrapped, err := New(uc)
	require.NoError(t, err)
	ctx := context.Background()
	for _, n := range []*Node{dialed, wrapped} {
		_, err := n.Info(ctx) // warm the pool: the calls below reuse a connection
		require.NoError(t, err)
	}

	require.NoError(t, srv.Pause())
	defer func() { _ = srv.Resume() }()
	calls := map[string]func(context.Context, *Node) error{
		"Acquire": func(ctx context.Context, n *Node) error { _, err := n.Acquire(ctx, "k", "v", time.Second); return err },
		"Extend":  func(ctx context.Context, n *Node) error { _, err := n.Extend(ctx, "k", "v", time.Second); return err },
		"Release": func(ctx context.Context, n *Node) error { _, err := n.Release(ctx, "k", "v", time.Second); return err },
		"Info":    func(ctx context.Context, n *Node) error { _, err := n.Info(ctx); return err },
	}
	for name, call := range calls {
		for i, n := range []*Node{dialed, wrapped} {
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			err := call(cctx, n)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, "%s on node %d", name, i)
			assert.NotErrorIs(t, err, redlock.ErrNotSent, "the kernel accepted the connection; the command may have been sent")
			var rerr redis.Error
			assert.False(t, errors.As(err, &rerr))
		}
	}
	assert.True(t, srv.Running(), "the server was paused (not dead) throughout")
	require.NoError(t, srv.Resume())
}

func TestRefusedDialWrapsNotSent(t *testing.T) {
	port, err := redisproc.FreePort()
	require.NoError(t, err)
	n := dialT(t, "127.0.0.1:"+strconv.Itoa(port))
	ctx := context.Background()
	_, err = n.Acquire(ctx, "k", "v", time.Second)
	require.ErrorIs(t, err, redlock.ErrNotSent, "Dial's client never retries: a refused dial had no effect")
	_, err = n.Release(ctx, "k", "v", time.Second)
	require.ErrorIs(t, err, redlock.ErrNotSent)
	_, err = n.Info(ctx)
	require.ErrorIs(t, err, redlock.ErrNotSent)
}

func TestDoneContextIsNotSent(t *testing.T) {
	n := dialT(t, "127.0.0.1:1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := n.Acquire(ctx, "k", "v", time.Second)
	require.ErrorIs(t, err, redlock.ErrNotSent)
	require.ErrorIs(t, err, context.Canceled)
}

// A client with go-redis's default retries may have sent a copy of the command
// before a later dial failed; cluster and Sentinel clients re-route. None of
// them may claim not-sent.
func TestRetryingClientsNeverClaimNotSent(t *testing.T) {
	port, err := redisproc.FreePort()
	require.NoError(t, err)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	clients := []redis.UniversalClient{
		redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: 1, DialerRetries: 1}),
		redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true, MaxRetries: -1}),
	}
	for _, c := range clients {
		n, err := New(c)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = n.Acquire(ctx, "k", "v", time.Second)
		cancel()
		require.Error(t, err, n.Addr())
		assert.NotErrorIs(t, err, redlock.ErrNotSent, n.Addr())
		require.NoError(t, c.Close())
	}
}

func TestRedisErrorsComeBackAsThemselves(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	rc := adminT(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	require.NoError(t, rc.LPush(ctx, "lock", "x").Err())

	check := func(what string, err error) {
		t.Helper()
		var rerr redis.Error
		require.True(t, errors.As(err, &rerr), "%s: %v", what, err)
		assert.Equal(t, any(rerr), any(err), "%s: returned unwrapped", what)
		assert.True(t, strings.HasPrefix(err.Error(), "WRONGTYPE"), "%s: text unchanged: %v", what, err)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, redlock.ErrNotSent)
	}
	_, err := n.Acquire(ctx, "lock", "v", time.Second)
	check("Acquire", err)
	_, err = n.Extend(ctx, "lock", "v", time.Second)
	check("Extend", err)
	_, err = n.Release(ctx, "lock", "v", time.Second)
	check("Release", err)

	// The context ends while the reply is on its way: the reply still wins.
	cctx, cancel := context.WithCancel(ctx)
	err = n.do(cctx, func(ctx context.Context) error {
		err := extendScript.Run(ctx, n.client, []string{"lock"}, "v", 1000).Err()
		cancel()
		return err
	})
	require.Error(t, cctx.Err())
	check("reply after cancel", err)
	assert.NotErrorIs(t, err, context.Canceled)
}

func TestGuardKeyNeedsValidTagWithBrace(t *testing.T) {
	for key, want := range map[string]string{
		"lock":        "{lock}:release-guard:",
		"a{b":         "{a{b}:release-guard:",
		"locks:{x}:y": "locks:{x}:y:release-guard:",
		"{x}":         "{x}:release-guard:",
	} {
		g, err := guardKey(key, "v")
		require.NoError(t, err, key)
		assert.True(t, strings.HasPrefix(g, want), "%s -> %s", key, g)
		assert.Len(t, g, len(want)+24)
	}
	for _, key := range []string{"a}b", "{}x}", "a{}b"} {
		_, err := guardKey(key, "v")
		require.ErrorIs(t, err, redlock.ErrNotSent, key)
		assert.ErrorContains(t, err, "no valid hash tag")
	}
}
