package redisguard_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"go.uber.org/goleak"
)

// server is the redis-server this package's tests and examples share (each
// uses keys of its own).
var server *redisproc.Server

// TestMain starts one redis-server for the package. Without redis-server
// it fails under CI=true and otherwise skips the package, saying so.
func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	if _, err := redisproc.LookPath(); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "%v; CI=true, so this is a failure\n", err)
			return 1
		}
		fmt.Printf("%v; skipping this package's tests (set CI=true to make this a failure)\n", err)
		return 0
	}
	s, err := redisproc.Start(redisproc.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	server = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}
