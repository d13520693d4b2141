package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// The quick start. With real masters the nodes come from redisnode:
//
//	n, err := redisnode.Dial("redis://locker:secret@redis-1:6379/0")
//
// Here they are in-memory masters (memnode), so the example runs anywhere.
func Example() {
	var nodes []redlock.Node
	for _, addr := range []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"} {
		nodes = append(nodes, memnode.New(addr))
	}

	client, err := redlock.New(nodes) // does not contact the nodes
	if err != nil {
		fmt.Println(err) // invalid options are rejected here, naming the bad value
		return
	}
	defer func() {
		// Waits for background cleanup: until this deadline (without one, at
		// most ~0.5 s by default); an error says which releases were abandoned.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Close(ctx)
	}()

	mutex, err := client.NewMutex("invoices:42", redlock.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := mutex.Lock(ctx) // retries with jittered backoff until ctx ends
	if err != nil {
		fmt.Println(err) // wraps redlock.ErrNotObtained (and ctx.Err() if ctx ended)
		return
	}
	defer lease.Unlock(context.Background())

	// lease.Done() closes when the lease can no longer be trusted (validity
	// over, Unlock, or an Extend that found the lock lost): stop the work.
	select {
	case <-lease.Done():
		fmt.Println("lost:", lease.Err())
	default:
		fmt.Println("holding invoices:42, valid:", lease.Valid())
	}

	// A second owner cannot take it meanwhile.
	_, err = mutex.TryLock(ctx)
	fmt.Println("second owner:", errors.Is(err, redlock.ErrNotObtained))
	// Output:
	// holding invoices:42, valid: true
	// second owner: true
}
