package redisnode

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// The shared-lock scripts on a real server and on a real Redis Cluster (a
// key without and with a hash tag): groups share or exclude, the limit
// holds, a retried acquire is idempotent, a release removes only its own
// hold and refuses a foreign one, the guard refuses a late acquire, extend
// never creates, waiting marks keep yielding readers out for their TTL, and
// the key's expiry covers its latest hold and goes with the last one.
func TestShapeScriptsOnRealServers(t *testing.T) {
	ctx := context.Background()
	srv := redisproc.StartT(t, redisproc.Config{})
	cl := redisproc.StartClusterT(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	clusterNode, err := New(cc)
	require.NoError(t, err)
	for _, tc := range []struct {
		n   *Node
		raw redis.Cmdable
	}{
		{dialT(t, srv.Addr()), adminT(t, &redis.Options{Addr: srv.Addr()})},
		{clusterNode, cc},
	} {
		n := tc.n
		t.Run(n.Addr(), func(t *testing.T) {
			for _, key := range []string{"shape:plain", "{tenant}:shape"} {
				waiting := wire.WaitingKey(key)
				hold := func(group, id string) redlock.Hold { return redlock.Hold{Group: group, ID: id} }
				acquire := func(h redlock.Hold, ttl time.Duration) int {
					t.Helper()
					n, err := n.AcquireHold(ctx, key, h, ttl)
					require.NoError(t, err)
					return n
				}
				release := func(h redlock.Hold, guard time.Duration) bool {
					t.Helper()
					ok, err := n.ReleaseHold(ctx, key, h, guard)
					require.NoError(t, err)
					return ok
				}
				extend := func(h redlock.Hold, ttl time.Duration) bool {
					t.Helper()
					ok, err := n.ExtendHold(ctx, key, h, ttl)
					require.NoError(t, err)
					return ok
				}
				gone := func(k string) {
					t.Helper()
					exists, err := tc.raw.Exists(ctx, k).Result()
					require.NoError(t, err)
					assert.Zero(t, exists, "key %q left", k)
				}
				// Reentrant owner A, twice; the retried copy counts once.
				a1, a2 := hold("o:A", "t1"), hold("o:A", "t2")
				assert.Equal(t, 1, acquire(a1, time.Minute))
				assert.Equal(t, 1, acquire(a1, time.Minute), "retried copy")
				assert.Equal(t, 2, acquire(a2, 2*time.Minute))
				assert.Zero(t, acquire(hold("o:B", "t3"), time.Minute), "another owner")
				assert.Zero(t, acquire(hold("o:A\nx", "t4"), time.Minute), "a group that only starts like A's")
				pttl, err := tc.raw.PTTL(ctx, key).Result()
				require.NoError(t, err)
				assert.Greater(t, pttl, time.Minute, "the key's expiry covers the latest hold")
				// A foreign release or extend (B naming A's token) is refused.
				assert.False(t, release(hold("o:B", "t1"), 0))
				assert.False(t, extend(hold("o:B", "t1"), time.Minute))
				assert.True(t, extend(a1, time.Minute))
				assert.True(t, release(a1, 0))
				assert.False(t, release(a1, time.Minute), "already released: leaves a guard")
				assert.Zero(t, acquire(a1, time.Minute), "the guard refuses a late copy")
				assert.True(t, release(a2, 0))
				gone(key)
				assert.False(t, extend(a2, time.Minute), "extend never creates")
				gone(key)
				// An expired hold no longer counts.
				assert.Equal(t, 1, acquire(hold("o:B", "t5"), time.Millisecond))
				time.Sleep(10 * time.Millisecond)
				assert.Equal(t, 1, acquire(hold("o:C", "t6"), time.Minute))
				assert.True(t, release(hold("o:C", "t6"), 0))
				gone(key)

				// Readers share; a writer (limit 1) is refused and marks
				// itself waiting; a yielding reader is refused while the mark
				// lives, and a writer that gets in removes its mark.
				r1, r2, r3 := hold("r", "r1"), hold("r", "r2"), hold("r", "r3")
				assert.Equal(t, 1, acquire(r1, time.Minute))
				assert.Equal(t, 2, acquire(r2, time.Minute))
				w := redlock.Hold{Group: "w", ID: "w1", Limit: 1, Waiter: "writer", WaitTTL: time.Minute}
				assert.Zero(t, acquire(w, time.Minute))
				yielding := r3
				yielding.Yield = true
				assert.Zero(t, acquire(yielding, time.Minute), "a writer waits")
				assert.Equal(t, 3, acquire(r3, time.Minute), "a reader that does not yield")
				assert.True(t, release(r1, 0))
				assert.True(t, release(r3, 0))
				assert.Zero(t, acquire(w, time.Minute), "r2 still reads")
				assert.True(t, release(r2, 0))
				assert.Equal(t, 1, acquire(w, time.Minute))
				gone(waiting)
				assert.Zero(t, acquire(redlock.Hold{Group: "w", ID: "w2", Limit: 1}, time.Minute), "one writer")
				assert.Zero(t, acquire(r1, time.Minute), "no reader while a writer holds")
				assert.True(t, release(w, 0))
				gone(key)

				// A mark lives WaitTTL, then a yielding reader gets in, and
				// the mark's key has an expiry while it lives.
				w3 := redlock.Hold{Group: "w", ID: "w3", Limit: 1, Waiter: "writer3", WaitTTL: 200 * time.Millisecond}
				r4 := redlock.Hold{Group: "r", ID: "r4", Yield: true}
				assert.Equal(t, 1, acquire(r1, time.Minute))
				assert.Zero(t, acquire(w3, time.Minute))
				mttl, err := tc.raw.PTTL(ctx, waiting).Result()
				require.NoError(t, err)
				assert.Positive(t, mttl, "the mark's key expires with its latest mark")
				assert.LessOrEqual(t, mttl, 200*time.Millisecond)
				assert.Zero(t, acquire(r4, time.Minute), "the mark lives")
				require.Eventually(t, func() bool {
					got, err := n.AcquireHold(ctx, key, r4, time.Minute)
					return err == nil && got == 2
				}, 10*time.Second, 10*time.Millisecond, "a yielding reader gets in once the mark expired")
				gone(waiting)
				assert.True(t, release(r1, 0))
				assert.True(t, release(r4, 0))
				gone(key)

				// Semaphore: at most Limit holds.
				s1, s2, s3 := redlock.Hold{Group: "s:2", ID: "s1", Limit: 2}, redlock.Hold{Group: "s:2", ID: "s2", Limit: 2}, redlock.Hold{Group: "s:2", ID: "s3", Limit: 2}
				assert.Equal(t, 1, acquire(s1, time.Minute))
				assert.Equal(t, 2, acquire(s2, time.Minute))
				assert.Zero(t, acquire(s3, time.Minute))
				assert.True(t, release(s1, 0))
				assert.Equal(t, 2, acquire(s3, time.Minute))
				assert.True(t, release(s2, 0))
				assert.True(t, release(s3, 0))
				gone(key)
			}
		})
	}
}
