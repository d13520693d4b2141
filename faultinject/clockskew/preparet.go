package clockskew

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// PrepareT is Prepare (in DefaultDir) for a test: when clock skew is not
// available here (Available) it fails the test if the CI environment
// variable is "true" and skips it otherwise, as redisproc.StartT does for a
// missing redis-server; a failed Prepare fails the test.
func PrepareT(tb testing.TB) *Kit {
	tb.Helper()
	redisproc.RequireOrSkip(tb, Available())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kit, err := Prepare(ctx, "")
	if err != nil {
		tb.Fatal(err)
	}
	return kit
}
