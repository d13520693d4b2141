package memnode_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Three in-memory masters behind a redlock client. A master that is down
// must fail with an error wrapping redlock.ErrNotSent (a refused
// connection: the command certainly did not reach it); a plain error means
// "unknown", and the client keeps retrying the release of a key the master
// may hold.
func Example() {
	masters := []*memnode.Node{memnode.New("redis-1:6379"), memnode.New("redis-2:6379"), memnode.New("redis-3:6379")}
	client, err := redlock.New([]redlock.Node{masters[0], masters[1], masters[2]})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	mutex, _ := client.NewMutex("invoices:42")

	masters[2].Fail(fmt.Errorf("dial tcp redis-3:6379: connection refused: %w", redlock.ErrNotSent))
	lease, err := mutex.TryLock(context.Background())
	fmt.Println("locked with one master down:", err == nil)
	lease.Unlock(context.Background())

	masters[1].Fail(fmt.Errorf("dial tcp redis-2:6379: connection refused: %w", redlock.ErrNotSent))
	_, err = mutex.TryLock(context.Background())
	fmt.Println("two down, not obtained:", errors.Is(err, redlock.ErrNotObtained))
	// Output:
	// locked with one master down: true
	// two down, not obtained: true
}

// invoiceJob is user code under test: it holds the lock while it works (Do
// renews it) and writes its result with the lease's fencing token.
func invoiceJob(ctx context.Context, m *redlock.Mutex, store *memnode.FencedStore, work time.Duration) error {
	return m.Do(ctx, func(ctx context.Context, lease *redlock.Lease) error {
		select {
		case <-time.After(work):
		case <-ctx.Done():
			return context.Cause(ctx) // the lease can no longer be trusted: stop
		}
		token, _ := lease.Fence()
		return store.Write(token, "invoice")
	})
}

// The pattern for testing code that uses the lock: memnode masters inside a
// testing/synctest bubble, where time is virtual. A job that works for a
// minute under a 1 s TTL (kept alive by renewals), and a job whose masters
// go down mid-way (its context is cancelled before the lock can expire),
// both run instantly and deterministically.
func TestInvoiceJobOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		masters := []*memnode.Node{memnode.New("redis-1:6379"), memnode.New("redis-2:6379"), memnode.New("redis-3:6379")}
		client, err := redlock.New([]redlock.Node{masters[0], masters[1], masters[2]})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close(context.Background())
		mutex, err := client.NewMutex("invoices:42", redlock.WithTTL(time.Second), redlock.WithFencing())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()

		var store memnode.FencedStore
		if err := invoiceJob(ctx, mutex, &store, time.Minute); err != nil {
			t.Fatalf("a minute of work under a 1 s TTL: %v", err)
		}
		if v, _ := store.Read(); v != "invoice" {
			t.Fatalf("store holds %q", v)
		}

		var lost memnode.FencedStore
		done := make(chan error, 1)
		go func() { done <- invoiceJob(ctx, mutex, &lost, time.Minute) }()
		time.Sleep(5 * time.Second) // virtual: five seconds into the job
		for _, m := range masters[:2] {
			m.Fail(fmt.Errorf("connection refused: %w", redlock.ErrNotSent))
		}
		err = <-done
		if !errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("the job went on after its masters went down: %v", err)
		}
		if v, _ := lost.Read(); v != "" {
			t.Fatalf("the job wrote %q after it lost the lock", v)
		}
		for _, m := range masters[:2] {
			m.Fail(nil)
		}
	})
}
