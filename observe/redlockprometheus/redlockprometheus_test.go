package redlockprometheus_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/observe/redlockprometheus"
	"github.com/quorumlock/quorumlock/redlock"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // a paused master's timeouts are expected here
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// masters starts n redis-server processes, with a lock node and a raw
// client on each.
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
		t.Cleanup(func() { _ = s.Resume(); _ = nd.Close(); _ = raw.Close() })
		ms.servers = append(ms.servers, s)
		ms.nodes = append(ms.nodes, nd)
		ms.raw = append(ms.raw, raw)
	}
	return ms
}

// metrics reads reg: every sample as "name{label=value,...}" (labels
// sorted) -> its value, a histogram's sample count under "name_count{...}"
// and its sum under "name_sum{...}".
func metrics(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(labels)
			key := "{" + strings.Join(labels, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+key] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+key] = m.GetHistogram().GetSampleSum()
			case dto.MetricType_COUNTER:
				out[mf.GetName()+key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[mf.GetName()+key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// sum adds the samples whose key starts with prefix and contains every one
// of the labels.
func sum(got map[string]float64, prefix string, labels ...string) float64 {
	total := 0.0
	for k, v := range got {
		if !strings.HasPrefix(k, prefix+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			total += v
		}
	}
	return total
}

// waitFor polls cond every 10ms until it holds, failing after 30s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "%s: not within 30s", what)
		time.Sleep(10 * time.Millisecond)
	}
}

func newClient(t *testing.T, nodes []redlock.Node, opts ...redlock.ClientOption) *redlock.Client {
	t.Helper()
	c, err := redlock.New(nodes, append([]redlock.ClientOption{
		redlock.WithNodeTimeout(200 * time.Millisecond), redlock.WithReleaseTimeout(200 * time.Millisecond),
	}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, c.Close(ctx))
	})
	return c
}

// On real masters, the metrics change as each event says: a fenced lock
// cycle, a contended wait, a rollback with its backlog, a renewal failure
// with its cause (the nodes' timeouts) ending in an expired lease, a lost
// lease, and quarantines.
func TestMetricsOnRealMasters(t *testing.T) {
	ms := startMasters(t, 3)
	reg := prometheus.NewRegistry()
	obs := redlockprometheus.New(redlockprometheus.WithLockClass(func(name string) string {
		class, _, _ := strings.Cut(name, ":")
		return class
	}))
	reg.MustRegister(obs)
	c := newClient(t, ms.nodes, redlock.WithObserver(obs))
	ctx := context.Background()

	t.Run("lock cycle", func(t *testing.T) {
		m, err := c.NewMutex("cycle:1", redlock.WithFencing(), redlock.WithTTL(2*time.Second))
		require.NoError(t, err)
		lease, err := m.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Unlock(ctx))
		waitFor(t, "every node's acquire and release", func() bool {
			got := metrics(t, reg)
			return sum(got, "quorumlock_node_calls_total", "class=cycle", "op=acquire") == 3 &&
				sum(got, "quorumlock_node_calls_total", "class=cycle", "op=release") == 3
		})
		got := metrics(t, reg)
		assert.Equal(t, 1.0, got["quorumlock_lock_wait_seconds_count{class=cycle,outcome=ok,shape=mutex}"])
		assert.Equal(t, 1.0, got["quorumlock_lock_attempts_count{class=cycle,outcome=ok,shape=mutex}"])
		assert.Equal(t, 1.0, got["quorumlock_lock_attempts_sum{class=cycle,outcome=ok,shape=mutex}"], "one attempt")
		assert.Equal(t, 1.0, got["quorumlock_lock_release_seconds_count{class=cycle,outcome=ok,shape=mutex}"])
		assert.Equal(t, 1.0, got["quorumlock_lease_held_seconds_count{class=cycle,end=released,shape=mutex}"])
		assert.Equal(t, 1.0, got["quorumlock_fence_epochs_total{class=cycle,shape=mutex}"], "a new lock's first token starts an epoch")
		assert.Equal(t, 3.0, sum(got, "quorumlock_node_calls_total", "class=cycle", "op=acquire", "vote=yes"))
		assert.GreaterOrEqual(t, sum(got, "quorumlock_node_calls_total", "class=cycle", "op=fence", "vote=yes"), 2.0)
	})

	t.Run("server check", func(t *testing.T) {
		// The masters run without AOF: the client's first contact with
		// each found it (once per run), and the quarantine is off.
		got := metrics(t, reg)
		for _, s := range ms.servers {
			assert.Equal(t, 1.0, got["quorumlock_server_findings_total{check=persistence,level=warn,node="+s.Addr()+"}"], "a master without AOF")
		}
		assert.Equal(t, 3.0, sum(got, "quorumlock_server_findings_total"), "nothing else is wrong with them")
	})

	t.Run("contended wait", func(t *testing.T) {
		holder, err := newClient(t, ms.nodes).NewMutex("contended:1")
		require.NoError(t, err)
		waiter, err := c.NewMutex("contended:1", redlock.WithRetryBackoff(20*time.Millisecond, 20*time.Millisecond))
		require.NoError(t, err)
		held, err := holder.Lock(ctx)
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() {
			lease, err := waiter.Lock(ctx)
			if err == nil {
				err = lease.Unlock(ctx)
			}
			done <- err
		}()
		waitFor(t, "two contended attempts", func() bool {
			return sum(metrics(t, reg), "quorumlock_node_calls_total", "class=contended", "op=acquire", "vote=taken") >= 4
		})
		require.NoError(t, held.Unlock(ctx))
		require.NoError(t, <-done)
		got := metrics(t, reg)
		assert.Equal(t, 1.0, got["quorumlock_lock_wait_seconds_count{class=contended,outcome=ok,shape=mutex}"], "one wait, ended by the lock")
		attempts := got["quorumlock_lock_attempts_sum{class=contended,outcome=ok,shape=mutex}"]
		// Two contended attempts, then the one that got the lock, or none:
		// the waiter held with the keys the holder's release handed it
		// (docs/handoff.md, the hold on grants).
		assert.GreaterOrEqual(t, attempts, 2.0, "two contended attempts, then the lock")
		// Each contended attempt was decided by two "taken" votes (N=3:
		// more than N-quorum noes), reported before the wait ended.
		assert.GreaterOrEqual(t, sum(got, "quorumlock_node_calls_total", "class=contended", "op=acquire", "vote=taken"), 2*(attempts-1))
	})

	t.Run("rollback", func(t *testing.T) {
		m, err := c.NewMutex("rollback:1")
		require.NoError(t, err)
		require.NoError(t, ms.raw[0].Set(ctx, "rollback:1", "another owner", time.Minute).Err())
		require.NoError(t, ms.servers[1].Pause())
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		waitFor(t, "the rollback on master 2, and the paused master's release queued", func() bool {
			got := metrics(t, reg)
			return sum(got, "quorumlock_node_calls_total", "class=rollback", "op=rollback", "vote=yes") == 1 &&
				got["quorumlock_release_backlog_changes_total{change=queued,class=rollback,node="+ms.servers[1].Addr()+"}"] == 1
		})
		got := metrics(t, reg)
		// The node's backlog may also hold a call of an earlier subtest
		// that timed out on a loaded machine (a LeaveQueue): this
		// rollback's release is one of its entries.
		assert.GreaterOrEqual(t, got["quorumlock_release_backlog{node="+ms.servers[1].Addr()+"}"], 1.0)
		assert.Equal(t, 1.0, got["quorumlock_lock_wait_seconds_count{class=rollback,outcome=contended,shape=mutex}"])
		assert.Equal(t, 1.0, got["quorumlock_lock_attempts_sum{class=rollback,outcome=contended,shape=mutex}"])
		assert.Equal(t, 1.0, got["quorumlock_node_calls_total{class=rollback,node="+ms.servers[1].Addr()+",op=acquire,vote=timeout}"])
		require.NoError(t, ms.servers[1].Resume())
		waitFor(t, "the queued release retried once the master answers", func() bool {
			got := metrics(t, reg)
			return got["quorumlock_release_backlog{node="+ms.servers[1].Addr()+"}"] == 0 &&
				got["quorumlock_release_backlog_changes_total{change=done,class=rollback,node="+ms.servers[1].Addr()+"}"] == 1
		})
		require.NoError(t, ms.raw[0].Del(ctx, "rollback:1").Err())
	})

	t.Run("renewal failure", func(t *testing.T) {
		m, err := c.NewMutex("renewed:1", redlock.WithTTL(time.Second), redlock.WithAutoRenew(0))
		require.NoError(t, err)
		lease, err := m.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, ms.servers[1].Pause())
		require.NoError(t, ms.servers[2].Pause())
		<-lease.Done()
		require.NoError(t, ms.servers[1].Resume())
		require.NoError(t, ms.servers[2].Resume())
		var qe *redlock.QuorumError
		require.ErrorAs(t, lease.Err(), &qe, "the expiry names the failed renewal")
		got := metrics(t, reg)
		assert.GreaterOrEqual(t, got["quorumlock_lock_extend_seconds_count{class=renewed,outcome=no_quorum,renewal=true,shape=mutex}"], 1.0)
		assert.GreaterOrEqual(t, sum(got, "quorumlock_node_calls_total", "class=renewed", "op=extend", "vote=timeout"), 2.0, "the cause: two masters timed out")
		// The lease reports its end to the observer just after Done closes.
		waitFor(t, "the lease's hold recorded as expired", func() bool {
			return metrics(t, reg)["quorumlock_lease_held_seconds_count{class=renewed,end=expired,shape=mutex}"] == 1
		})
		_ = lease.Unlock(ctx)
	})

	t.Run("loss", func(t *testing.T) {
		m, err := c.NewMutex("lost:1", redlock.WithTTL(10*time.Second))
		require.NoError(t, err)
		lease, err := m.Lock(ctx)
		require.NoError(t, err)
		waitFor(t, "the key on every master", func() bool {
			n := int64(0)
			for _, raw := range ms.raw {
				n += raw.Exists(ctx, "lost:1").Val()
			}
			return n == 3
		})
		require.NoError(t, ms.raw[0].Del(ctx, "lost:1").Err())
		require.NoError(t, ms.raw[1].Del(ctx, "lost:1").Err())
		require.ErrorIs(t, lease.Extend(ctx), redlock.ErrLockLost)
		got := metrics(t, reg)
		assert.Equal(t, 1.0, got["quorumlock_lock_extend_seconds_count{class=lost,outcome=lost,renewal=false,shape=mutex}"])
		assert.Equal(t, 1.0, got["quorumlock_lease_held_seconds_count{class=lost,end=lost,shape=mutex}"])
		assert.GreaterOrEqual(t, sum(got, "quorumlock_node_calls_total", "class=lost", "op=extend", "vote=not_held"), 2.0)
		err = lease.Unlock(ctx)
		require.True(t, err == nil || errors.Is(err, redlock.ErrLockLost), "%v", err)
	})

	t.Run("quarantine", func(t *testing.T) {
		q := newClient(t, ms.nodes, redlock.WithObserver(obs), redlock.WithRestartQuarantine(time.Hour))
		m, err := q.NewMutex("quarantined:1")
		require.NoError(t, err)
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		got := metrics(t, reg)
		for _, s := range ms.servers {
			assert.Equal(t, 1.0, got["quorumlock_node_quarantines_total{node="+s.Addr()+",restart=false}"], "a server met young")
		}
	})
}

// Every metric the package documents is registered, with its labels.
func TestEveryMetricIsDescribed(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(redlockprometheus.New()))
	ch := make(chan *prometheus.Desc, 32)
	redlockprometheus.New().Describe(ch)
	close(ch)
	var descs []string
	for d := range ch {
		descs = append(descs, d.String())
	}
	assert.Len(t, descs, 11)
	for _, name := range []string{"quorumlock_lock_wait_seconds", "quorumlock_lock_attempts", "quorumlock_lock_extend_seconds",
		"quorumlock_lock_release_seconds", "quorumlock_lease_held_seconds", "quorumlock_node_calls_total",
		"quorumlock_node_quarantines_total", "quorumlock_fence_epochs_total", "quorumlock_release_backlog",
		"quorumlock_release_backlog_changes_total", "quorumlock_server_findings_total"} {
		assert.Contains(t, strings.Join(descs, "\n"), `fqName: "`+name+`"`)
	}
}
