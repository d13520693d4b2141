package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/quorumlock/quorumlock/node"
	"github.com/quorumlock/quorumlock/redlock"
)

// The quick start from the README: a lock over three independent Redis
// masters. The masters here are in-process miniredis servers so that the
// example runs anywhere; in production, Dial the addresses of your masters.
func Example() {
	var nodes []node.Node
	for i := 0; i < 3; i++ {
		srv, err := miniredis.Run() // your master: "redis-1:6379", ...
		if err != nil {
			panic(err)
		}
		defer srv.Close()
		n, err := node.Dial(srv.Addr())
		if err != nil {
			panic(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}

	client, err := redlock.New(nodes, redlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())

	mutex, err := client.NewMutex("invoices:42")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := mutex.Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("held:", lease.Valid())

	// A second owner cannot take it while it is held.
	_, err = mutex.TryLock(ctx)
	fmt.Println("second owner:", errors.Is(err, redlock.ErrNotObtained))

	// Work while lease.Valid(); lease.Extend(ctx) pushes lease.Until().
	fmt.Println("unlock:", lease.Unlock(ctx))
	// Output:
	// held: true
	// second owner: true
	// unlock: <nil>
}
