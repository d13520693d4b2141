package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// The README's first lock: the fewest lines that take a lock on three
// masters and let it go. The code is firstLock below.
func Example_firstLock() {
	if err := firstLock(); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// locked: true
}

// firstLock is the README's first lock, line for line
// (TestReadmeQuickStartIsTheExample compares them), except for the loop
// that builds the nodes, as in quickStart.
func firstLock() error {
	var nodes []redlock.Node
	for _, addr := range []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"} {
		nodes = append(nodes, memnode.New(addr))
	}

	client, err := redlock.New(nodes)
	if err != nil {
		return err
	}
	defer client.Close(context.Background())

	mutex, err := client.NewMutex("locks:report") // TTL 10s by default
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := mutex.Lock(ctx) // waits for the lock until ctx ends
	if err != nil {
		return err
	}
	defer lease.Unlock(context.Background())

	fmt.Println("locked:", lease.Valid()) // the work goes here
	return nil
}

// The README's quick start: a lock with fencing tokens, taken once with Lock
// and Unlock, then once with Do, one after the other (never both at once:
// the second would wait for the first). The code is quickStart below.
func Example() {
	if err := quickStart(); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// Lock: got a fencing token: true
	// Do: its token is higher: true
	// the resource holds "second"
}

// quickStart is the README's quick start, line for line
// (TestReadmeQuickStartIsTheExample compares them), except for the loop
// that builds the nodes: the README dials three real masters with
// redisnode.Dial (and closes them), while this loop makes three in-memory
// masters (memnode), so that the example runs anywhere, with no server.
func quickStart() error {
	var nodes []redlock.Node
	for _, addr := range []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"} {
		nodes = append(nodes, memnode.New(addr))
	}

	client, err := redlock.New(nodes) // does not contact the nodes
	if err != nil {
		return err // invalid options are rejected here, naming the bad value
	}
	defer func() {
		// Waits for background cleanup until this deadline; an error says
		// which releases were abandoned (their keys expire with their TTL).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := client.Close(ctx); err != nil {
			log.Print(err)
		}
	}()

	// The resource the lock protects. Here a stand-in that refuses a
	// fencing token below the highest it has seen; yours must do the same,
	// so that a holder paused past its lease cannot overwrite newer work.
	var store memnode.FencedStore

	mutex, err := client.NewMutex("locks:invoices:42", redlock.WithTTL(10*time.Second), redlock.WithFencing())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Lock, work, Unlock.
	lease, err := mutex.Lock(ctx) // retries with jittered backoff until ctx ends
	if err != nil {
		return err // wraps redlock.ErrNotObtained (and ctx.Err() if ctx ended)
	}
	first, ok := lease.Fence() // ok: the mutex was made WithFencing
	fmt.Println("Lock: got a fencing token:", ok)
	// Work while the lease holds: lease.Done() closes the moment it can no
	// longer be trusted (validity over, Unlock, or an Extend that found the
	// lock lost) and lease.Err() says which; lease.Valid() is the pre-write
	// check and never waits on the network; lease.Extend(ctx) moves the
	// deadline.
	if err := store.Write(first, "first"); err != nil {
		return err
	}
	if err := lease.Unlock(ctx); err != nil {
		return err // the lock is freed when its keys expire
	}

	// Or let the library hold it while a function runs: renewed in the
	// background, ctx cancelled the moment the lease can no longer be
	// trusted, released when the function returns.
	err = mutex.Do(ctx, func(ctx context.Context, lease *redlock.Lease) error {
		token, _ := lease.Fence()
		fmt.Println("Do: its token is higher:", token > first)
		return store.Write(token, "second")
	})
	if err != nil {
		return err
	}
	value, _ := store.Read()
	fmt.Printf("the resource holds %q\n", value)
	return nil
}
