package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Do with fencing: the function runs while the lease is held (renewed in
// the background) and writes with the lease's fencing token. A holder from
// before, paused past its lease and writing late with its older token, is
// refused by the resource.
func ExampleMutex_Do() {
	client, err := redlock.New(memNodes())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	var store memnode.FencedStore // stands for the protected resource
	mutex, err := client.NewMutex("invoices:42", redlock.WithFencing())
	if err != nil {
		fmt.Println(err)
		return
	}

	// An earlier holder, which will write late.
	old, err := mutex.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	oldToken, _ := old.Fence()
	old.Unlock(ctx)

	err = mutex.Do(ctx, func(ctx context.Context, lease *redlock.Lease) error {
		token, ok := lease.Fence()
		fmt.Println("fenced:", ok, "above the earlier token:", token > oldToken)
		return store.Write(token, "new total")
	})
	fmt.Println("Do:", err)

	err = store.Write(oldToken, "stale total") // the earlier holder wakes up
	fmt.Println("late write refused:", err != nil)
	value, _ := store.Read()
	fmt.Println("resource:", value)
	// Output:
	// fenced: true above the earlier token: true
	// Do: <nil>
	// late write refused: true
	// resource: new total
}

// Renewal loss seen through Done: a lease that renews itself
// (WithAutoRenew) ends the moment a renewal finds the lock gone from a
// majority (here the masters restarted without persistence), or
// when its validity runs out without a renewal; Done closes and Err says why.
// Stop writing then.
func ExampleLease_Done() {
	masters := []*memnode.Node{memnode.New("redis-1:6379"), memnode.New("redis-2:6379"), memnode.New("redis-3:6379")}
	client, err := redlock.New([]redlock.Node{masters[0], masters[1], masters[2]})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	ctx := context.Background()

	mutex, err := client.NewMutex("reports", redlock.WithTTL(300*time.Millisecond), redlock.WithAutoRenew(0)) // renews every TTL/3
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := mutex.Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock(ctx)

	for _, m := range masters {
		m.Restart(false) // loses the key (an acquire still on its way may land again on one)
	}

	select {
	case <-lease.Done(): // closed by the next renewal, at the latest by the end of the validity
		fmt.Println("lease ended, lock lost:", errors.Is(lease.Err(), redlock.ErrLockLost))
		fmt.Println("still valid:", lease.Valid())
	case <-time.After(10 * time.Second):
		fmt.Println("the lease did not end")
	}
	// Output:
	// lease ended, lock lost: true
	// still valid: false
}
