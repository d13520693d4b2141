package memnode_test

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/node/nodetest"
	"github.com/quorumlock/quorumlock/redlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNodetest runs the Node suite on memnode: the reference is a Redis
// master running redisnode's scripts (node/redisnode/nodetest_test.go runs
// the same suite on real servers). Down is Fail with an error wrapping
// redlock.ErrNotSent (a refused connection; the keys stay), up is Fail(nil).
func TestNodetest(t *testing.T) {
	nodetest.Run(t, func(t *testing.T) redlock.Node {
		return memnode.New("memnode-" + t.Name())
	}, func(t *testing.T, n redlock.Node) func() {
		m := n.(*memnode.Node)
		m.Fail(fmt.Errorf("dial tcp %s: connection refused: %w", m.Addr(), redlock.ErrNotSent))
		return func() { m.Fail(nil) }
	})
}
