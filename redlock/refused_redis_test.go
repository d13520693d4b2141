package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Issue 32, item 6: a release that got an error reply (WRONGTYPE, or an
// ACL refusal) was retried until Close's deadline: Close(10s) waited the
// full 10 s. An error reply is an answer: the release is sent once, not
// queued, logged at Warn, and reported to the Observer (the release's node
// call carries the reply); Close returns before its context ends, with no
// release abandoned. Without the fix the Observer counts retries and Close
// returns only when its context has ended.
func TestRefusedReleaseIsNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		// node returns master 0's node after setting it up; refuse makes
		// master 0 refuse the lease's release.
		node    func(t *testing.T, ms *masters) redlock.Node
		refuse  func(t *testing.T, ms *masters)
		denied  bool
		warning string
	}{
		{
			name: "WRONGTYPE",
			node: func(t *testing.T, ms *masters) redlock.Node { return ms.nodes[0] },
			refuse: func(t *testing.T, ms *masters) {
				ctx := context.Background()
				require.NoError(t, ms.raw[0].Del(ctx, lockName).Err())
				require.NoError(t, ms.raw[0].HSet(ctx, lockName, "f", "v").Err()) // GET now answers WRONGTYPE
			},
			warning: "redlock: release refused by the node, not retried (the key expires with its TTL)",
		},
		{
			name: "user without DEL",
			node: func(t *testing.T, ms *masters) redlock.Node {
				require.NoError(t, ms.raw[0].Do(context.Background(), "ACL", "SETUSER", "nodel", "on", ">pw", "resetchannels", "~*",
					"-@all", "+evalsha", "+eval", "+info", "+get", "+set", "+exists", "+pexpire").Err())
				n, err := redisnode.Dial("redis://nodel:pw@" + ms.servers[0].Addr())
				require.NoError(t, err)
				t.Cleanup(func() { _ = n.Close() })
				return n
			},
			refuse:  func(*testing.T, *masters) {}, // release.lua's DEL is refused
			denied:  true,
			warning: "redlock: node denied access",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := startMasters(t, 3)
			nodes := append([]redlock.Node{tc.node(t, ms)}, ms.nodes[1:]...)
			rec := &recorder{}
			logs := &logRecords{}
			c := realClient(t, nodes, redlock.WithObserver(rec), redlock.WithLogger(slog.New(logs)))
			m := newMutex(t, c, redlock.WithTTL(time.Minute))
			ctx := context.Background()
			lease, err := m.Lock(ctx)
			require.NoError(t, err)
			tc.refuse(t, ms)
			require.NoError(t, lease.Unlock(ctx), "2 of 3 released")

			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, c.Close(cctx), "nothing was queued, nothing abandoned")
			assert.NoError(t, cctx.Err(), "Close returned before its context ended")

			rec.mu.Lock()
			var releases, retries []redlock.NodeEvent
			for _, e := range rec.nodes {
				switch {
				case e.Op == redlock.OpRetry:
					retries = append(retries, e)
				case e.Op == redlock.OpRelease && e.Index == 0:
					releases = append(releases, e)
				}
			}
			var queued int
			for _, e := range rec.backlog() {
				if e.Delta > 0 {
					queued++
				}
			}
			rec.mu.Unlock()
			assert.Empty(t, retries, "a refused release is not retried")
			assert.Zero(t, queued, "nor queued")
			require.Len(t, releases, 1, "sent once")
			var reply redis.Error
			require.True(t, errors.As(releases[0].Err, &reply), "the Observer gets the reply: %v", releases[0].Err)
			assert.Equal(t, tc.denied, errors.Is(releases[0].Err, redlock.ErrNodeDenied), "%v", releases[0].Err)
			t.Logf("release on master 0: %v", releases[0].Err)

			warned := logs.find(slog.LevelWarn, tc.warning)
			require.Len(t, warned, 1, "logged at Warn")
			assert.Equal(t, nodes[0].Addr(), warned[0]["node"])
			assert.Contains(t, warned[0]["err"], reply.Error())
		})
	}
}

// Issue 32, item 9: with a master that refuses every lock call (an ACL
// user without EVALSHA and EVAL), a program took the lock from 2 of 3 and
// the refusal was logged at Debug only. The client logs it at Warn, once
// for the node and its server run, however many calls it refuses, with
// the node's Addr and the error naming the refused command (never the
// password). Without the fix there is no Warn record.
func TestDeniedNodeIsLoggedOnce(t *testing.T) {
	ms := startMasters(t, 3)
	ctx := context.Background()
	const secret = "pw-Vq7Zr"
	require.NoError(t, ms.raw[0].Do(ctx, "ACL", "SETUSER", "noscripts", "on", ">"+secret, "resetchannels", "~*",
		"-@all", "+info", "+get", "+set", "+del", "+exists", "+pexpire").Err())
	denied, err := redisnode.Dial("redis://noscripts:" + secret + "@" + ms.servers[0].Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = denied.Close() })
	nodes := append([]redlock.Node{denied}, ms.nodes[1:]...)
	logs := &logRecords{}
	c := realClient(t, nodes, redlock.WithLogger(slog.New(logs)))
	m := newMutex(t, c)
	const cycles = 5
	for i := range cycles {
		lease, err := m.Lock(ctx)
		require.NoError(t, err, "cycle %d: 2 of 3 is a quorum", i)
		require.NoError(t, lease.Unlock(ctx))
	}
	// Lock returns once a quorum said yes: the denied master's reply of the
	// last cycle may be reported after it.
	waitFor(t, "every refused call logged at Debug", func() bool {
		return len(logs.find(slog.LevelDebug, "redlock: node call failed")) >= cycles
	})
	warned := logs.find(slog.LevelWarn, "redlock: node denied access")
	require.Len(t, warned, 1, "once for the node and run, not per call: %v", warned)
	assert.Equal(t, ms.servers[0].Addr(), warned[0]["node"])
	assert.Len(t, warned[0]["run_id"], 40, "the server run it was refused by")
	assert.Contains(t, warned[0]["err"], "refused EVALSHA")
	assert.NotContains(t, warned[0]["err"], secret)
	t.Logf("%v", warned[0])
}
