package redlock_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/lockclient"
	"github.com/quorumlock/quorumlock/internal/obslabel"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// keptReleases counts the releases a client kept for a retry on node 0
// (queued, or refused at a backlog cap: dropped without entering it), and
// each node's yes votes.
type keptReleases struct {
	redlock.NopObserver
	queued, dropped atomic.Int64
	yes             [3]atomic.Int64
}

func (k *keptReleases) NodeState(_ context.Context, e redlock.NodeStateEvent) {
	switch {
	case e.Index != 0 || e.RunID != "": // another node, or a server run met
	case obslabel.BacklogChange(e.Err, e.Delta) == "dropped":
		k.dropped.Add(1)
	case e.Delta > 0:
		k.queued.Add(1)
	}
}

func (k *keptReleases) NodeCall(_ context.Context, e redlock.NodeEvent) {
	if e.Op == redlock.OpAcquire && e.Err == nil && e.Index < len(k.yes) {
		k.yes[e.Index].Add(1)
	}
}

// A master paused past many cycles: N=3, master 0 SIGSTOPped while one
// client (16 goroutines) runs at least 1,100 Lock/Unlock cycles on the
// other two and has kept at least 1,100 releases for the paused one. None
// is dropped, and once the master resumes and the client has closed (with
// a deadline), no lock key is left on any master (release guards, which
// expire, are counted apart). The client reaches the paused master through
// a pool of 2,600 established connections, as a busy service's would: each
// acquire the paused master did not answer was written on one of them and
// runs when it resumes (a connection opened during the pause never gets
// past HELLO). Each cycle takes a lock of its own name, so that every
// release lost on the paused master shows as a key of its own. With the
// old per-node cap of 1,024 releases the newest ones were dropped, and
// those that the in-flight cap had kept from being sent left their keys,
// for a TTL: 2 to 5 keys in each of 6 runs, 25 in one under -race.
func TestLongPauseKeepsEveryRelease(t *testing.T) {
	const (
		paused  = 0
		kept    = 1100   // cycles, and releases kept for the paused master, at least
		cycles  = 20_000 // at most
		ttl     = 5 * time.Minute
		workers = 16
		pool    = 2600 // established connections to the paused master
	)
	var servers []*redisproc.Server
	var raw, rcs []*redis.Client // a reader, and the lock's go-redis client, per master
	var nodes []redlock.Node
	var dials atomic.Int64 // successful dials to the paused master
	for i := range 3 {
		s := redisproc.StartT(t, redisproc.Config{})
		opt := lockclient.Configure(&redis.Options{Addr: s.Addr()})
		if i == paused {
			opt.PoolSize = pool
			opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err == nil {
					dials.Add(1)
				}
				return c, err
			}
		}
		rc := redis.NewClient(opt)
		nd, err := redisnode.New(rc)
		require.NoError(t, err)
		admin := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { _ = rc.Close(); _ = admin.Close() })
		servers, raw, rcs, nodes = append(servers, s), append(raw, admin), append(rcs, rc), append(nodes, nd)
	}
	ctx := context.Background()
	// Open the pool: pool connections at once, each initialised (HELLO)
	// by a PING, then put back idle.
	conns := make([]*redis.Conn, pool)
	for i := range conns {
		conns[i] = rcs[paused].Conn()
		require.NoError(t, conns[i].Ping(ctx).Err())
	}
	for _, cn := range conns {
		require.NoError(t, cn.Close())
	}
	require.Equal(t, uint32(pool), rcs[paused].PoolStats().IdleConns, "idle connections to the paused master")
	count := &keptReleases{}
	c, err := redlock.New(nodes, redlock.WithNodeTimeout(20*time.Millisecond), redlock.WithReleaseTimeout(20*time.Millisecond),
		redlock.WithObserver(count))
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = c.Close(context.Background())
		}
	})
	name := func(i int) string { return fmt.Sprintf("%s:%d", lockName, i) }
	// Cycle until every master has voted yes: each is identified, and
	// its scripts are loaded.
	cycle := func(i int) error {
		m, err := c.NewMutex(name(i), redlock.WithTTL(ttl))
		if err != nil {
			return err
		}
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		lease, err := m.Lock(lctx)
		if err != nil {
			return err
		}
		return lease.Unlock(ctx)
	}
	waitFor(t, "every master to vote yes", func() bool {
		_ = cycle(-1)
		return count.yes[0].Load() > 0 && count.yes[1].Load() > 0 && count.yes[2].Load() > 0
	})

	require.NoError(t, servers[paused].Pause())
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = servers[paused].Resume()
		}
	})
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= cycles || i >= kept && count.queued.Load()+count.dropped.Load() >= kept {
					return
				}
				// The two healthy masters confirm (or a loaded machine makes
				// a Lock fail: its rollback is kept the same way); the paused
				// master's release is kept.
				if cycle(int(i)) != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	done := min(next.Load(), cycles)
	queued, dropped := count.queued.Load(), count.dropped.Load()
	t.Logf("paused: %d cycles (%d failed), %d releases queued for master %d, %d dropped, %d in its backlog, %d connections to it",
		done, failed.Load(), queued, paused, dropped, c.Stats().Backlog[paused], dials.Load())
	require.GreaterOrEqual(t, queued+dropped, int64(kept), "the cycles kept too few releases for the paused master")

	require.NoError(t, servers[paused].Resume())
	resumed = true
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	closeErr := c.Close(cctx)
	closed = true
	// Every connection the client opened to the paused master has been
	// accepted, and each that the client closed (at a call's deadline, with
	// an acquire or a release written on it) has been freed by the server,
	// once it ran what it had read.
	waitFor(t, "the resumed master to run what it had queued", func() bool {
		info, err := raw[paused].Info(ctx, "stats", "clients").Result()
		if err != nil {
			return false
		}
		ps := rcs[paused].PoolStats()
		return infoInt(info, "total_connections_received") >= dials.Load() &&
			infoInt(info, "connected_clients") <= int64(ps.TotalConns+ps.PubSubStats.Active)+1 // + the reader's
	})
	keys, err := raw[paused].Keys(ctx, "*").Result()
	require.NoError(t, err)
	var lockKeys []string
	guards, line := 0, 0
	for _, k := range keys {
		switch {
		case strings.Contains(k, ":release-guard:"):
			guards++ // expires with its TTL; refuses a late acquire
		case strings.HasSuffix(k, ":queue"), strings.HasSuffix(k, ":queue:ttl"):
			// A waiter's entry in the line, left by an attempt whose call
			// the pause kept from finishing (a later attempt of the same
			// Lock call, refused behind an earlier one's key): it expires
			// with the entry TTL.
			line++
			assert.Positive(t, raw[paused].PTTL(ctx, k).Val(), "the line key %s expires", k)
		default:
			lockKeys = append(lockKeys, k)
		}
	}
	t.Logf("after resume and Close (%v): %d lock keys, %d release guards and %d line keys on master %d", closeErr, len(lockKeys), guards, line, paused)
	assert.NoError(t, closeErr)
	assert.Zero(t, dropped, "releases dropped")
	assert.Empty(t, lockKeys, "lock keys left on the resumed master")
	for i := range raw {
		if i == paused {
			continue
		}
		n, err := raw[i].Keys(ctx, "*").Result()
		require.NoError(t, err)
		for _, k := range n {
			if strings.HasSuffix(k, ":queue") || strings.HasSuffix(k, ":queue:ttl") {
				assert.Positive(t, raw[i].PTTL(ctx, k).Val(), "the line key %s expires", k)
				continue
			}
			assert.Contains(t, k, ":release-guard:", "lock key left on master %d", i)
		}
	}
}

// infoInt reads the integer field name from an INFO reply (-1 when absent).
func infoInt(info, name string) int64 {
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":")
		if !ok {
			continue
		}
		var n int64
		if _, err := fmt.Sscan(v, &n); err == nil {
			return n
		}
	}
	return -1
}
