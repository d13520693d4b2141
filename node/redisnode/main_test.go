package redisnode

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; dead nodes are routine in these tests.
	redis.SetLogger(discardLogger{})
	goleak.VerifyTestMain(m)
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

func dialT(t *testing.T, addr string) *Node {
	t.Helper()
	n, err := Dial(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// adminT is a plain client for inspecting a server (not lock-safe; tests only).
func adminT(t *testing.T, opt *redis.Options) *redis.Client {
	t.Helper()
	opt.Protocol, opt.DisableIdentity = 2, true
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
