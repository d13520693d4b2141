package redlock_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // a dead master's failed dials are expected here
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

const lockName = "quorumlock:test"

// mem returns n in-memory masters and the same as redlock.Nodes.
func mem(n int) ([]*memnode.Node, []redlock.Node) {
	ms := make([]*memnode.Node, n)
	ns := make([]redlock.Node, n)
	for i := range ms {
		ms[i] = memnode.New(fmt.Sprintf("mem-%d", i))
		ns[i] = ms[i]
	}
	return ms, ns
}

// newClient builds a client that the test's cleanup closes (and requires to
// close cleanly within a minute).
func newClient(t *testing.T, nodes []redlock.Node, opts ...redlock.ClientOption) *redlock.Client {
	t.Helper()
	c, err := redlock.New(nodes, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, c.Close(ctx))
	})
	return c
}

func newMutex(t *testing.T, c *redlock.Client, opts ...redlock.LockOption) *redlock.Mutex {
	t.Helper()
	m, err := c.NewMutex(lockName, opts...)
	require.NoError(t, err)
	return m
}

// nodeErrs returns the per-node errors of a *QuorumError, or fails.
func nodeErrs(t *testing.T, err error) []error {
	t.Helper()
	var qe *redlock.QuorumError
	require.ErrorAs(t, err, &qe)
	out := make([]error, len(qe.Nodes))
	for i, r := range qe.Nodes {
		out[i] = r.Err
	}
	return out
}

// ownKeys counts the lock keys left on in-memory masters.
func ownKeys(ms []*memnode.Node) int {
	n := 0
	for _, m := range ms {
		n += len(m.Keys())
	}
	return n
}

// warmUp takes and releases the lock once, so that the client has read
// every server's identity (its first contact) before the test proper.
func warmUp(t *testing.T, m *redlock.Mutex) {
	t.Helper()
	lease, err := m.TryLock(context.Background())
	require.NoError(t, err)
	require.NoError(t, lease.Unlock(context.Background()))
}

// plain hides every optional capability of a node.
type plain struct{ redlock.Node }

// starveCPU leaves the process one P (GOMAXPROCS=1) shared with 8 goroutines
// that spin, so timers and wake-ups run late, as on a starved machine. The
// returned function (also called by the test's cleanup) stops them and
// restores GOMAXPROCS.
func starveCPU(tb testing.TB) (end func()) {
	tb.Helper()
	prev := runtime.GOMAXPROCS(1)
	stop := make(chan struct{})
	var spin sync.WaitGroup
	for range 8 {
		spin.Add(1)
		go func() {
			defer spin.Done()
			for x := 0; ; x++ {
				if x%1024 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
			}
		}()
	}
	var once sync.Once
	end = func() {
		once.Do(func() {
			close(stop)
			spin.Wait()
			runtime.GOMAXPROCS(prev)
		})
	}
	tb.Cleanup(end)
	return end
}

// fenceOf returns a fenced lease's token, failing the test without one.
func fenceOf(t testing.TB, l *redlock.Lease) int64 {
	t.Helper()
	tok, ok := l.Fence()
	require.True(t, ok, "the lease has no fencing token")
	return tok
}

// rwLock is a read-write lock's two mutexes, as Client.NewRWMutex returns
// them: r takes read leases, w the write lease.
type rwLock struct{ r, w *redlock.Mutex }

// rwOf wraps NewRWMutex's results.
func rwOf(r, w *redlock.Mutex, err error) (rwLock, error) { return rwLock{r: r, w: w}, err }
