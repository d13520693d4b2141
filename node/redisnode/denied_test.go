package redisnode_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// aclDenials sums the counts of the server's ACL LOG entries (one entry per
// reason, object and user; count says how many times it happened).
func aclDenials(t *testing.T, admin *redis.Client) (total int64) {
	t.Helper()
	entries, err := admin.ACLLog(context.Background(), 100).Result()
	require.NoError(t, err)
	for _, e := range entries {
		total += e.Count
	}
	return total
}

// a server that denies access (WRONGPASS, NOAUTH,
// NOPERM) ends Lock at once, with the server's reply, naming the node.
// "At once" is shown by outcome: Lock with a one-minute context returns
// while that context is still alive, its error does not wrap
// context.DeadlineExceeded, and the server's ACL LOG counts one denied
// attempt, not a retry loop's worth. Before the fix Lock retried until its
// context ended.
func TestLockDeniedFailsAtOnce(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = admin.Close() })
	for _, cmd := range [][]any{
		{"ACL", "SETUSER", "admin", "on", ">adminpw", "~*", "&*", "+@all"},
		{"ACL", "SETUSER", "noeval", "on", ">pw", "~*", "+@all", "-evalsha", "-eval"},
		{"CONFIG", "SET", "requirepass", "right"},
	} {
		require.NoError(t, admin.Do(ctx, cmd...).Err(), cmd)
	}
	require.NoError(t, admin.Do(ctx, "AUTH", "admin", "adminpw").Err())
	admin = redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "admin", Password: "adminpw", Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = admin.Close() })

	for _, tc := range []struct{ name, addr, reply, user, pass string }{
		{"wrong password", "redis://:wrong@" + srv.Addr(), "WRONGPASS ", "", "wrong"},
		{"no password", srv.Addr(), "NOAUTH ", "", ""},
		{"user without EVALSHA", "redis://noeval:pw@" + srv.Addr(), "NOPERM ", "noeval", "pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, admin.ACLLogReset(ctx).Err())
			n, err := redisnode.Dial(tc.addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = n.Close() })
			c, err := redlock.New([]redlock.Node{n}, redlock.WithNodeTimeout(time.Second), redlock.WithReleaseTimeout(time.Second))
			require.NoError(t, err)
			t.Cleanup(func() {
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				require.NoError(t, c.Close(cctx))
			})
			m, err := c.NewMutex("locks:denied", redlock.WithRetryBackoff(time.Millisecond, 2*time.Millisecond))
			require.NoError(t, err)

			lctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			lease, err := m.Lock(lctx)
			require.Error(t, err)
			assert.Nil(t, lease)
			assert.NoError(t, lctx.Err(), "Lock returned before its context ended")
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorIs(t, err, redlock.ErrNotObtained)
			assert.Contains(t, err.Error(), srv.Addr(), "names the node")
			assert.Contains(t, err.Error(), tc.reply)

			var qe *redlock.QuorumError
			require.ErrorAs(t, err, &qe)
			require.Len(t, qe.Nodes, 1)
			nerr := qe.Nodes[0].Err
			assert.ErrorIs(t, nerr, redlock.ErrNodeDenied)
			var rerr redis.Error
			require.True(t, errors.As(nerr, &rerr), "the reply stays in the chain: %v", nerr)
			assert.Contains(t, rerr.Error(), tc.reply)
			assert.Contains(t, nerr.Error(), "redlock: node denied access: "+srv.Addr()+": ")
			assert.True(t, strings.HasSuffix(nerr.Error(), ": "+rerr.Error()), nerr.Error())
			if tc.reply == "NOPERM " {
				assert.Contains(t, nerr.Error(), "refused EVALSHA: ", "names the refused command")
			}
			assert.ErrorIs(t, nerr, redlock.ErrNotSent, "refused before it ran: nothing to release")

			denials := aclDenials(t, admin)
			// The same denial once, straight from go-redis: the count one
			// attempt leaves (a failed HELLO ... AUTH is retried as AUTH).
			require.NoError(t, admin.ACLLogReset(ctx).Err())
			direct := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: tc.user, Password: tc.pass,
				Protocol: 2, DisableIdentity: true, MaxRetries: -1})
			defer direct.Close()
			require.Error(t, direct.EvalSha(ctx, "0000000000000000000000000000000000000000", []string{"locks:denied"}).Err())
			once := aclDenials(t, admin)
			t.Logf("%v; ACL LOG: %d denial(s), %d for one direct call", err, denials, once)
			assert.Equal(t, once, denials, "one attempt, no retries")
		})
	}
}
