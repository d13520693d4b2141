package faultinject_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/redlock"
)

// A chaos test of a lock: five masters, two clients each with its own links,
// and the scenario "crash and immediate restart of a quorum of the holder's
// masters" from docs/faultinject.md. With AOF appendfsync always the keys
// survive the restart, so the second client must not get the lock.
//
// In a test, use faultinject.StartT(t, cfg) instead of Start and Close, and
// prefer Backend Auto (docker or real redis-server processes): the memory
// backend used here runs anywhere but is never evidence on its own.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := faultinject.Start(ctx, faultinject.Config{
		N:           5,
		Backend:     faultinject.Memory,
		Persistence: []faultinject.Persistence{faultinject.AOFAlways},
	})
	if err != nil {
		panic(err)
	}
	defer cluster.Close(context.WithoutCancel(ctx))

	// Each client reaches the masters through its own proxies.
	newClient := func(name string) *redlock.Client {
		link, err := cluster.NewLink(name)
		if err != nil {
			panic(err)
		}
		c, err := redlock.New(link.Nodes())
		if err != nil {
			panic(err)
		}
		return c
	}
	a, b := newClient("clientA"), newClient("clientB")
	defer a.Close(ctx)
	defer b.Close(ctx)

	ma, _ := a.NewMutex("invoices:42", redlock.WithTTL(10*time.Second))
	mb, _ := b.NewMutex("invoices:42", redlock.WithTTL(10*time.Second))
	lease, err := ma.Lock(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("A holds the lock:", lease.Valid())

	// Faults are values: each kind its own type, with a stable name, an
	// Inject and an Undo.
	faults := []faultinject.Fault{
		faultinject.Restart{Nodes: []int{0, 1, 2}, Persistence: faultinject.AOFAlways},
		faultinject.Partition{Nodes: []int{3, 4}, Link: "clientB"},
	}
	for _, f := range faults {
		if err := f.Inject(ctx, cluster); err != nil {
			panic(err)
		}
		fmt.Println("injected", f.Name())
	}

	_, err = mb.TryLock(ctx)
	fmt.Println("B is refused:", errors.Is(err, redlock.ErrNotObtained))

	if err := cluster.HealAll(ctx); err != nil {
		panic(err)
	}
	fmt.Println("A still holds it:", lease.Valid())
	// Output:
	// A holds the lock: true
	// injected restart[0,1,2](delay=0s,aof-always)
	// injected partition[3,4]@clientB
	// B is refused: true
	// A still holds it: true
}
