package redlock

import (
	"context"
	"sync"
	"testing"
	"time"
)

// mapNode is a minimal in-memory Node for the package's internal tests
// (memnode imports this package). gate, when set, holds every Acquire until
// it is closed or the call's context ends.
type mapNode struct {
	addr string
	gate chan struct{}

	mu     sync.Mutex
	keys   map[string]string
	guards map[string]bool
}

func newMapNode(addr string) *mapNode {
	return &mapNode{addr: addr, keys: map[string]string{}, guards: map[string]bool{}}
}

func (n *mapNode) Addr() string { return n.addr }

func (n *mapNode) Info(context.Context) (ServerInfo, error) {
	return ServerInfo{RunID: "run-" + n.addr, Uptime: time.Hour}, nil
}

func (n *mapNode) Acquire(ctx context.Context, key, value string, _ time.Duration) (bool, error) {
	if n.gate != nil {
		select {
		case <-n.gate:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.guards[key+"\n"+value] {
		return false, nil
	}
	if v, ok := n.keys[key]; ok {
		return v == value, nil
	}
	n.keys[key] = value
	return true, nil
}

func (n *mapNode) Extend(_ context.Context, key, value string, _ time.Duration) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.keys[key] == value, nil
}

func (n *mapNode) Release(_ context.Context, key, value string, guard time.Duration) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.keys[key] == value {
		delete(n.keys, key)
		return true, nil
	}
	if guard > 0 {
		n.guards[key+"\n"+value] = true
	}
	return false, nil
}

// TestUnlockStopsWaitingForAStraggler: an Unlock that waited in vain for a
// node's running acquire marks the node straggling, so that the next Unlock
// does not wait for it; an Unlock that finds the node's acquire finished
// clears the mark. No key is left on the slow node either way.
func TestUnlockStopsWaitingForAStraggler(t *testing.T) {
	slow := newMapNode("slow")
	slow.gate = make(chan struct{})
	nodes := []Node{newMapNode("a"), newMapNode("b"), slow}
	c, err := New(nodes, WithNodeTimeout(5*time.Second), WithReleaseTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.NewMutex("straggler")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if lease.acquired[2].finished() {
		t.Fatal("the slow node's acquire finished while its gate was closed")
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.members[2].straggling.Load() {
		t.Fatal("an Unlock waited in vain for the slow node, which is not marked straggling")
	}

	close(slow.gate) // the node catches up
	lease, err = m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lease.acquired[2].wait()
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if c.members[2].straggling.Load() {
		t.Fatal("the slow node kept its mark after an Unlock found its acquire finished")
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		n := n.(*mapNode)
		n.mu.Lock()
		if v, ok := n.keys["straggler"]; ok {
			t.Errorf("%s: key left holding %q", n.addr, v)
		}
		n.mu.Unlock()
	}
}
