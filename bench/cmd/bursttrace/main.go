// Command bursttrace shows where the first waits of a contended burst go:
// clients lockers (each its own redlock.Client, as processes would have)
// arrive at once on one idle lock over N=5 redis-server processes it
// starts, cycle Lock then Unlock for window, and it prints, per burst, the
// first acquisitions (when, after how many attempts, how long the call
// waited) and the longest waits of the burst in acquisition periods. The
// bursts are idle apart long enough for the clients' watches to end, as
// the contention measurement's slices are:
//
//	cd bench && go run ./cmd/bursttrace [-fair] [-clients 8] [-bursts 3] [-idle 3s] [-window 300ms]
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/bench"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// acquisition is one Lock call that returned a lease: when it began and
// when it returned, from the burst's start.
type acquisition struct {
	client    int
	attempts  int
	want, got time.Duration
}

// attempts records, per client, the attempts of its last Lock call.
type attempts struct {
	redlock.NopObserver
	mu sync.Mutex
	n  int
}

func (a *attempts) OpDone(_ context.Context, e redlock.OpEvent) {
	if e.Op == redlock.OpAcquire {
		a.mu.Lock()
		a.n = e.Attempts
		a.mu.Unlock()
	}
}

func (a *attempts) last() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

func main() {
	fair := flag.Bool("fair", false, "WithFairQueue")
	clients := flag.Int("clients", 8, "lockers, each with its own client")
	bursts := flag.Int("bursts", 3, "bursts to run")
	idle := flag.Duration("idle", 3*time.Second, "idle time before each burst (the watches linger 1s)")
	window := flag.Duration("window", 300*time.Millisecond, "how long each burst cycles")
	flag.Parse()
	if err := run(*fair, *clients, *bursts, *idle, *window); err != nil {
		fmt.Fprintln(os.Stderr, "bursttrace:", err)
		os.Exit(1)
	}
}

func run(fair bool, clients, bursts int, idle, window time.Duration) error {
	addrs, stop, err := bench.StartServers(5)
	if err != nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	var mus []*redlock.Mutex
	var obs []*attempts
	for range clients {
		nodes, err := redisnode.DialAll(addrs...)
		if err != nil {
			return err
		}
		o := &attempts{}
		c, err := redlock.New(nodes.Redlock(), redlock.WithObserver(o))
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		opts := []redlock.LockOption{redlock.WithTTL(10 * time.Second)}
		if fair {
			opts = append(opts, redlock.WithFairQueue())
		}
		m, err := c.NewMutex("bursttrace", opts...)
		if err != nil {
			return err
		}
		// A first cycle meets the servers (identification, connections).
		l, err := m.Lock(ctx)
		if err != nil {
			return err
		}
		if err := l.Unlock(ctx); err != nil {
			return err
		}
		mus, obs = append(mus, m), append(obs, o)
	}
	for b := range bursts {
		time.Sleep(idle) // the watches end: the burst starts cold, as a slice does
		acqs, err := burst(ctx, mus, obs, window)
		if err != nil {
			return err
		}
		report(b, acqs, window)
	}
	return nil
}

// burst runs every locker from one instant for window.
func burst(ctx context.Context, mus []*redlock.Mutex, obs []*attempts, window time.Duration) ([]acquisition, error) {
	start := time.Now()
	end := start.Add(window)
	var mu sync.Mutex
	var acqs []acquisition
	errs := make(chan error, len(mus))
	var wg sync.WaitGroup
	for i, m := range mus {
		wg.Go(func() {
			for time.Now().Before(end) {
				want := time.Now()
				l, err := m.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				got := time.Now()
				n := obs[i].last()
				if err := l.Unlock(ctx); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acqs = append(acqs, acquisition{client: i, attempts: n, want: want.Sub(start), got: got.Sub(start)})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	slices.SortFunc(acqs, func(a, b acquisition) int { return cmp.Compare(a.got, b.got) })
	return acqs, nil
}

// report prints a burst's first acquisitions and its longest waits.
func report(b int, acqs []acquisition, window time.Duration) {
	if len(acqs) == 0 {
		fmt.Printf("burst %d: no acquisition\n", b)
		return
	}
	period := window / time.Duration(len(acqs))
	at := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	fmt.Printf("burst %d: %d acquisitions, period %v\n", b, len(acqs), period.Round(time.Microsecond))
	fmt.Println("  the first ones: got at (client, attempts, waited since)")
	for _, a := range acqs[:min(len(acqs), 10)] {
		fmt.Printf("    %9v  c%d  %d  %v\n", at(a.got), a.client, a.attempts, at(a.want))
	}
	slices.SortFunc(acqs, func(a, b acquisition) int { return cmp.Compare(b.got-b.want, a.got-a.want) })
	fmt.Println("  the longest waits: wait (periods), began at, attempts")
	for _, a := range acqs[:min(len(acqs), 4)] {
		w := a.got - a.want
		fmt.Printf("    %9v (%.1f)  %v  %d\n", w.Round(10*time.Microsecond), float64(w)/float64(period), at(a.want), a.attempts)
	}
}
