package redisinfo

import (
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
		// the second: 5 may mean 4.01s.
		{"fresh master", "# Server\r\nrun_id:abc\r\nuptime_in_seconds:5\r\n# Replication\r\nrole:master\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n", 4 * time.Second},
		{"just started", "run_id:abc\r\nuptime_in_seconds:0\r\n", 0},
		// A promoted replica may lack keys written until its promotion, at
		// a time INFO does not give.
		{"promoted replica", "run_id:abc\r\nuptime_in_seconds:9000\r\nrole:master\r\nmaster_replid2:5d4b2e9a1c3f00000000000000000000000000ff\r\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			si, err := Parse("h:1", tc.text)
			require.NoError(t, err)
			assert.Equal(t, "abc", si.RunID)
			assert.Equal(t, tc.want, si.Uptime)
		})
	}
}
