package memnode_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestQueueTombstoneOnVirtualTime: a waiter that left the queue keeps its
// tombstone in "{lock}:queue:ttl" for w.TTL on the node clock, so that key
// outlives the last waiter (a lock of that name meets a sorted set, as on
// Redis); a late AcquireQueued of the waiter changes nothing, also not the
// tombstone's expiry; 1ms after it the waiter may queue again, and once its
// last tombstone expires no queue key is left (a grant leaves none).
func TestQueueTombstoneOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		must := mustFor(t)
		n := memnode.New("tombstone")
		w := redlock.Waiter{ID: "w", Arrival: time.Now(), TTL: 100 * time.Millisecond, Fair: true}
		if err := n.LeaveQueue(ctx, "lock", w); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Acquire(ctx, "{lock}:queue:ttl", "x", time.Hour); err == nil {
			t.Fatal(`Acquire("{lock}:queue:ttl") after a LeaveQueue = no error, want WRONGTYPE: the tombstone lives in that sorted set`)
		}
		time.Sleep(50 * time.Millisecond)
		if ok, _, err := n.AcquireQueued(ctx, "lock", "v", time.Hour, w); ok || err != nil {
			t.Fatalf("AcquireQueued of w 50ms after its LeaveQueue (TTL 100ms) = %v, %v; want false: w stays out", ok, err)
		}
		time.Sleep(50 * time.Millisecond)
		if ok, _, err := n.AcquireQueued(ctx, "lock", "v", time.Hour, w); ok || err != nil {
			t.Fatalf("AcquireQueued of w 100ms after its LeaveQueue = %v, %v; want false (a tombstone expiring now still lives, and the late copy before did not renew it)", ok, err)
		}
		time.Sleep(time.Millisecond)
		if ok, _, err := n.AcquireQueued(ctx, "lock", "v", time.Hour, w); !ok || err != nil {
			t.Fatalf("AcquireQueued of w 101ms after its LeaveQueue = %v, %v; want true: the tombstone expired", ok, err)
		}
		must(n.Release(ctx, "lock", "v", 0))
		if ok := must(n.Acquire(ctx, "{lock}:queue:ttl", "x", time.Hour)); !ok {
			t.Error(`Acquire("{lock}:queue:ttl") after w acquired = false, want true: the key went with its last tombstone, and a grant leaves none`)
		}
		if ok := must(n.Acquire(ctx, "{lock}:queue", "x", time.Hour)); !ok {
			t.Error(`Acquire("{lock}:queue") = false, want true: the queue key went with its last waiter`)
		}
	})
}
