package reconfig_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; stopped masters are routine here.
	redis.SetLogger(discardLogger{})
	goleak.VerifyTestMain(m)
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
