package redisnode

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/lockclient"
)

const secret = "s3cret"

func TestDialRejectsBadAddresses(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate"), 0o600))
	for _, tc := range []struct{ addr, want string }{
		{"", "empty address"},
		{"not an address", `"not an address"`},
		{"127.0.0.1", `"127.0.0.1"`},
		{"127.0.0.1:99999", `"99999"`},
		{"127.0.0.1:0", `"0"`},
		{"127.0.0.1:http", `"http"`},
		{":6379", "no host"},
		{"redis://:" + secret + "@host:port/x", `":port"`},
		{"redis://:" + secret + "@host:6379/x", `bad db "x"`},
		{"redis://u:" + secret + "@host:6379/-1", `bad db "-1"`},
		{"redis://u:" + secret + "@host:6379/0/1", `bad db "0/1"`},
		{"redis://u:" + secret + "@host:70000", `"70000"`},
		{"redis://u:" + secret + "@host:", "empty port"},
		{"redis://:" + secret + "@/0", "no host"},
		{"http://u:" + secret + "@host:1", `scheme "http"`},
		{"redis:" + secret, "redis://host"},
		{"redis:u:" + secret + "@host:1", "redis://host"},
		{"u:" + secret + "@host:1", "with '@'"},
		{"redis:///", "no host"},
		{"redis://u:" + secret + "@host:1#frag", "fragment"},
		{"redis://u:s3%zzcret@host:1", "bad user name or password"},
		{"redis://u:" + secret + "@host:1?ca_file=/x", `"ca_file" is not allowed on redis://`},
		{"rediss://u:" + secret + "@host:1?foo=bar", `unknown query parameter "foo"`},
		{"rediss://u:" + secret + "@host:1?cert_file=/x", "both or neither"},
		{"rediss://u:" + secret + "@host:1?key_file=/x", "both or neither"},
		{"rediss://u:" + secret + "@host:1?ca_file=/nonexistent/ca.pem", "/nonexistent/ca.pem"},
		{"rediss://u:" + secret + "@host:1?ca_file=" + junk, "holds no PEM certificate"},
		{"rediss://u:" + secret + "@host:1?cert_file=" + junk + "&key_file=" + junk, "cert_file"},
		{"rediss://u:" + secret + "@host:1?ca_file=a&ca_file=b", "given 2 times"},
		{"rediss://u:" + secret + "@host:1?server_name=", `"server_name" is empty`},
	} {
		n, err := Dial(tc.addr)
		require.Error(t, err, tc.addr)
		assert.Nil(t, n)
		msg := err.Error()
		assert.True(t, strings.HasPrefix(msg, "redisnode: "), msg)
		assert.Contains(t, msg, tc.want, tc.addr)
		assert.NotContains(t, msg, secret, "the password leaked into %q", msg)
	}
}

func TestDialAcceptsAddresses(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"localhost:1", "localhost:1"},
		{"[::1]:7000", "[::1]:7000"},
		{"redis://h.example", "h.example:6379"},
		{"redis://u:" + secret + "@h.example:7000/2", "h.example:7000"},
		{"redis://:" + secret + "@[::1]:7000/", "[::1]:7000"},
		{"rediss://:" + secret + "@h.example", "h.example:6379"},
		{"rediss://h.example:1?server_name=other.example", "h.example:1"},
	} {
		n, err := Dial(tc.addr)
		require.NoError(t, err, tc.addr)
		assert.Equal(t, tc.want, n.Addr())
		assert.NotContains(t, n.Addr(), secret)
		require.NoError(t, n.Close())
	}

	n, err := Dial("redis://u:" + secret + "@h.example:7000/2")
	require.NoError(t, err)
	defer n.Close()
	o := n.client.(*redis.Client).Options()
	assert.Equal(t, "u", o.Username)
	assert.Equal(t, secret, o.Password)
	assert.Equal(t, 2, o.DB)
	assert.Nil(t, o.TLSConfig)
	assert.True(t, n.notSent && n.owned)
	// The lock-safe settings.
	assert.True(t, o.ContextTimeoutEnabled)
	assert.Equal(t, 0, o.MaxRetries, "-1 (no retries) is stored as 0 by go-redis")
	assert.Equal(t, 1, o.DialerRetries)
	assert.Equal(t, lockclient.DialTimeout, o.DialTimeout)
	assert.Equal(t, lockclient.IOTimeout, o.ReadTimeout)
	assert.Equal(t, lockclient.IOTimeout, o.WriteTimeout)
	assert.Equal(t, lockclient.IOTimeout, o.PoolTimeout)
	assert.True(t, o.DisableIdentity)
	assert.Equal(t, 2, o.Protocol)
	assert.Equal(t, maintnotifications.ModeDisabled, o.MaintNotificationsConfig.Mode, "no DNS lookup in NewClient")

	for addr, name := range map[string]string{
		"rediss://h.example":                             "h.example",
		"rediss://h.example:1?server_name=other.example": "other.example",
	} {
		n, err := Dial(addr)
		require.NoError(t, err)
		tc := n.client.(*redis.Client).Options().TLSConfig
		require.NotNil(t, tc, addr)
		assert.Equal(t, name, tc.ServerName)
		assert.Equal(t, uint16(tls.VersionTLS12), tc.MinVersion)
		assert.Nil(t, tc.RootCAs, "no ca_file: the system roots")
		require.NoError(t, n.Close())
	}
}

func TestNewValidatesClients(t *testing.T) {
	good := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", Password: secret, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer good.Close()
	noCtx := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer noCtx.Close()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, Password: secret, ContextTimeoutEnabled: true})
	defer cluster.Close()
	clusterNoCtx := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer clusterNoCtx.Close()
	clusterNoAddrs := redis.NewClusterClient(&redis.ClusterOptions{ContextTimeoutEnabled: true,
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) { return nil, nil }})
	defer clusterNoAddrs.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"},
		Password: secret, SentinelPassword: secret, ContextTimeoutEnabled: true})
	defer failover.Close()
	failoverNoCtx := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	defer failoverNoCtx.Close()

	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		want   string
	}{
		{"nil", nil, "nil client"},
		{"typed nil Client", (*redis.Client)(nil), "nil *redis.Client"},
		{"typed nil ClusterClient", (*redis.ClusterClient)(nil), "nil *redis.ClusterClient"},
		{"typed nil Ring", (*redis.Ring)(nil), "nil *redis.Ring"},
		{"Ring", ring, "*redis.Ring is not supported"},
		{"no ContextTimeoutEnabled", noCtx, "ContextTimeoutEnabled: true; set it: without it go-redis ignores context deadlines"},
		{"cluster no ContextTimeoutEnabled", clusterNoCtx, "ContextTimeoutEnabled: true; set it"},
		{"failover no ContextTimeoutEnabled", failoverNoCtx, "ContextTimeoutEnabled: true; set it"},
		{"cluster without Addrs", clusterNoAddrs, "no Options().Addrs"},
	} {
		n, err := New(tc.client)
		require.Error(t, err, tc.name)
		assert.Nil(t, n)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}

	n, err := New(good)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:1", n.Addr())
	assert.True(t, n.notSent)
	require.NoError(t, n.Close())
	assert.NotErrorIs(t, good.Ping(context.Background()).Err(), redis.ErrClosed, "Close leaves the caller's client open")

	n, err = New(cluster)
	require.NoError(t, err)
	assert.Equal(t, "cluster(127.0.0.1:1,127.0.0.1:2)", n.Addr())
	assert.False(t, n.notSent)

	n, err = New(failover)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(n.Addr(), "sentinel(FailoverClient@0x"), n.Addr())
	assert.False(t, n.notSent)
	n2, err := New(failover)
	require.NoError(t, err)
	assert.Equal(t, n.Addr(), n2.Addr(), "stable for one client")
	for _, a := range []string{n.Addr()} {
		assert.NotContains(t, a, secret)
	}
}
