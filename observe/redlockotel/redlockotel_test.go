package redlockotel_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/lockclient"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/observe/redlockotel"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestMain skips the package when redis-server is not installed (every
// test and the Example need it), unless CI=true, where that fails.
func TestMain(m *testing.M) {
	if _, err := redisproc.LookPath(); err != nil && os.Getenv("CI") != "true" {
		fmt.Println("redlockotel: skipped, redis-server is not installed:", err)
		os.Exit(0)
	}
	redis.SetLogger(quiet{}) // a paused master's timeouts are expected here
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// world is three real masters whose go-redis clients carry redisotel's
// tracing hook, an Observer, and what they recorded.
type world struct {
	servers []*redisproc.Server
	nodes   []redlock.Node
	raw     []*redis.Client
	spans   *tracetest.SpanRecorder
	reader  *sdkmetric.ManualReader
	obs     *redlockotel.Observer
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(w.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(w.reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	for range 3 {
		s := redisproc.StartT(t, redisproc.Config{})
		rdb := redis.NewClient(lockclient.Configure(&redis.Options{Addr: s.Addr()}))
		require.NoError(t, redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)))
		nd, err := redisnode.New(rdb)
		require.NoError(t, err)
		raw := redis.NewClient(&redis.Options{Addr: s.Addr()})
		t.Cleanup(func() { _ = s.Resume(); _ = rdb.Close(); _ = raw.Close() })
		w.servers = append(w.servers, s)
		w.nodes = append(w.nodes, nd)
		w.raw = append(w.raw, raw)
	}
	var err error
	w.obs, err = redlockotel.New(redlockotel.WithTracerProvider(tp), redlockotel.WithMeterProvider(mp),
		redlockotel.WithLockClass(func(name string) string {
			class, _, _ := strings.Cut(name, ":")
			return class
		}))
	require.NoError(t, err)
	return w
}

func (w *world) client(t *testing.T, opts ...redlock.ClientOption) *redlock.Client {
	t.Helper()
	c, err := redlock.New(w.nodes, append([]redlock.ClientOption{
		redlock.WithNodeTimeout(200 * time.Millisecond), redlock.WithReleaseTimeout(200 * time.Millisecond), redlock.WithObserver(w.obs),
	}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, c.Close(ctx))
	})
	return c
}

// count sums a metric's data points (a histogram's counts) whose
// attributes include every one of want ("key=value").
func (w *world) count(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, w.reader.Collect(context.Background(), &rm))
	has := func(set attribute.Set) bool {
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			got, ok := set.Value(attribute.Key(k))
			if !ok || got.String() != v {
				return false
			}
		}
		return true
	}
	total := 0.0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					if has(dp.Attributes) {
						total += float64(dp.Count)
					}
				}
			case metricdata.Histogram[int64]: // quorumlock.lock.attempts: the attempts, summed
				for _, dp := range d.DataPoints {
					if has(dp.Attributes) {
						total += float64(dp.Sum)
					}
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					if has(dp.Attributes) {
						total += float64(dp.Value)
					}
				}
			}
		}
	}
	return total
}

// ended returns the ended spans called name whose lock is lock.
func (w *world) ended(name, lock string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range w.spans.Ended() {
		if s.Name() != name {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == redlockotel.AttrLockName && kv.Value.AsString() == lock {
				out = append(out, s)
			}
		}
	}
	return out
}

// children returns the names of the ended spans whose parent is span.
func (w *world) children(span sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range w.spans.Ended() {
		if s.Parent().SpanID() == span.SpanContext().SpanID() {
			out = append(out, s.Name())
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// events returns the values of key in the span's events called name.
func events(s sdktrace.ReadOnlySpan, name string, key attribute.Key) []string {
	var out []string
	for _, e := range s.Events() {
		if e.Name != name {
			continue
		}
		for _, kv := range e.Attributes {
			if kv.Key == key {
				out = append(out, kv.Value.String())
			}
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "%s: not within 30s", what)
		time.Sleep(10 * time.Millisecond)
	}
}

// On real masters, spans and metrics change as each event says, and the
// go-redis commands' own spans (redisotel) are children of the lock's.
func TestSpansAndMetricsOnRealMasters(t *testing.T) {
	w := newWorld(t)
	c := w.client(t)
	ctx := context.Background()

	t.Run("lock cycle", func(t *testing.T) {
		m, err := c.NewMutex("cycle:1", redlock.WithFencing(), redlock.WithTTL(2*time.Second))
		require.NoError(t, err)
		lease, err := m.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, lease.Unlock(ctx))
		waitFor(t, "every node's acquire and release", func() bool {
			return w.count(t, "quorumlock.node.calls", "quorumlock.lock.class=cycle", "quorumlock.node.op=acquire") == 3 &&
				w.count(t, "quorumlock.node.calls", "quorumlock.lock.class=cycle", "quorumlock.node.op=release") == 3
		})
		acq := w.ended(redlockotel.SpanAcquire, "cycle:1")
		require.Len(t, acq, 1)
		assert.Equal(t, "ok", attr(acq[0], redlockotel.AttrOutcome).AsString())
		assert.Equal(t, int64(1), attr(acq[0], redlockotel.AttrAttempts).AsInt64())
		tok, _ := lease.Fence()
		assert.Equal(t, tok, attr(acq[0], redlockotel.AttrFenceToken).AsInt64())
		assert.Equal(t, codes.Unset, acq[0].Status().Code)
		kids := w.children(acq[0])
		assert.Contains(t, kids, "evalsha", "go-redis's command spans are the acquire's children: %v", kids)
		assert.Contains(t, kids, "info", "the first contact's INFO too: %v", kids)
		assert.True(t, attr(acq[0], redlockotel.AttrFenceEpoch).AsBool(), "a new lock's first token starts an epoch")
		assert.Equal(t, 1.0, w.count(t, "quorumlock.lock.attempts", "quorumlock.lock.class=cycle", "quorumlock.outcome=ok"))
		rel := w.ended(redlockotel.SpanRelease, "cycle:1")
		require.Len(t, rel, 1)
		assert.Contains(t, w.children(rel[0]), "evalsha")
		assert.Equal(t, []string{"released"}, events(rel[0], "quorumlock.lease.end", redlockotel.AttrLeaseEnd))
		assert.Equal(t, 1.0, w.count(t, "quorumlock.lock.wait.duration", "quorumlock.lock.class=cycle", "quorumlock.outcome=ok", "quorumlock.lock.shape=mutex"))
		assert.Equal(t, 1.0, w.count(t, "quorumlock.lease.hold.duration", "quorumlock.lock.class=cycle", "quorumlock.lease.end=released"))
		assert.Equal(t, 1.0, w.count(t, "quorumlock.fence.epochs", "quorumlock.lock.class=cycle"))
		assert.Equal(t, 3.0, w.count(t, "quorumlock.node.calls", "quorumlock.lock.class=cycle", "quorumlock.node.op=acquire", "quorumlock.vote=yes"))
	})

	t.Run("contended wait", func(t *testing.T) {
		holder, err := w.client(t).NewMutex("contended:1")
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
			return w.count(t, "quorumlock.node.calls", "quorumlock.lock.class=contended", "quorumlock.node.op=acquire", "quorumlock.vote=taken") >= 4
		})
		require.NoError(t, held.Unlock(ctx))
		require.NoError(t, <-done)
		var waited sdktrace.ReadOnlySpan
		for _, s := range w.ended(redlockotel.SpanAcquire, "contended:1") {
			if attr(s, redlockotel.AttrAttempts).AsInt64() > 1 {
				waited = s
			}
		}
		require.NotNil(t, waited, "the waiter's acquire span")
		assert.Equal(t, "ok", attr(waited, redlockotel.AttrOutcome).AsString())
		votes := events(waited, "quorumlock.node.call", redlockotel.AttrVote)
		assert.GreaterOrEqual(t, len(votes), 2*int(attr(waited, redlockotel.AttrAttempts).AsInt64()), "each attempt's deciding votes")
		assert.Contains(t, votes, "taken")
		assert.Equal(t, 2.0, w.count(t, "quorumlock.lock.wait.duration", "quorumlock.lock.class=contended", "quorumlock.outcome=ok"), "the holder's and the waiter's")
	})

	t.Run("rollback", func(t *testing.T) {
		m, err := c.NewMutex("rollback:1")
		require.NoError(t, err)
		require.NoError(t, w.raw[0].Set(ctx, "rollback:1", "another owner", time.Minute).Err())
		require.NoError(t, w.servers[1].Pause())
		_, err = m.TryLock(ctx)
		require.ErrorIs(t, err, redlock.ErrNotObtained)
		waitFor(t, "the rollback on master 2 and the paused master's release queued", func() bool {
			return w.count(t, "quorumlock.node.calls", "quorumlock.lock.class=rollback", "quorumlock.node.op=rollback", "quorumlock.vote=yes") == 1 &&
				w.count(t, "quorumlock.release.backlog.changes", "quorumlock.backlog.change=queued", "quorumlock.lock.class=rollback") == 1
		})
		// The node's backlog may also hold a call of an earlier subtest
		// that timed out on a loaded machine (a LeaveQueue): this
		// rollback's release is one of its entries.
		assert.GreaterOrEqual(t, w.count(t, "quorumlock.release.backlog", "quorumlock.node="+w.servers[1].Addr()), 1.0)
		acq := w.ended(redlockotel.SpanAcquire, "rollback:1")
		require.Len(t, acq, 1)
		assert.Equal(t, codes.Error, acq[0].Status().Code)
		assert.Equal(t, "contended", attr(acq[0], redlockotel.AttrOutcome).AsString())
		assert.Equal(t, int64(1), attr(acq[0], redlockotel.AttrAttempts).AsInt64())
		assert.Contains(t, events(acq[0], "quorumlock.node.call", redlockotel.AttrNodeOp), "rollback", "the yes vote rolled back")
		require.NoError(t, w.servers[1].Resume())
		waitFor(t, "the queued release retried once the master answers", func() bool {
			return w.count(t, "quorumlock.release.backlog", "quorumlock.node="+w.servers[1].Addr()) == 0 &&
				w.count(t, "quorumlock.release.backlog.changes", "quorumlock.backlog.change=done", "quorumlock.lock.class=rollback") == 1
		})
		require.NoError(t, w.raw[0].Del(ctx, "rollback:1").Err())
	})

	t.Run("renewal failure", func(t *testing.T) {
		m, err := c.NewMutex("renewed:1", redlock.WithTTL(time.Second), redlock.WithAutoRenew(0))
		require.NoError(t, err)
		lease, err := m.Lock(ctx)
		require.NoError(t, err)
		require.NoError(t, w.servers[1].Pause())
		require.NoError(t, w.servers[2].Pause())
		<-lease.Done()
		require.NoError(t, w.servers[1].Resume())
		require.NoError(t, w.servers[2].Resume())
		var failed []sdktrace.ReadOnlySpan
		for _, s := range w.ended(redlockotel.SpanExtend, "renewed:1") {
			assert.True(t, attr(s, redlockotel.AttrRenewal).AsBool())
			if attr(s, redlockotel.AttrOutcome).AsString() == "no_quorum" {
				failed = append(failed, s)
			}
		}
		require.NotEmpty(t, failed)
		assert.Equal(t, codes.Error, failed[0].Status().Code)
		assert.Contains(t, events(failed[0], "quorumlock.node.call", redlockotel.AttrVote), "timeout", "the cause: masters timed out")
		require.NotEmpty(t, failed[0].Events())
		assert.Equal(t, "exception", failed[0].Events()[len(failed[0].Events())-1].Name, "the error is recorded")
		assert.GreaterOrEqual(t, w.count(t, "quorumlock.lock.extend.duration", "quorumlock.lock.class=renewed", "quorumlock.outcome=no_quorum", "quorumlock.renewal=true"), 1.0)
		assert.GreaterOrEqual(t, w.count(t, "quorumlock.node.calls", "quorumlock.lock.class=renewed", "quorumlock.node.op=extend", "quorumlock.vote=timeout"), 2.0)
		// The lease reports its end to the observer just after Done closes.
		waitFor(t, "the lease's hold recorded as expired", func() bool {
			return w.count(t, "quorumlock.lease.hold.duration", "quorumlock.lock.class=renewed", "quorumlock.lease.end=expired") == 1
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
			for _, raw := range w.raw {
				n += raw.Exists(ctx, "lost:1").Val()
			}
			return n == 3
		})
		require.NoError(t, w.raw[0].Del(ctx, "lost:1").Err())
		require.NoError(t, w.raw[1].Del(ctx, "lost:1").Err())
		require.ErrorIs(t, lease.Extend(ctx), redlock.ErrLockLost)
		ext := w.ended(redlockotel.SpanExtend, "lost:1")
		require.Len(t, ext, 1)
		assert.Equal(t, "lost", attr(ext[0], redlockotel.AttrOutcome).AsString())
		assert.False(t, attr(ext[0], redlockotel.AttrRenewal).AsBool())
		assert.Equal(t, []string{"lost"}, events(ext[0], "quorumlock.lease.end", redlockotel.AttrLeaseEnd))
		assert.Equal(t, 1.0, w.count(t, "quorumlock.lease.hold.duration", "quorumlock.lock.class=lost", "quorumlock.lease.end=lost"))
		_ = lease.Unlock(ctx)
	})
}
