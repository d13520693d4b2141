package bench_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test or benchmark leaves a goroutine
// behind (a client, a renewal or a background release not closed).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
