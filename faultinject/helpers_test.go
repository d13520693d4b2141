package faultinject

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/lockkey"
)

func TestMain(m *testing.M) {
	lockkey.DiscardClientLog()
	goleak.VerifyTestMain(m)
}

// backendKinds are the backends the fault tests run on. Docker runs when its
// engine answers; locally it is skipped otherwise, and with CI=true a missing
// engine is a failure (RequireBackend).
var backendKinds = []BackendKind{Process, Memory, Docker}

// forEachBackend runs f as a subtest per backend kind. A missing
// redis-server (process) or Docker engine skips that subtest, or fails it
// when CI=true.
func forEachBackend(t *testing.T, f func(t *testing.T, kind BackendKind)) {
	t.Helper()
	for _, kind := range backendKinds {
		t.Run(string(kind), func(t *testing.T) {
			RequireBackend(t, kind)
			f(t, kind)
		})
	}
}

// client returns a raw go-redis client to addr with the lock-friendly
// options (context deadlines on socket I/O, no retries).
func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(lockkey.ClientOptions(addr))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clients returns one raw client per master of c, through its shared proxy.
func clients(t *testing.T, c *Cluster) []*redis.Client {
	t.Helper()
	out := make([]*redis.Client, c.N())
	for i := range out {
		out[i] = client(t, c.Addr(i))
	}
	return out
}

// ctxT returns a context that ends after d or with the test.
func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// do runs f with a one-second deadline.
func do[T any](t *testing.T, f func(ctx context.Context) (T, error)) (T, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	return f(ctx)
}

// eventually polls cond every 10ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, timeout, 10*time.Millisecond, append([]any{msg}, args...)...)
}

// waitUp polls until every client answers PING: after a restart or a heal,
// the first command on a pooled connection may still meet the old, closed
// one.
func waitUp(t *testing.T, rs ...*redis.Client) {
	t.Helper()
	for _, r := range rs {
		eventually(t, 5*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			return r.Ping(ctx).Err() == nil
		}, "master at %s answers PING", r.Options().Addr)
	}
}
