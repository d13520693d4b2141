package faultinject

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/faultinject/clockskew"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node"
)

func TestConfigErrorsNameTheBadValue(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{N: -1}, "-1"},
		{Config{Backend: "vm"}, `"vm"`},
		{Config{N: 3, Persistence: []Persistence{AOFAlways, NoPersistence}}, "2 elements"},
		{Config{Persistence: []Persistence{7}}, "7"},
		{Config{BasePort: 65534, N: 5}, "65534"},
		{Config{Label: "a b"}, `"a b"`},
	} {
		_, err := Start(t.Context(), tc.cfg)
		require.Error(t, err, "%+v", tc.cfg)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestFaultArgumentErrors(t *testing.T) {
	c := StartT(t, Config{N: 2, Backend: Memory})
	ctx := t.Context()
	for name, err := range map[string]error{
		"no nodes":           c.Kill(ctx),
		"out of range":       c.Pause(ctx, 2),
		"negative":           c.Partition(ctx, -1),
		"negative delay":     c.Restart(ctx, RestartOptions{Delay: -time.Second}, 0),
		"zero rate":          c.SetClock(ctx, 0, 0, 0),
		"sub-ms latency":     c.Latency(ctx, 500*time.Microsecond, 0, Downstream, 0),
		"jitter > latency":   c.Latency(ctx, 10*time.Millisecond, 20*time.Millisecond, Downstream, 0),
		"bad direction":      c.Hang(ctx, "sideways", 0),
		"unknown kind":       c.Inject(ctx, Fault{Kind: "flood", Nodes: []int{0}}),
		"link on kill":       c.Inject(ctx, Fault{Kind: FaultKill, Nodes: []int{0}, Link: "a"}),
		"missing link":       c.Inject(ctx, Fault{Kind: FaultHang, Nodes: []int{0}, Link: "nope"}),
		"bad link name":      func() error { _, err := c.NewLink("a/b"); return err }(),
		"restart persisting": c.Restart(ctx, RestartOptions{Persistence: 9}, 0),
	} {
		assert.Error(t, err, name)
	}
	assert.ErrorContains(t, c.Pause(ctx, 7), "7")
	assert.ErrorContains(t, c.SetClock(ctx, 0, -2, 0), "-2")
	assert.ErrorContains(t, c.Inject(ctx, Fault{Kind: FaultHang, Nodes: []int{0}, Link: "nope"}), `"nope"`)

	require.NoError(t, c.Kill(ctx, 1))
	assert.ErrorContains(t, c.Pause(ctx, 1), "killed")
	assert.Equal(t, []bool{true, false}, reachable(t, c.Nodes()), "a failed argument check acts on no master")

	// Restart's delay follows ctx.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := c.Restart(short, RestartOptions{Delay: time.Minute}, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestFaultNamesAreStable(t *testing.T) {
	for _, tc := range []struct {
		f    Fault
		want string
	}{
		{Fault{Kind: FaultKill, Nodes: []int{0, 2}}, "kill[0,2]"},
		{Fault{Kind: FaultKill, Nodes: []int{1}, Delay: time.Second}, "kill[1](delay=1s)"},
		{Fault{Kind: FaultRestart, Nodes: []int{4}, Delay: 2 * time.Second, Persistence: AOFAlways}, "restart[4](delay=2s,aof-always)"},
		{Fault{Kind: FaultRestart, Nodes: []int{4}}, "restart[4](delay=0s,none)"},
		{Fault{Kind: FaultPause, Nodes: []int{3}}, "pause[3]"},
		{Fault{Kind: FaultClock, Nodes: []int{3}, Offset: 30 * time.Second}, "clock[3](+30s,x1)"},
		{Fault{Kind: FaultClock, Nodes: []int{3}, Offset: -time.Second, Rate: 1.05}, "clock[3](-1s,x1.05)"},
		{Fault{Kind: FaultLatency, Nodes: []int{1}, Latency: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, Link: "clientA"}, "latency[1](20ms±5ms,downstream)@clientA"},
		{Fault{Kind: FaultHang, Nodes: []int{0}, Direction: Both}, "hang[0](both)"},
		{Fault{Kind: FaultPartition, Nodes: []int{3, 4}, Link: "b"}, "partition[3,4]@b"},
	} {
		assert.Equal(t, tc.want, tc.f.Name())
		assert.Equal(t, tc.want, fmt.Sprint(tc.f))
	}
}

func TestCloseLeavesNothingBehind(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c, err := Start(t.Context(), Config{N: 3, Backend: kind, Logf: t.Logf, Persistence: []Persistence{AOFAlways}})
		require.NoError(t, err)
		l, err := c.NewLink("x")
		require.NoError(t, err)
		var pids []int
		var dirs []string
		for _, m := range c.members {
			if ps, ok := m.srv.(*processServer); ok {
				pids = append(pids, ps.proc.PID())
				dirs = append(dirs, ps.dir)
			}
		}
		addrs := []string{}
		for i := range c.N() {
			addrs = append(addrs, c.Addr(i), c.ServerAddr(i), l.Addr(i))
		}
		// Leave faults in force: Close must cope.
		require.NoError(t, c.Pause(t.Context(), 0))
		require.NoError(t, c.Kill(t.Context(), 1))
		require.NoError(t, c.Partition(t.Context(), 2))

		require.NoError(t, c.Close(t.Context()))
		require.NoError(t, c.Close(t.Context()), "Close is idempotent")
		for _, a := range addrs {
			_, err := net.DialTimeout("tcp", a, time.Second)
			assert.ErrorIs(t, err, syscall.ECONNREFUSED, "%s is closed", a)
		}
		for _, pid := range pids {
			assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "redis-server %d is gone", pid)
		}
		for _, d := range dirs {
			_, err := os.Stat(d)
			assert.ErrorIs(t, err, os.ErrNotExist, "temp dir %s is removed", d)
		}
		assert.ErrorContains(t, c.Kill(t.Context(), 0), "closed")
		_, err = c.NewLink("y")
		assert.ErrorContains(t, err, "closed")
	})
}

func TestAutoSaysWhichBackendAndWhy(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, fmt.Sprintf(format, args...))
	}
	saved := dockerAvailable
	t.Cleanup(func() { dockerAvailable = saved })
	dockerAvailable = func(context.Context) error { return errors.New("no engine in this test") }

	if _, err := redisproc.LookPath(); err == nil {
		c := StartT(t, Config{N: 1, Logf: logf})
		assert.Equal(t, Process, c.Kind())
		assert.Contains(t, strings.Join(logs, "\n"), "auto backend: process (docker unavailable: no engine in this test")
	}

	logs = nil
	t.Setenv("PATH", t.TempDir())
	c := StartT(t, Config{N: 1, Logf: logf})
	assert.Equal(t, Memory, c.Kind())
	assert.Contains(t, strings.Join(logs, "\n"), "auto backend: memory (docker unavailable: no engine in this test; redisproc: redis-server not found")
}

func TestBasePortFixesServerPorts(t *testing.T) {
	port, err := redisproc.FreePort()
	require.NoError(t, err)
	c := StartT(t, Config{N: 1, Backend: Memory, BasePort: port})
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", port), c.ServerAddr(0))
	require.NoError(t, c.Restart(t.Context(), RestartOptions{}, 0))
	assert.Equal(t, fmt.Sprintf("127.0.0.1:%d", port), c.ServerAddr(0), "a restart keeps the port")
}

func TestProcessClockWithoutLibfaketimeSaysWhy(t *testing.T) {
	RequireBackend(t, Process)
	t.Setenv(clockskew.LibfaketimeEnv, "/nonexistent/libfaketime.so.1")
	c := StartT(t, Config{N: 1, Backend: Process})
	err := c.SetClock(t.Context(), time.Second, 1, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "libfaketime")
	assert.Contains(t, err.Error(), "/nonexistent/libfaketime.so.1")
	_, err = do(t, c.Node(0).Info)
	require.NoError(t, err, "the master runs without the preload")
}

// Restart detection: a restart changes the run id the node reports.
func TestRestartChangesRunID(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind BackendKind) {
		c := StartT(t, Config{N: 1, Backend: kind})
		before, err := do(t, c.Node(0).Info)
		require.NoError(t, err)
		require.NoError(t, c.Restart(t.Context(), RestartOptions{}, 0))
		waitUp(t, client(t, c.Addr(0)))
		// The node's pooled connection to the old server may fail once.
		var after node.ServerInfo
		require.Eventually(t, func() bool {
			after, err = do(t, c.Node(0).Info)
			return err == nil
		}, 10*time.Second, 20*time.Millisecond, "Info after restart: %v", err)
		assert.NotEqual(t, before.RunID, after.RunID)
	})
}
