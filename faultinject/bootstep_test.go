package faultinject

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// infoField reads one field of INFO section from the master behind addr.
func infoField(t *testing.T, addr, section, field string) string {
	t.Helper()
	text, err := client(t, addr).Info(ctxT(t, 5*time.Second), section).Result()
	require.NoError(t, err)
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == field {
			return v
		}
	}
	t.Fatalf("INFO %s of %s has no %s", section, addr, field)
	return ""
}

// TestClockStepAfterRestart: the master restarts empty as a new run whose
// wall clock is stepped 2 minutes forward: INFO uptime_in_seconds reads at
// least the step, the main thread's CPU time does not, a key set after the
// step keeps its whole TTL (the step came before it), and Undo reboots the
// master with its clock set back (a key set on the stepped clock is gone).
func TestClockStepAfterRestart(t *testing.T) {
	f := ClockStepAfterRestart{Nodes: []int{0}, Step: 2 * time.Minute}
	RequireFault(t, f)
	c := StartT(t, Config{N: 2, Backend: Process})
	r := client(t, c.Addr(0))
	ctx := ctxT(t, 30*time.Second)
	require.NoError(t, r.Set(ctx, "k", "v", time.Minute).Err())
	before, err := c.Node(0).Info(ctx)
	require.NoError(t, err)
	require.NoError(t, f.Inject(ctx, c))
	waitUp(t, r)
	after, err := c.Node(0).Info(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, before.RunID, after.RunID, "a new run")
	n, err := r.Exists(ctx, "k").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the restart (no persistence) lost the key")

	up, err := strconv.Atoi(infoField(t, c.ServerAddr(0), "server", "uptime_in_seconds"))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, up, 119, "the wall clock's uptime includes the step")
	cpu, err := strconv.ParseFloat(infoField(t, c.ServerAddr(0), "cpu", "used_cpu_user_main_thread"), 64)
	require.NoError(t, err)
	assert.Less(t, cpu, 30.0, "the main thread's CPU time does not")
	assert.Less(t, after.Uptime, 30*time.Second, "the node's uptime is the CPU time's")
	tm, err := r.Time(ctx).Result()
	require.NoError(t, err)
	assert.InDelta(t, 2*time.Minute, time.Until(tm), float64(5*time.Second), "TIME shows the step")

	require.NoError(t, r.Set(ctx, "k2", "v", 20*time.Second).Err())
	ttl, err := r.PTTL(ctx, "k2").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 19*time.Second, "a key set after the step has its whole TTL")

	require.NoError(t, f.Undo(ctx, c))
	waitUp(t, r)
	tm, err = r.Time(ctx).Result()
	require.NoError(t, err)
	assert.InDelta(t, 0, time.Until(tm), float64(5*time.Second), "Undo sets the clock back")
	n, err = r.Exists(ctx, "k2").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "Undo reboots: no key set on the stepped clock outlives its TTL")
}

// TestHealAllRebootsASteppedMaster: a run that ends with the step still in
// force (a schedule without For never calls Undo) is healed by a reboot, not
// by setting the running master's clock back, which would keep a key set on
// the stepped clock Step past its TTL (the chaos suite's
// clock-step-after-restart-pg reported such a key as leaked).
func TestHealAllRebootsASteppedMaster(t *testing.T) {
	f := ClockStepAfterRestart{Nodes: []int{0}, Step: 2 * time.Minute}
	RequireFault(t, f)
	c := StartT(t, Config{N: 2, Backend: Process})
	r := client(t, c.Addr(0))
	ctx := ctxT(t, 30*time.Second)
	require.NoError(t, f.Inject(ctx, c))
	waitUp(t, r)
	require.NoError(t, r.Set(ctx, "k", "v", time.Second).Err())

	require.NoError(t, c.HealAll(ctx))
	waitUp(t, r)
	tm, err := r.Time(ctx).Result()
	require.NoError(t, err)
	assert.InDelta(t, 0, time.Until(tm), float64(5*time.Second), "HealAll sets the clock back")
	ttl, err := r.PTTL(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-2), ttl, "no key set on the stepped clock outlives its TTL (PTTL -2: no key)")

	// A second HealAll has nothing to reboot: a key set now stays.
	require.NoError(t, r.Set(ctx, "k3", "v", time.Minute).Err())
	require.NoError(t, c.HealAll(ctx))
	n, err := r.Exists(ctx, "k3").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "a healed master is not rebooted again")
}
