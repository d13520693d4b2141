package memnode_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// notes records a watch's notifications.
type notes struct {
	mu  sync.Mutex
	got []string
}

func (r *notes) fn(next string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, next)
}

func (r *notes) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func mustWatch(t *testing.T, n *memnode.Node, key string, fn func(string)) func() {
	t.Helper()
	stop, err := n.Watch(t.Context(), key, "", fn)
	if err != nil {
		t.Fatalf("Watch(%q): %v", key, err)
	}
	t.Cleanup(stop)
	return stop
}

// waiting puts waiter "waiter" in key's line (an AcquireQueued refused
// while key is held), so that the release of key is reported, naming it.
func waiting(t *testing.T, n *memnode.Node, key string) {
	t.Helper()
	w := redlock.Waiter{ID: "waiter", Arrival: time.Now(), TTL: time.Hour}
	if ok, _, err := n.AcquireQueued(t.Context(), key, "waiter", time.Hour, w); err != nil || ok {
		t.Fatalf("AcquireQueued(%q) of a waiter = %v, %v: want it refused (it waits in line)", key, ok, err)
	}
}

// handedBack has the waiter that waiting entered, whom a release handed
// key, take it over and release it: the node is as before waiting, with
// nobody in line and no notification.
func handedBack(t *testing.T, n *memnode.Node, key string) {
	t.Helper()
	w := redlock.Waiter{ID: "waiter", Arrival: time.Now(), TTL: time.Hour}
	if ok, _, err := n.AcquireQueued(t.Context(), key, "waiter again", time.Hour, w); err != nil || !ok {
		t.Fatalf("AcquireQueued(%q) of the waiter handed the key = %v, %v: want it taken over", key, ok, err)
	}
	if ok, err := n.Release(t.Context(), key, "waiter again", 0); err != nil || !ok {
		t.Fatalf("Release(%q) of the waiter's key = %v, %v: want true", key, ok, err)
	}
}

// mustFor returns a function that stops t on an error and returns the
// result of a call that reports a bool.
func mustFor(t *testing.T) func(ok bool, err error) bool {
	return func(ok bool, err error) bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
}

// TestWatchCallbackMayCallNode: fn runs outside the node's lock, on the
// releasing goroutine before Release returns (nobody else delivering): it
// may call the node (the waiter takes over the key handed to it), and a
// release it makes is delivered after it returns.
func TestWatchCallbackMayCallNode(t *testing.T) {
	ctx := t.Context()
	must := mustFor(t)
	n := memnode.New("callback")
	var order []string
	var took bool
	mustWatch(t, n, "other", func(next string) { order = append(order, "other:"+next) })
	mustWatch(t, n, "lock", func(next string) {
		order = append(order, "lock:"+next+":begin")
		w := redlock.Waiter{ID: "waiter", Arrival: time.Now(), TTL: time.Hour}
		ok, _, err := n.AcquireQueued(ctx, "lock", "waiter again", time.Hour, w) // takes the handed key over
		took = must(ok, err)
		must(n.Release(ctx, "other", "o", 0))
		order = append(order, "lock:"+next+":end")
	})
	must(n.Acquire(ctx, "lock", "v", time.Hour))
	waiting(t, n, "lock")
	must(n.Acquire(ctx, "other", "o", time.Hour))
	waiting(t, n, "other")
	if ok := must(n.Release(ctx, "lock", "v", 0)); !ok {
		t.Fatal(`Release("lock", "v") = false, want true`)
	}
	if !took {
		t.Error("fn's take-over of the waiter's key = false, want true: fn runs after the release's change (the hand-over)")
	}
	// A notification names the waiter, and the value it was handed the key
	// at when it was (wire.Grant).
	if want := []string{"lock:waiter\nwaiter:begin", "lock:waiter\nwaiter:end", "other:waiter\nwaiter"}; !slices.Equal(order, want) {
		t.Errorf("deliveries %q, want %q: synchronous, in order, the nested one after fn returns", order, want)
	}
}

// TestWatchStraggler: a Release that applies after its caller gave up (a
// delayed node) is reported when it applies; one on a paused node when it
// resumes; a Fail'ed node reports nothing.
func TestWatchStraggler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		must := mustFor(t)
		n := memnode.New("straggler")
		var r notes
		mustWatch(t, n, "lock", r.fn)
		must(n.Acquire(ctx, "lock", "v", time.Hour))
		waiting(t, n, "lock")
		n.SetDelay(time.Second)
		short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		if _, err := n.Release(short, "lock", "v", 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Release on a node 1s away with a 10ms deadline: %v, want context.DeadlineExceeded", err)
		}
		if got := r.list(); len(got) != 0 {
			t.Fatalf("notifications %q before the late Release applied, want none", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := r.list(); !slices.Equal(got, []string{"waiter\nwaiter"}) {
			t.Fatalf("notifications %q after the late Release applied, want [\"waiter\\nwaiter\"] (handed the key at its value)", got)
		}
		n.SetDelay(0)
		handedBack(t, n, "lock")
		must(n.Acquire(ctx, "lock", "v", time.Hour))
		waiting(t, n, "lock")
		resume := n.Pause()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = n.Release(ctx, "lock", "v", 0)
		}()
		synctest.Wait()
		if got := r.list(); len(got) != 1 {
			t.Fatalf("notifications %q while the node is paused, want one", got)
		}
		resume()
		<-done
		if got := r.list(); len(got) != 2 {
			t.Fatalf("notifications %q after resume, want two", got)
		}
		handedBack(t, n, "lock")
		must(n.Acquire(ctx, "lock", "v", time.Hour))
		waiting(t, n, "lock")
		n.Fail(errors.New("unknown outcome"))
		if _, err := n.Release(ctx, "lock", "v", 0); err == nil {
			t.Fatal("Release on a failing node returned no error")
		}
		n.Fail(nil)
		if got := r.list(); len(got) != 2 {
			t.Fatalf("notifications %q after a failed Release, want two", got)
		}
	})
}

// TestWatchEndedContext: Watch fails only with an ended context, wrapping
// redlock.ErrNotSent and ctx.Err(); a failing node still watches.
func TestWatchEndedContext(t *testing.T) {
	n := memnode.New("ctx")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := n.Watch(ctx, "lock", "", func(string) {}); !errors.Is(err, context.Canceled) || !errors.Is(err, redlock.ErrNotSent) {
		t.Errorf("Watch with a cancelled context: %v, want an error wrapping redlock.ErrNotSent and context.Canceled", err)
	}
	n.Fail(redlock.ErrNotSent)
	stop, err := n.Watch(t.Context(), "lock", "", func(string) {})
	if err != nil {
		t.Errorf("Watch on a failing node: %v, want none (a watch is no command)", err)
	} else {
		stop()
		stop()
	}
}

// TestQueueOnVirtualTime: a queue entry lives w.TTL after the
// AcquireQueued that set it, on the node clock, and is gone 1ms later (the
// scripts drop entries whose expiry is below now).
func TestQueueOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		must := mustFor(t)
		n := memnode.New("virtual")
		at := time.Now()
		early := redlock.Waiter{ID: "early", Arrival: at, TTL: 100 * time.Millisecond}
		late := redlock.Waiter{ID: "late", Arrival: at.Add(time.Millisecond), TTL: time.Hour}
		must(n.Acquire(ctx, "lock", "holder", time.Hour))
		if ok, _, err := n.AcquireQueued(ctx, "lock", "ve", time.Hour, early); ok || err != nil {
			t.Fatalf("AcquireQueued of early on a held key = %v, %v; want false", ok, err)
		}
		if ok, _, err := n.AcquireQueued(ctx, "lock", "vl", time.Hour, late); ok || err != nil {
			t.Fatalf("AcquireQueued of late on a held key = %v, %v; want false", ok, err)
		}
		time.Sleep(100 * time.Millisecond)
		must(n.Release(ctx, "lock", "holder", 0))
		if v := n.Keys()["lock"]; v != "ve" {
			t.Fatalf("a release 100ms after early's entry (TTL 100ms) left the key at %q, want it handed to early (\"ve\": an entry expiring now still lives, as on Redis)", v)
		}
		must(n.Release(ctx, "lock", "ve", 0)) // early's key (it held with it: it leaves the line); late is handed it
		must(n.Release(ctx, "lock", "vl", 0))
		must(n.Acquire(ctx, "lock", "holder", time.Hour))
		if ok, _, err := n.AcquireQueued(ctx, "lock", "ve", time.Hour, early); ok || err != nil {
			t.Fatalf("AcquireQueued of early on a held key = %v, %v; want false", ok, err)
		}
		if ok, _, err := n.AcquireQueued(ctx, "lock", "vl", time.Hour, late); ok || err != nil {
			t.Fatalf("AcquireQueued of late on a held key = %v, %v; want false", ok, err)
		}
		time.Sleep(101 * time.Millisecond)
		must(n.Release(ctx, "lock", "holder", 0))
		if v := n.Keys()["lock"]; v != "vl" {
			t.Fatalf("a release 101ms after early's entry (TTL 100ms) left the key at %q, want it handed to late (\"vl\")", v)
		}
	})
}

// TestQueueKeys: the queue's keys are no lock keys for Keys, and go with a
// restart without persistence.
func TestQueueKeys(t *testing.T) {
	ctx := t.Context()
	must := mustFor(t)
	n := memnode.New("keys")
	w1 := redlock.Waiter{ID: "w1", Arrival: time.Now(), TTL: time.Hour}
	w2 := redlock.Waiter{ID: "w2", Arrival: w1.Arrival.Add(time.Millisecond), TTL: time.Hour}
	must(n.Acquire(ctx, "lock", "holder", time.Hour))
	_, _, _ = n.AcquireQueued(ctx, "lock", "v1", time.Hour, w1)
	if got := n.Keys(); len(got) != 1 || got["lock"] != "holder" {
		t.Errorf("Keys() = %q, want only the lock (the queue's keys are the lock's own)", got)
	}
	n.Restart(true)
	must(n.Release(ctx, "lock", "holder", 0))
	if ok, _, _ := n.AcquireQueued(ctx, "lock", "v2", time.Hour, w2); ok {
		t.Error("AcquireQueued of w2 after a restart that kept the keys = true, want false: w1 is first")
	}
	n.Restart(false)
	if ok, _, _ := n.AcquireQueued(ctx, "lock", "v2", time.Hour, w2); !ok {
		t.Error("AcquireQueued of w2 after a restart without persistence = false, want true: the queue went with the keys")
	}
}

// TestWatchChannelNames: a watch is for the channel redisnode would use,
// so "x" and "{x}" share notifications and a name without a valid hash tag
// is refused; a release hands the key to the waiter it names, and that
// waiter's LeaveQueue releases it, unreported when nobody else waits.
func TestWatchChannelNames(t *testing.T) {
	ctx := t.Context()
	must := mustFor(t)
	n := memnode.New("channels")
	var r notes
	mustWatch(t, n, "x", r.fn)
	must(n.Acquire(ctx, "{x}", "v", time.Hour))
	waiting(t, n, "{x}")
	must(n.Release(ctx, "{x}", "v", 0))
	if got := r.list(); !slices.Equal(got, []string{"waiter\nwaiter"}) {
		t.Errorf("Watch(\"x\") after a release of \"{x}\": %q, want [\"waiter\\nwaiter\"] (one channel, {x}:released)", got)
	}
	if _, err := n.Watch(ctx, "a}b", "", r.fn); !errors.Is(err, redlock.ErrNotSent) {
		t.Errorf("Watch(\"a}b\") = %v, want an error wrapping redlock.ErrNotSent", err)
	}
	var q notes
	mustWatch(t, n, "lock", q.fn)
	w1 := redlock.Waiter{ID: "w1", Arrival: time.Now(), TTL: time.Hour}
	must(n.Acquire(ctx, "lock", "holder", time.Hour))
	_, _, _ = n.AcquireQueued(ctx, "lock", "v1", time.Hour, w1)
	must(n.Release(ctx, "lock", "holder", 0))
	if err := n.LeaveQueue(ctx, "lock", w1); err != nil {
		t.Fatal(err)
	}
	if got := q.list(); !slices.Equal(got, []string{"w1\nv1"}) {
		t.Errorf("notifications %q, want [\"w1\\nv1\"]: the release's hand-over, and no report of a release nobody waits for", got)
	}
	if v, held := n.Keys()["lock"]; held {
		t.Errorf("key %q left after the waiter it was handed to left, want none", v)
	}
}

// TestWatchPanickingCallback: a fn that panics panics in the releasing
// goroutine after the release applied, and the node delivers the next
// release's notification all the same.
func TestWatchPanickingCallback(t *testing.T) {
	ctx := t.Context()
	must := mustFor(t)
	n := memnode.New("panic")
	var r notes
	first := true
	mustWatch(t, n, "lock", func(next string) {
		if first {
			first = false
			panic("fn failed")
		}
		r.fn(next)
	})
	must(n.Acquire(ctx, "lock", "v", time.Hour))
	waiting(t, n, "lock")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Release with a panicking fn did not panic")
			}
		}()
		_, _ = n.Release(ctx, "lock", "v", 0)
	}()
	handedBack(t, n, "lock") // the release applied: it handed the waiter the key
	if ok := must(n.Acquire(ctx, "lock", "w", time.Hour)); !ok {
		t.Fatal(`Acquire("lock", "w") = false, want true: the waiter's key was released`)
	}
	waiting(t, n, "lock")
	must(n.Release(ctx, "lock", "w", 0))
	if got := r.list(); !slices.Equal(got, []string{"waiter\nwaiter"}) {
		t.Errorf("notifications after the panic %q, want [\"waiter\\nwaiter\"]", got)
	}
}
