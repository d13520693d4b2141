package redlock

import (
	"context"
	"slices"
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
	log  []string // when not nil, each Acquire and Release as it arrives (under mu)

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

// record logs a call as it reaches the node.
func (n *mapNode) record(op, value string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.log != nil {
		n.log = append(n.log, op+" "+value)
	}
}

func (n *mapNode) Acquire(ctx context.Context, key, value string, _ time.Duration) (bool, error) {
	n.record("acquire", value)
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
	n.record("release", value)
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

// TestUnlockReturnsAtTheQuorum: Unlock returns once a quorum released,
// while the slow node's acquire (and so its release) is still held; the
// same client's next Lock of the lock waits, on the slow node, for that
// release before it sends its acquire there (the node's log of calls, in
// the order they reached it), so it never meets the released lease's key.
// No key is left on any node.
func TestUnlockReturnsAtTheQuorum(t *testing.T) {
	slow := newMapNode("slow")
	slow.gate = make(chan struct{})
	slow.log = []string{}
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
	first, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if first.acquired[2].finished() {
		t.Fatal("Unlock waited for the slow node: its acquire finished while its gate was closed")
	}
	second, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(slow.gate) // the node catches up
	second.acquired[2].wait()
	if err := second.acquired[2].err; err != nil {
		t.Errorf("the second lease's acquire on the slow node: %v, want yes (the first lease's release ran before it)", err)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	slow.mu.Lock()
	log := slow.log
	slow.mu.Unlock()
	want := []string{"acquire " + first.value, "release " + first.value, "acquire " + second.value, "release " + second.value}
	if !slices.Equal(log, want) {
		t.Errorf("calls on the slow node, in the order they reached it:\n%q\nwant\n%q", log, want)
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
