package redisnode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/redlock"
)

// a killed master's error names the cause. With go-redis
// v9.17.3 a call with a 50ms deadline (the coordinator's default per node)
// read "context deadline exceeded": the refused dial slept its 100ms retry
// backoff, even with DialerRetries 1, past the call's deadline.
func TestKilledMasterErrorNamesCause(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	n := dialT(t, srv.Addr())
	ok, err := n.Acquire(context.Background(), "k", "v", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, srv.Kill())
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := n.Acquire(ctx, "k", "v", time.Minute)
		cancel()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "connection refused", "call %d", i)
		assert.ErrorIs(t, err, redlock.ErrNotSent, "call %d: a refused dial sent nothing", i)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "call %d", i)
	}
}

// Dial's errors are bounded in size and name the bad
// value; white space and control characters are refused at Dial.
func TestDialBoundsErrorsAndRefusesSpaces(t *testing.T) {
	big := strings.Repeat("a", 1<<20)
	for _, tc := range []struct{ name, addr, want string }{
		{"1 MiB host:port", big, `"` + strings.Repeat("a", 100) + `"... (1048576 bytes)`},
		{"1 MiB host with a port", big + ":1", "(1048576 bytes) is longer than 253 bytes"},
		{"1 MiB port", "h:" + big, "bad port"},
		{"a query string's password", "127.0.0.1:6379?password=hunter2", "bad port (not shown: it may hold a password)"},
		{"1 MiB URL host", "redis://" + big, "(1048576 bytes) is longer than 253 bytes"},
		{"1 MiB URL port", "redis://h:" + big, "(1048586 bytes)"},
		{"1 MiB db", "redis://h:1/" + big, "bad db"},
		{"1 MiB query key", "rediss://h:1?" + big + "=1", "unknown query parameter"},
		{"1 MiB query key on redis://", "redis://h:1?" + big + "=1", "not allowed on redis://"},
		{"1 MiB ca_file", "rediss://h:1?ca_file=/" + big, "ca_file"},
		{"1 MiB cert_file", "rediss://h:1?cert_file=/" + big + "&key_file=/x", "cert_file"},
		{"1 MiB scheme", big + "://h:1", "unsupported scheme"},
		{"1 MiB password", "redis://u:" + big + "@h:1/x", `bad db "x"`},
		{"multi-byte runes", strings.Repeat("é", 1<<19), "... (1048576 bytes)"},
		{"leading space", " 127.0.0.1:1", `address " 127.0.0.1:1" has leading or trailing white space`},
		{"trailing space", "127.0.0.1:1 ", `address "127.0.0.1:1 " has leading or trailing white space`},
		{"trailing newline", "127.0.0.1:1\n", `address "127.0.0.1:1\n" has leading or trailing white space`},
		{"tab inside", "127.0.0.1:\t1", `address "127.0.0.1:\t1" has a control character`},
		{"254-byte host", strings.Repeat("h", 254) + ":1", "is longer than 253 bytes"},
		{"NUL inside", "127.0.0.1\x00:1", `address "127.0.0.1\x00:1" has a control character`},
		{"DEL inside", "host\x7f:1", `has a control character`},
		{"C1 control", "host\u0085:1", `has a control character`},
		{"invalid UTF-8", "host\xff:1", `invalid UTF-8`},
		{"space in a URL", " redis://h:1", `address " redis://h:1" has leading`},
		{"control in a URL password", "redis://u:p\x01w@h:1", `address "redis://xxxxx@h:1" has a control character`},
		{"space inside host", "127.0.0.1 :1", `address "127.0.0.1 :1" has white space at byte 9`},
		{"space in a URL password", "redis://u:p w@h:1", `address "redis://xxxxx@h:1" has white space`},
		{"no-break space", "h\u00a0:1", `has white space`},
	} {
		n, err := Dial(tc.addr)
		require.Error(t, err, tc.name)
		assert.Nil(t, n)
		msg := err.Error()
		assert.Less(t, len(msg), 600, "%s: %d-byte error", tc.name, len(msg))
		assert.True(t, strings.HasPrefix(msg, "redisnode: "), msg)
		assert.Contains(t, msg, tc.want, tc.name)
	}
}

func TestQuote(t *testing.T) {
	assert.Equal(t, `"abc"`, quote("abc"))
	assert.Equal(t, `"`+strings.Repeat("x", 100)+`"`, quote(strings.Repeat("x", 100)))
	assert.Equal(t, `"`+strings.Repeat("x", 100)+`"... (101 bytes)`, quote(strings.Repeat("x", 101)))
	// Cut at a rune boundary: 50 two-byte runes fit in 100 bytes.
	assert.Equal(t, `"`+strings.Repeat("é", 50)+`"... (102 bytes)`, quote(strings.Repeat("é", 51)))
	assert.Equal(t, `"x`+strings.Repeat("é", 49)+`"... (103 bytes)`, quote("x"+strings.Repeat("é", 51)))
}
