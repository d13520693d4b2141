package redlock_test

// Tests against real redis-server processes (internal/redisproc), through
// the go-redis adapter (redisnode). Under CI=true a missing redis-server
// fails them.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// masters is N real redis-server processes with a lock node and a raw
// client (to set up and scan state) on each.
type masters struct {
	servers []*redisproc.Server
	nodes   []redlock.Node
	raw     []*redis.Client
}

func startMasters(t *testing.T, n int) *masters {
	t.Helper()
	ms := &masters{}
	for range n {
		s := redisproc.StartT(t, redisproc.Config{})
		nd, err := redisnode.Dial(s.Addr())
		require.NoError(t, err)
		raw := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = nd.Close(); _ = raw.Close() })
		ms.servers = append(ms.servers, s)
		ms.nodes = append(ms.nodes, nd)
		ms.raw = append(ms.raw, raw)
	}
	return ms
}

// keys returns every key on master i with its value ("" for non-strings).
func (ms *masters) keys(t *testing.T, i int) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	ks, err := ms.raw[i].Keys(ctx, "*").Result()
	require.NoError(t, err)
	for _, k := range ks {
		out[k], _ = ms.raw[i].Get(ctx, k).Result()
	}
	return out
}

// pause stops master i with SIGSTOP and returns its resume function; the
// test's cleanup resumes it too.
func (ms *masters) pause(t *testing.T, i int) (resume func()) {
	t.Helper()
	require.NoError(t, ms.servers[i].Pause())
	var once sync.Once
	resume = func() { once.Do(func() { require.NoError(t, ms.servers[i].Resume()) }) }
	t.Cleanup(func() { once.Do(func() { _ = ms.servers[i].Resume() }) })
	return resume
}

// identifyAll has c, observed by rec, contact each of its n masters once (a
// TryLock and Unlock of another lock name) and waits until rec saw the n
// acquire calls: a vote still waiting for its node's first identification
// when its attempt is decided is never sent, which a test that counts its
// calls cannot have.
func identifyAll(t *testing.T, c *redlock.Client, rec *recorder, n int) {
	t.Helper()
	ctx := context.Background()
	other, err := c.NewMutex("other", redlock.WithTTL(time.Minute))
	require.NoError(t, err)
	l, err := other.TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	waitFor(t, "the client's first calls to every master", func() bool {
		calls := 0
		for _, v := range rec.votes(redlock.OpAcquire) {
			calls += v
		}
		return calls >= n
	})
}

// realClient uses 1s node timeouts: under -race on a loaded 2-core machine a
// first call (dial, script load) can take longer than the 50ms default.
// Tests about timeouts pass their own, which override these.
func realClient(t *testing.T, nodes []redlock.Node, opts ...redlock.ClientOption) *redlock.Client {
	t.Helper()
	return newClient(t, nodes, append([]redlock.ClientOption{
		redlock.WithNodeTimeout(time.Second), redlock.WithReleaseTimeout(time.Second),
	}, opts...)...)
}

// Issue 8, defect 1: 4 clients cycle Lock/Unlock (TTL 2s, N=5) while master
// 0 is SIGSTOPped for 1.8s; the resumed master runs straggler acquires with
// a fresh TTL. After every Close returned nil, no lock key may be left
// (before the fix: 10 of 10 runs left one).
func TestPauseShorterThanTTLLeavesNoOrphan(t *testing.T) {
	ms := startMasters(t, 5)
	var clients []*redlock.Client
	for range 4 {
		c, err := redlock.New(ms.nodes, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithReleaseTimeout(200*time.Millisecond))
		require.NoError(t, err)
		clients = append(clients, c)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var acquired atomic.Int32
	for _, c := range clients {
		m, err := c.NewMutex(lockName, redlock.WithTTL(2*time.Second), redlock.WithRetryBackoff(time.Millisecond, 10*time.Millisecond))
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				lease, err := m.Lock(ctx)
				cancel()
				if err == nil {
					acquired.Add(1)
					_ = lease.Unlock(context.Background())
				}
			}
		}()
	}
	waitFor(t, "the clients to cycle on all five masters", func() bool { return acquired.Load() >= 8 })
	resume := ms.pause(t, 0)
	paused, before := time.Now(), acquired.Load()
	// The fault: master 0 stays paused for 1.8s, far past the node timeout
	// and less than the TTL, and at least until the clients have gone on
	// without it: a release it did not answer waits for a retry.
	stragglers := 0
	waitFor(t, "a release kept for the paused master", func() bool {
		for _, c := range clients {
			stragglers = max(stragglers, c.Stats().Backlog[0])
		}
		return stragglers > 0 && time.Since(paused) >= 1800*time.Millisecond
	})
	t.Logf("paused %v: %d acquisitions without master 0, up to %d releases kept for it", time.Since(paused).Round(time.Millisecond), acquired.Load()-before, stragglers)
	resume()
	// The resumed master runs what was queued on it (the late acquires
	// among it); the clients go on cycling with it until every release
	// kept for it has been retried.
	after := acquired.Load()
	waitFor(t, "the clients to cycle with the resumed master and retry its releases", func() bool {
		for _, c := range clients {
			if c.Stats().Backlog[0] > 0 {
				return false
			}
		}
		return acquired.Load() >= after+8
	})
	close(stop)
	wg.Wait()
	for _, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		require.NoError(t, c.Close(ctx))
		cancel()
	}
	assert.Positive(t, acquired.Load())
	for k := range ms.keys(t, 0) {
		assert.False(t, strings.HasPrefix(k, lockName) && !strings.Contains(k, "release-guard"), "orphan lock key %q on the paused master", k)
	}
	for i := 1; i < 5; i++ {
		_, held := ms.keys(t, i)[lockName]
		assert.False(t, held, "lock key left on master %d", i)
	}
}

// Issue 8, defect 3, on a real server: 127.0.0.1:P and localhost:P are one
// server. With a dead third master, 2 of 3 votes could only come from that
// one server: refused, naming both addresses.
func TestSameServerUnderTwoSpellings(t *testing.T) {
	ms := startMasters(t, 1)
	port := ms.servers[0].Addr()[strings.LastIndexByte(ms.servers[0].Addr(), ':')+1:]
	alias, err := redisnode.Dial("localhost:" + port)
	require.NoError(t, err)
	defer alias.Close()
	deadPort, err := redisproc.FreePort()
	require.NoError(t, err)
	dead, err := redisnode.Dial("127.0.0.1:" + strconv.Itoa(deadPort))
	require.NoError(t, err)
	defer dead.Close()
	c := realClient(t, []redlock.Node{ms.nodes[0], alias, dead})
	_, err = newMutex(t, c).TryLock(context.Background())
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	require.ErrorIs(t, err, redlock.ErrInvalidConfig)
	assert.Contains(t, err.Error(), ms.servers[0].Addr())
	assert.Contains(t, err.Error(), "localhost:"+port)
	require.NoError(t, c.Close(context.Background()))
	_, held := ms.keys(t, 0)[lockName]
	assert.False(t, held)
}

// Issue 8, defect 8, on real servers: Locks whose context had already ended
// send nothing, so they leave no release guard (before the fix: 17 guards
// for 20 such Locks).
func TestCancelledLockWritesNoGuard(t *testing.T) {
	ms := startMasters(t, 3)
	c := realClient(t, ms.nodes)
	m := newMutex(t, c)
	warmUp(t, m) // identify the servers first
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 20 {
		_, err := m.Lock(ctx)
		require.ErrorIs(t, err, context.Canceled)
	}
	require.NoError(t, c.Close(context.Background()))
	for i := range ms.raw {
		assert.Empty(t, ms.keys(t, i), "master %d", i)
	}
}

// A paused master is not waited for: TryLock and Unlock return while the
// call to it is still in flight (its deadline is a minute away), and no key
// is left once it resumes.
func TestPausedMasterIsNotWaitedFor(t *testing.T) {
	ms := startMasters(t, 5)
	slow := &returns{Node: ms.nodes[2]}
	nodes := append(append(append([]redlock.Node(nil), ms.nodes[:2]...), slow), ms.nodes[3:]...)
	c := newClient(t, nodes, redlock.WithNodeTimeout(time.Minute), redlock.WithReleaseTimeout(time.Minute))
	m := newMutex(t, c, redlock.WithTTL(2*time.Minute))
	warmup, err := c.NewMutex("warm-up", redlock.WithTTL(2*time.Minute)) // identifies the servers
	require.NoError(t, err)
	warmUp(t, warmup) // identify the servers first
	resume := ms.pause(t, 2)
	lease, err := m.TryLock(context.Background())
	require.NoError(t, err)
	// The paused master's calls can only return at their deadline, a
	// minute away: none has returned, so neither call waited for it.
	assert.Zero(t, slow.n.Load(), "TryLock waited for the paused master")
	require.NoError(t, lease.Unlock(context.Background()))
	assert.Zero(t, slow.n.Load(), "Unlock waited for the paused master")
	resume()
	require.NoError(t, c.Close(context.Background()))
	for i := range ms.raw {
		_, held := ms.keys(t, i)[lockName]
		assert.False(t, held, "master %d", i)
	}
}

// returns counts the calls on lockName of a node that have returned.
type returns struct {
	redlock.Node
	n atomic.Int32
}

func (r *returns) Acquire(ctx context.Context, k, v string, ttl time.Duration) (bool, error) {
	if k == lockName {
		defer r.n.Add(1)
	}
	return r.Node.Acquire(ctx, k, v, ttl)
}

func (r *returns) Release(ctx context.Context, k, v string, guard time.Duration) (bool, error) {
	if k == lockName {
		defer r.n.Add(1)
	}
	return r.Node.Release(ctx, k, v, guard)
}

// Killed masters: a quorum of live ones still grants the lock; without a
// quorum the error names the dead ones, and refused connections (certainly
// unsent) need no release retry.
func TestKilledMasters(t *testing.T) {
	ms := startMasters(t, 5)
	c := realClient(t, ms.nodes)
	m := newMutex(t, c)
	warmUp(t, m) // identify the servers first
	require.NoError(t, ms.servers[0].Kill())
	require.NoError(t, ms.servers[1].Kill())
	lease, err := m.TryLock(context.Background())
	require.NoError(t, err)
	require.NoError(t, lease.Unlock(context.Background()))
	require.NoError(t, ms.servers[2].Kill())
	_, err = m.TryLock(context.Background())
	require.ErrorIs(t, err, redlock.ErrNotObtained)
	for i, e := range nodeErrs(t, err)[:3] {
		if e != nil && !errors.Is(e, redlock.ErrNoReply) {
			assert.ErrorIs(t, e, redlock.ErrNotSent, "master %d", i)
			assert.Contains(t, err.Error(), ms.servers[i].Addr())
		}
	}
	require.NoError(t, c.Close(context.Background()))
	assert.Equal(t, []int{0, 0, 0, 0, 0}, c.Stats().Backlog)
	for i := 3; i < 5; i++ {
		_, held := ms.keys(t, i)[lockName]
		assert.False(t, held, "master %d", i)
	}
}

// Several clients on real masters never hold the lock at once.
func TestMutualExclusionOnRealMasters(t *testing.T) {
	ms := startMasters(t, 5)
	var holders, acquired atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		c := realClient(t, ms.nodes)
		m := newMutex(t, c, redlock.WithTTL(5*time.Second))
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 15 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					lease, err := m.Lock(ctx)
					cancel()
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, int32(1), holders.Add(1), "two holders")
					acquired.Add(1)
					time.Sleep(time.Millisecond)
					assert.True(t, lease.Valid())
					holders.Add(-1)
					assert.NoError(t, lease.Unlock(context.Background()))
				}
			}()
		}
	}
	wg.Wait()
	assert.Equal(t, int32(135), acquired.Load())
}

// The quorum over a mix of node kinds: a standalone master, a 3-master Redis
// Cluster and a Sentinel-managed master. Many lock names spread over the
// cluster's shards (hash tags keep each lock's keys in one slot), and a
// held name cannot be taken twice.
func TestQuorumOverStandaloneClusterAndSentinel(t *testing.T) {
	ms := startMasters(t, 1)
	cl := redisproc.StartClusterT(t, 3)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = cc.Close() })
	clusterNode, err := redisnode.New(cc)
	require.NoError(t, err)
	sn := redisproc.StartSentinelT(t)
	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: sn.MasterName, SentinelAddrs: []string{sn.Sentinel.Addr()}, ContextTimeoutEnabled: true, MaxRetries: -1,
	})
	t.Cleanup(func() { _ = fc.Close() })
	sentinelNode, err := redisnode.New(fc)
	require.NoError(t, err)

	c := realClient(t, []redlock.Node{ms.nodes[0], clusterNode, sentinelNode})
	ctx := context.Background()
	perShard := map[string]int{}
	for i := range 60 {
		name := fmt.Sprintf("orders:%d", i)
		if i%3 == 0 {
			name = fmt.Sprintf("{tenant-%d}:orders", i) // a hash tag picks the slot
		}
		m, err := c.NewMutex(name)
		require.NoError(t, err)
		lease, err := m.TryLock(ctx)
		require.NoError(t, err, name)
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained, "%s taken twice", name)
		for _, addr := range cl.Addrs() {
			raw := redis.NewClient(&redis.Options{Addr: addr})
			if n, _ := raw.Exists(ctx, name).Result(); n == 1 {
				perShard[addr]++
			}
			_ = raw.Close()
		}
		require.NoError(t, lease.Extend(ctx))
		require.NoError(t, lease.Unlock(ctx))
	}
	assert.Len(t, perShard, 3, "60 names should spread over the 3 shards: %v", perShard)
	require.NoError(t, c.Close(ctx))
	for i := range 60 {
		_, held := ms.keys(t, 0)[fmt.Sprintf("orders:%d", i)]
		assert.False(t, held)
	}
}

// Issue 10, on real masters: a holder running Do loses a majority (SIGSTOP)
// so its renewals fail; its function's context is cancelled before another
// client's winning attempt starts (a history on one monotonic clock). Issue
// 16, item 14: also when the holder's process is starved of CPU
// (GOMAXPROCS=1 and 8 goroutines spinning). The other client tries once
// the masters resume, after the holder's deadline: the test proves that Do
// cancels on its own clock, with no renewal reply, not how late a starved
// timer may fire (a time bound; the cancel margin, a tenth of the TTL, is
// there for that, and WithCancelMargin(0) passes here).
func TestDoCancelsBeforeAnotherClientHolds(t *testing.T) {
	for _, starved := range []bool{false, true} {
		t.Run(map[bool]string{false: "idle", true: "starved"}[starved], func(t *testing.T) {
			ms := startMasters(t, 5)
			doCancelsBeforeAnotherClientHolds(t, ms, func() (end func()) {
				if starved {
					return starveCPU(t)
				}
				return func() {}
			})
		})
	}
}

// doCancelsBeforeAnotherClientHolds runs the scenario; starve is called once
// the holder's Do holds the lock and has renewed it once (under starvation
// its attempts could not fit in the node timeout), and what it returns ends
// the starvation when the masters resume, once the holder's validity
// deadline has passed (its cancel was due a margin before), so that the
// other client's attempts can win.
func doCancelsBeforeAnotherClientHolds(t *testing.T, ms *masters, starve func() (end func())) {
	holder := newMutex(t, realClient(t, ms.nodes, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithReleaseTimeout(100*time.Millisecond)), redlock.WithTTL(time.Second))
	other := newMutex(t, realClient(t, ms.nodes, redlock.WithNodeTimeout(50*time.Millisecond), redlock.WithReleaseTimeout(100*time.Millisecond)), redlock.WithTTL(time.Second))
	warmUp(t, other) // identify the servers first
	warmUp(t, holder)

	var cancelledAt time.Time
	var cause error
	held := make(chan *redlock.Lease, 1)
	done := make(chan error, 1)
	go func() {
		done <- holder.Do(context.Background(), func(ctx context.Context, lease *redlock.Lease) error {
			held <- lease
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute): // only if Do never cancels
			}
			cancelledAt, cause = time.Now(), context.Cause(ctx)
			return nil
		})
	}()
	lease := <-held
	// The holder's renewals work before the fault: its deadline moves once.
	first := lease.Until()
	waitFor(t, "the holder's first renewal", func() bool {
		select {
		case <-lease.Done():
			require.FailNow(t, "the holder's lease ended before any renewal", "%v", lease.Err())
		default:
		}
		return lease.Until().After(first)
	})
	endStarve := starve()
	var resumes []func()
	for i := range 3 {
		resumes = append(resumes, ms.pause(t, i))
	}
	// The masters stay paused until the holder's validity deadline has
	// passed: no renewal can extend the lease any more (Extend refuses
	// after the deadline), and the keys expire on the paused masters. When
	// the holder's function was cancelled is up to Do alone.
	waitFor(t, "the holder's validity deadline to pass", func() bool { return time.Now().After(lease.Until()) })
	endStarve()
	for _, r := range resumes {
		r()
	}
	// The other client tries once the masters run again. It shares this
	// process, so while the holder is starved its own timers are late too:
	// an attempt started during the pause could outlive its node timeout and
	// win when the masters resume, an order no client in a process of its
	// own could see (a loaded CI machine saw such an attempt start before
	// the starved holder's cancel).
	type win struct {
		start time.Time
		lease *redlock.Lease
	}
	won := make(chan win, 1)
	go func() {
		for {
			start := time.Now()
			l, err := other.TryLock(context.Background())
			if err == nil {
				won <- win{start, l}
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	w := <-won
	err := <-done
	require.ErrorIs(t, err, redlock.ErrLockLost)
	require.ErrorIs(t, cause, redlock.ErrLockLost)
	assert.True(t, cancelledAt.Before(w.start), "the function's context was cancelled at %v, after the other client's winning attempt started at %v", cancelledAt, w.start)
	require.NoError(t, w.lease.Unlock(context.Background()))
}

// Issue 10, on real masters: with a lock-delay, a lock whose holder vanished
// without Unlock is free only after TTL + delay (without the delay, after
// the TTL).
func TestLockDelayOnRealMasters(t *testing.T) {
	ms := startMasters(t, 3)
	c := realClient(t, ms.nodes, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithReleaseTimeout(100*time.Millisecond))
	ttl, delay := 500*time.Millisecond, 2*time.Second
	m := newMutex(t, c, redlock.WithTTL(ttl), redlock.WithLockDelay(delay), redlock.WithRetryBackoff(5*time.Millisecond, 20*time.Millisecond))
	warmUp(t, m) // identify the servers first

	start := time.Now()
	_, err := m.TryLock(context.Background()) // its holder "crashes": no Unlock
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next, err := m.Lock(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), ttl+delay, "taken again before TTL + lock-delay")
	require.NoError(t, next.Unlock(context.Background()))
}

// Issue 10, on real masters: fencing tokens strictly increase across the
// holders of competing clients while random minorities are paused, and the
// fenced resource accepts every holder's write.
func TestFencingTokensOnRealMasters(t *testing.T) {
	ms := startMasters(t, 5)
	var store memnode.FencedStore
	var mu sync.Mutex
	var last int64
	var got int
	stop := make(chan struct{})
	faults := make(chan struct{})
	go func() {
		defer close(faults)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			resume := ms.pause(t, i%5)
			time.Sleep(100 * time.Millisecond)
			resume()
		}
	}()
	var wg sync.WaitGroup
	for k := range 3 {
		c := realClient(t, ms.nodes, redlock.WithNodeTimeout(100*time.Millisecond), redlock.WithReleaseTimeout(100*time.Millisecond))
		m := newMutex(t, c, redlock.WithTTL(2*time.Second), redlock.WithFencing())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 60 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				lease, err := m.Lock(ctx)
				cancel()
				if !assert.NoError(t, err, "client %d", k) {
					return
				}
				mu.Lock()
				assert.Greater(t, fenceOf(t, lease), last, "token not above the previous holder's")
				last = fenceOf(t, lease)
				got++
				mu.Unlock()
				assert.NoError(t, store.Write(fenceOf(t, lease), fmt.Sprint(k)))
				_ = lease.Unlock(context.Background())
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-faults
	assert.Equal(t, 180, got)
}

// Issue 10, on real masters: a master of the holder's bare quorum is killed
// and restarted without persistence. With the restart quarantine its vote
// does not count and the second client is refused; without it the second
// client gets the lock while the first still holds it.
func TestRestartQuarantineOnRealMasters(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprint("quarantine=", quarantine), func(t *testing.T) {
			ms := startMasters(t, 3)
			ctx := context.Background()
			var opts []redlock.ClientOption
			// The quarantine must cover the keys' TTL (NewMutex refuses a
			// shorter one): both are 3s, so that the servers soon are older.
			const quarantineFor = 3 * time.Second
			if quarantine {
				opts = append(opts, redlock.WithRestartQuarantine(quarantineFor))
			}
			a := newMutex(t, realClient(t, ms.nodes, opts...), redlock.WithTTL(quarantineFor))
			b := newMutex(t, realClient(t, ms.nodes, opts...), redlock.WithTTL(quarantineFor))
			// The servers are older than the quarantine, as the client reads
			// their age (INFO uptime less the second it may overstate).
			waitOlder(t, ms, ms.nodes, quarantineFor)
			require.NoError(t, ms.raw[2].Set(ctx, lockName, "foreign", time.Minute).Err())
			held, err := a.TryLock(ctx) // A holds {0, 1}
			require.NoError(t, err)
			require.NoError(t, ms.servers[0].Restart()) // kill -9, start empty
			require.NoError(t, ms.raw[2].Del(ctx, lockName).Err())
			// B now sees 0 (empty after the restart) and 2 (free); 1 is A's.
			var other *redlock.Lease
			for range 50 { // the first call to the restarted master meets a dead connection
				if other, err = b.TryLock(ctx); err == nil || !errors.Is(err, redlock.ErrNotObtained) {
					break
				}
				if errs := nodeErrs(t, err); errs[0] == nil || errors.Is(errs[0], redlock.ErrNodeQuarantined) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !quarantine {
				require.NoError(t, err, "the unprotected twin shows the violation")
				assert.True(t, held.Valid() && other.Valid(), "two valid holders")
				require.NoError(t, other.Unlock(ctx))
				return
			}
			require.ErrorIs(t, err, redlock.ErrNotObtained)
			require.ErrorIs(t, nodeErrs(t, err)[0], redlock.ErrNodeQuarantined, "%v", err)
			assert.Contains(t, err.Error(), "quarantined: "+ms.servers[0].Addr())
			assert.True(t, held.Valid())
			_ = held.Unlock(ctx)
		})
	}
}

// On real masters, with a renewal every ~20ms racing Unlock (an Unlock
// that did not wait out a running renewal once returned while a master
// still had the released lease's key): when Unlock returns nil, at most
// N-quorum masters still hold the lease's key (their releases finish in
// the background), and the same client's next Lock never meets it: none
// of its acquires is refused (no other client takes the lock, so a refusal
// could only be the last lease's key). After Close no key is left.
func TestUnlockLeavesNoKeyWhileRenewalRaces(t *testing.T) {
	ms := startMasters(t, 3)
	rec := &recorder{}
	c := realClient(t, ms.nodes, redlock.WithObserver(rec))
	m := newMutex(t, c, redlock.WithTTL(2*time.Second), redlock.WithAutoRenew(0.01))
	warmUp(t, m)
	ctx := context.Background()
	behind := 0
	for i := range 300 {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		lease, err := m.Lock(lctx)
		cancel()
		require.NoError(t, err, "cycle %d", i)
		time.Sleep(time.Duration(5+i%41) * time.Millisecond) // the workload: hold 5-45ms
		if err := lease.Unlock(ctx); err != nil {
			continue // not confirmed: nothing was promised
		}
		held := 0
		for _, raw := range ms.raw {
			if v, err := raw.Get(ctx, lockName).Result(); err == nil && strings.HasPrefix(v, lease.Token()) {
				held++
			}
		}
		assert.LessOrEqual(t, held, 1, "cycle %d: %d of 3 masters still hold the unlocked lease's key", i, held)
		behind += held
	}
	require.NoError(t, c.Close(ctx))
	taken := 0
	rec.mu.Lock()
	for _, e := range rec.nodes {
		if e.Op == redlock.OpAcquire && errors.Is(e.Err, redlock.ErrNodeTaken) {
			taken++
		}
	}
	rec.mu.Unlock()
	assert.Zero(t, taken, "acquires that met the client's own released key")
	for j, raw := range ms.raw {
		n, err := raw.Exists(ctx, lockName).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "master %d: the lock key is left after Close", j)
	}
	t.Logf("keys still on a master when Unlock returned: %d in 300 cycles", behind)
}
