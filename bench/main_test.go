package bench_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the package when a test or benchmark leaves a goroutine
// behind (a client, a renewal or a background release not closed), and
// silences go-redis's log of failed dials (a dead master's, on purpose).
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
