package memnode_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
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

// TestLeaveQueueTombstoneKnob: a late copy of a waiter's AcquireQueued
// after its LeaveQueue enters nothing (its tombstone), so the waiter behind
// it takes the key once it is free; with knobs.NoLeaveTombstone it enters
// the line again, ahead of that waiter, which is refused the free key (what
// the waiting line's model calls kept-out). Line shows the line each time.
func TestLeaveQueueTombstoneKnob(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(map[bool]string{false: "tombstone", true: "NoLeaveTombstone"}[off], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if off {
					knobs.NoLeaveTombstone.Store(true)
					defer knobs.NoLeaveTombstone.Store(false)
				}
				ctx := t.Context()
				n := memnode.New("leave")
				t0 := time.Now()
				a := redlock.Waiter{ID: "a", Arrival: t0, TTL: time.Minute, Fair: true}
				b := redlock.Waiter{ID: "b", Arrival: t0.Add(time.Millisecond), TTL: time.Minute, Fair: true}
				if ok, err := n.Acquire(ctx, "lock", "holder", time.Hour); !ok || err != nil {
					t.Fatal(ok, err)
				}
				for _, w := range []redlock.Waiter{a, b} {
					if ok, _, err := n.AcquireQueued(ctx, "lock", "v"+w.ID, time.Hour, w); ok || err != nil {
						t.Fatal(w.ID, ok, err)
					}
				}
				if got := n.Line("lock"); !slices.Equal(got, []string{"a", "b"}) {
					t.Fatalf("Line = %q, want [a b]", got)
				}
				if err := n.LeaveQueue(ctx, "lock", a); err != nil {
					t.Fatal(err)
				}
				if got := n.Line("lock"); !slices.Equal(got, []string{"b"}) {
					t.Fatalf("Line after a's LeaveQueue = %q, want [b]", got)
				}
				if ok, _, err := n.AcquireQueued(ctx, "lock", "va", time.Hour, a); ok || err != nil { // the late copy
					t.Fatal(ok, err)
				}
				want, granted := []string{"b"}, true
				if off {
					want, granted = []string{"a", "b"}, false
				}
				if got := n.Line("lock"); !slices.Equal(got, want) {
					t.Fatalf("Line after a's late copy = %q, want %q", got, want)
				}
				if ok, err := n.Release(ctx, "lock", "holder", 0); !ok || err != nil {
					t.Fatal(ok, err)
				}
				if ok, _, err := n.AcquireQueued(ctx, "lock", "vb", time.Hour, b); ok != granted || err != nil {
					t.Fatalf("b's AcquireQueued of the free key = %v, %v; want %v", ok, err, granted)
				}
			})
		})
	}
}
