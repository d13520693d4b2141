package redisnode

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// The two halves of every generated secret: a leak of either half (a
// password cut at an unescaped '/', '?' or '#' and shown as a host, port,
// db or query) is a leak.
const secretA, secretB = "Zq9Kx", "W7pLm"

// specials are the characters that broke the old redaction, and their
// neighbours.
var specials = []string{"/", "#", "?", "@", ":", "%", " ", "%2F", "%zz", "", "+", "&", "="}

// urlShapes generates addresses whose userinfo holds the secret: every
// scheme (redis, rediss, unix, none), userinfo (user:pass, :pass, user-only)
// with each special character inside the secret, and host parts with bad
// ports, bad dbs, query parameters and fragments.
func urlShapes() (shapes []string, userOnly map[string]bool) {
	userOnly = map[string]bool{}
	tails := []string{"h.example:6379", "h.example", "h.example:port", "h.example:99999", "h.example:",
		"h.example:6379/x", "h.example:6379/2", "h.example:6379/-1", "h.example:6379/0/1",
		"h.example:6379?ca_file=/nonexistent/ca.pem", "h.example:6379?foo=bar", "h.example:6379#frag",
		"", "/0", "[::1]:7000/0", "h.example:6379?server_name=", "h.example:6379/%zz"}
	for _, scheme := range []string{"redis://", "rediss://", "unix://", "REDIS://", ""} {
		for _, sp := range specials {
			secret := secretA + sp + secretB
			for _, ui := range []struct {
				s        string
				userOnly bool
			}{{"usr:" + secret, false}, {":" + secret, false}, {secret, true}, {"usr:" + secret + ":more", false}} {
				for _, tail := range tails {
					a := scheme + ui.s + "@" + tail
					shapes = append(shapes, a)
					userOnly[a] = ui.userOnly
				}
			}
		}
	}
	return shapes, userOnly
}

// no error, Addr or printed Node shows a password (or a
// user-only userinfo), whatever the URL. Before the fix a password with an
// unescaped '/', '#' or '?' was shown (cut into host, port, db or query).
func TestDialNeverShowsSecrets(t *testing.T) {
	shapes, _ := urlShapes()
	accepted := 0
	for _, a := range shapes {
		n, err := Dial(a)
		var shown []string
		if err != nil {
			shown = append(shown, err.Error())
			assert.Less(t, len(err.Error()), 600, a)
		} else {
			accepted++
			shown = append(shown, n.Addr(), fmt.Sprintf("%v", n), fmt.Sprintf("%+v", n), fmt.Sprintf("%#v", n),
				fmt.Sprintf("%v", *n), fmt.Sprintf("%+v", *n), fmt.Sprintf("%#v", *n), fmt.Sprint(n))
			require.NoError(t, n.Close())
		}
		for _, s := range shown {
			for _, part := range []string{secretA, secretB} {
				if strings.Contains(s, part) {
					t.Errorf("%q shows %q: %s", a, part, s)
				}
			}
		}
	}
	t.Logf("%d shapes, %d accepted", len(shapes), accepted)
	assert.Greater(t, len(shapes), 1000)
	assert.Positive(t, accepted)
}

// captureLog records go-redis's log lines for the length of a test.
type captureLog struct {
	mu    sync.Mutex
	lines []string
}

func (c *captureLog) Printf(_ context.Context, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, fmt.Sprintf(format, args...))
}

// passwords holding every special character work when
// percent-encoded, against a real password-protected server, and no error
// or go-redis log line shows them, right or wrong.
func TestURLPasswordsOnRealServer(t *testing.T) {
	srv := redisproc.StartT(t, redisproc.Config{})
	ctx := context.Background()
	pw := secretA + "/#?@:% +&=" + secretB
	setup := adminT(t, &redis.Options{Addr: srv.Addr()})
	require.NoError(t, setup.Do(ctx, "ACL", "SETUSER", "locker", "on", ">"+pw, "~*", "+@all").Err())
	require.NoError(t, setup.ConfigSet(ctx, "requirepass", pw).Err()) // the default user's password
	logs := &captureLog{}
	redis.SetLogger(logs)
	t.Cleanup(func() { redis.SetLogger(discardLogger{}) })

	good := []string{
		"redis://" + url.UserPassword("locker", pw).String() + "@" + srv.Addr(),
		"redis://" + url.UserPassword("locker", pw).String() + "@" + srv.Addr() + "/0",
		"redis://:" + url.PathEscape(pw) + "@" + srv.Addr(),
		"redis://" + url.UserPassword("", pw).String() + "@" + srv.Addr(),
	}
	for i, a := range good {
		n := dialT(t, a)
		assert.Equal(t, srv.Addr(), n.Addr())
		ok, err := n.Acquire(ctx, fmt.Sprintf("good:%d", i), "v", time.Minute)
		require.NoError(t, err, shownAddr(a))
		assert.True(t, ok)
	}

	shapes, _ := urlShapes()
	tried := 0
	for _, a := range shapes {
		if !strings.HasPrefix(a, "redis://") || !strings.HasSuffix(a, "@h.example:6379") {
			continue
		}
		a = strings.TrimSuffix(a, "h.example:6379") + srv.Addr()
		n, err := Dial(a)
		if err == nil {
			tried++
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = n.Acquire(cctx, "bad", "v", time.Minute)
			cancel()
			require.NoError(t, n.Close())
			require.Error(t, err, "%s: a wrong password", shownAddr(a))
		}
		for _, part := range []string{secretA, secretB} {
			assert.NotContains(t, err.Error(), part, shownAddr(a))
		}
	}
	assert.Positive(t, tried)
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, l := range logs.lines {
		for _, part := range []string{secretA, secretB} {
			assert.NotContains(t, l, part, "go-redis log")
		}
	}
	t.Logf("%d wrong-password URLs tried on the server, %d go-redis log lines", tried, len(logs.lines))
}
