package redisinfo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Uptime is what the restart quarantine trusts for a server met for the
// first time: never more than the real uptime.
func TestParseServerInfoUptime(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       time.Duration
	}{
		// Redis counts uptime_in_seconds from its start time truncated to
		// the second: 5 may mean 4.01s. The main thread ran 30 s of CPU
		// (a busy server), so the wall clock's figure is the smaller.
		{"fresh master", "# Server\r\nrun_id:abc\r\nuptime_in_seconds:5\r\n# Replication\r\nrole:master\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n" + cpu(20, 10), 4 * time.Second},
		{"just started", "run_id:abc\r\nuptime_in_seconds:0\r\n" + cpu(0, 0), 0},
		// A clock stepped forward after the start inflates
		// uptime_in_seconds (60 s here, of a run that is 0.25 s old): the
		// main thread's CPU time (0.2 s) bounds the real uptime.
		{"clock stepped at boot", "run_id:abc\r\nuptime_in_seconds:60\r\n" + cpu(0.15, 0.05), 200 * time.Millisecond},
		// Without the main thread's CPU time (Redis before 6.2) nothing
		// bounds the uptime: none.
		{"no main thread CPU time", "run_id:abc\r\nuptime_in_seconds:9000\r\nused_cpu_sys:40.5\r\nused_cpu_user:10\r\n", 0},
		// A promoted replica may lack keys written until its promotion, at
		// a time INFO does not give.
		{"promoted replica", "run_id:abc\r\nuptime_in_seconds:9000\r\nrole:master\r\nmaster_replid2:5d4b2e9a1c3f00000000000000000000000000ff\r\n" + cpu(9000, 0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			si, err := Parse("h:1", tc.text)
			require.NoError(t, err)
			assert.Equal(t, "abc", si.RunID)
			assert.Equal(t, tc.want, si.Uptime)
		})
	}
}

// cpu renders INFO cpu's main thread fields.
func cpu(sys, user float64) string {
	return fmt.Sprintf("# CPU\r\nused_cpu_sys_main_thread:%f\r\nused_cpu_user_main_thread:%f\r\n", sys, user)
}

func TestParseRefusesBadCPUTime(t *testing.T) {
	for _, v := range []string{"x", "-1", "NaN", strings.Repeat("9", 40)} {
		_, err := Parse("h:1", "run_id:abc\r\nuptime_in_seconds:5\r\nused_cpu_sys_main_thread:"+v+"\r\n")
		require.Error(t, err, v)
		assert.Contains(t, err.Error(), "used_cpu_sys_main_thread")
		assert.Less(t, len(err.Error()), 120, "the bad value is bounded")
	}
}
