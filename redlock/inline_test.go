package redlock

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// goid returns the calling goroutine's ID (runtime.Stack's first line).
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// onGoroutine is a mapNode that records the goroutine of each call.
type onGoroutine struct {
	*mapNode
	acquires, releases []uint64
}

func (n *onGoroutine) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	n.acquires = append(n.acquires, goid())
	return n.mapNode.Acquire(ctx, key, value, ttl)
}

func (n *onGoroutine) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	n.releases = append(n.releases, goid())
	return n.mapNode.Release(ctx, key, value, guard)
}

// TestOneNodeCallsInline: with one node, TryLock's acquire and Unlock's
// release run on the caller's goroutine (no handoff to a worker and back),
// unless Unlock's ctx has a deadline before the release timeout's: then
// the release runs on a worker, so that Unlock can return at the deadline.
func TestOneNodeCallsInline(t *testing.T) {
	n := &onGoroutine{mapNode: newMapNode("one")}
	c, err := New([]Node{n}, WithReleaseTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	m, err := c.NewMutex("inline")
	if err != nil {
		t.Fatal(err)
	}
	me := goid()
	for _, tc := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		inlined bool // the release ran on the caller's goroutine
	}{
		{"no deadline", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, true},
		{"deadline after the release timeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Hour)
		}, true},
		{"deadline before the release timeout", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 500*time.Millisecond)
		}, false},
	} {
		ctx, cancel := tc.ctx()
		lease, err := m.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if got := n.acquires[len(n.acquires)-1]; got != me {
			t.Errorf("%s: the acquire ran on goroutine %d, want the caller's (%d)", tc.name, got, me)
		}
		if got := n.releases[len(n.releases)-1]; (got == me) != tc.inlined {
			t.Errorf("%s: the release ran on goroutine %d, the caller is %d: want inline %v", tc.name, got, me, tc.inlined)
		}
	}
}
