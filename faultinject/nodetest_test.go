package faultinject

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/node/nodetest"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestNodetest runs the Node suite on a master's Node (a redisnode.Node
// behind the master's proxy) on the memory and process backends. The
// master is emptied (FLUSHALL through the proxy) before each subtest; the
// Down checks partition it (the proxy refuses connections, the master
// keeps its keys) and heal it.
func TestNodetest(t *testing.T) {
	for _, kind := range []BackendKind{Memory, Process} {
		t.Run(string(kind), func(t *testing.T) {
			RequireBackend(t, kind)
			c := StartT(t, Config{N: 1, Backend: kind})
			raw := client(t, c.Addr(0))
			cut := Partition{Nodes: []int{0}}
			nodetest.Run(t, func(t *testing.T) redlock.Node {
				// The first command after a heal may meet a connection the
				// partition closed.
				eventually(t, 10*time.Second, func() bool {
					ctx, cancel := context.WithTimeout(t.Context(), time.Second)
					defer cancel()
					return raw.FlushAll(ctx).Err() == nil
				}, "FLUSHALL on master 0 through its proxy %s", c.Addr(0))
				return c.Node(0)
			}, func(t *testing.T, _ redlock.Node) func() {
				if err := cut.Inject(ctxT(t, time.Minute), c); err != nil {
					t.Fatal(err)
				}
				return func() {
					if err := cut.Undo(ctxT(t, time.Minute), c); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}
