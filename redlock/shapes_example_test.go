package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// memNodes returns three in-memory masters for the examples; with real
// masters they come from redisnode.Dial, which implements ShapeNode too.
func memNodes() []redlock.Node {
	var nodes []redlock.Node
	for _, addr := range []string{"redis-1:6379", "redis-2:6379", "redis-3:6379"} {
		nodes = append(nodes, memnode.New(addr))
	}
	return nodes
}

// A reentrant mutex: the owner is an ID the caller chooses (here a job ID),
// so a nested call, in this goroutine or another process of the same job,
// takes the lock again; another job waits for the last hold to go.
func ExampleClient_NewReentrant() {
	client, err := redlock.New(memNodes())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	ctx := context.Background()

	job7, _ := client.NewReentrant("invoices:42", "job-7", redlock.WithTTL(10*time.Second))
	job8, _ := client.NewReentrant("invoices:42", "job-8", redlock.WithTTL(10*time.Second))

	outer, err := job7.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	inner, err := job7.TryLock(ctx) // re-entry by the same owner
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("job-7 holds:", inner.Holds())
	_, err = job8.TryLock(ctx)
	fmt.Println("job-8 refused:", errors.Is(err, redlock.ErrNotObtained))

	inner.Unlock(ctx)
	_, err = job8.TryLock(ctx)
	fmt.Println("job-8 refused after the inner unlock:", errors.Is(err, redlock.ErrNotObtained))
	outer.Unlock(ctx)
	lease, err := job8.TryLock(ctx)
	fmt.Println("job-8 after the last unlock:", err == nil)
	lease.Unlock(ctx)
	// Output:
	// job-7 holds: 2
	// job-8 refused: true
	// job-8 refused after the inner unlock: true
	// job-8 after the last unlock: true
}

// A read-write lock is two mutexes: the reader's leases share it, each with
// its own lease; the writer waits for them, and with WithWriterPreference
// new readers (of any read-write lock of the name) wait for it.
func ExampleClient_NewRWMutex() {
	client, err := redlock.New(memNodes())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	ctx := context.Background()

	reader, writer, err := client.NewRWMutex("catalog", redlock.WithTTL(10*time.Second), redlock.WithWriterPreference())
	if err != nil {
		fmt.Println(err)
		return
	}
	r1, _ := reader.Lock(ctx)
	r2, _ := reader.Lock(ctx)
	fmt.Println("readers:", r2.Holds())

	_, err = writer.TryLock(ctx) // refused, and marks a waiting writer
	fmt.Println("writer refused while reading:", errors.Is(err, redlock.ErrNotObtained))
	_, err = reader.TryLock(ctx)
	fmt.Println("new reader refused while a writer waits:", errors.Is(err, redlock.ErrNotObtained))
	otherReader, _, err := client.NewRWMutex("catalog") // another process's, built without the option
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = otherReader.TryLock(ctx) // preference is the writer's: every reader yields
	fmt.Println("its readers wait too:", errors.Is(err, redlock.ErrNotObtained))

	r1.Unlock(ctx) // r2 keeps its own hold
	fmt.Println("r2 still valid:", r2.Valid())
	r2.Unlock(ctx)
	w, err := writer.TryLock(ctx)
	fmt.Println("writer after the readers:", err == nil)
	w.Unlock(ctx)
	// Output:
	// readers: 2
	// writer refused while reading: true
	// new reader refused while a writer waits: true
	// its readers wait too: true
	// r2 still valid: true
	// writer after the readers: true
}

// A counting semaphore: at most K holders at once, each with its own lease;
// it is a Mutex whose Lock takes one of the places.
func ExampleClient_NewSemaphore() {
	client, err := redlock.New(memNodes())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	ctx := context.Background()

	sem, err := client.NewSemaphore("exports", 2, redlock.WithTTL(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := sem.Lock(ctx)
	b, _ := sem.Lock(ctx)
	fmt.Println("holders:", b.Holds())
	_, err = sem.TryLock(ctx)
	fmt.Println("third refused:", errors.Is(err, redlock.ErrNotObtained))
	a.Unlock(ctx)
	// Lock, not TryLock: the refused TryLock returned once one node said
	// no, and its acquires still on their way to the others may take the
	// place a's release freed, until their rollback gives it back.
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := sem.Lock(wait)
	fmt.Println("third after a release:", err == nil)
	b.Unlock(ctx)
	if err == nil {
		c.Unlock(ctx)
	}
	// Output:
	// holders: 2
	// third refused: true
	// third after a release: true
}
