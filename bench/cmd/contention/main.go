// Command contention measures only the bench's contention figures: clients
// lockers of one lock per contender (quorumlock, quorumlock-fair, redsync,
// rueidislock), interleaved in slices, on N=5 redis-server processes it
// starts, and prints their rows and the contention targets:
//
//	cd bench && go run ./cmd/contention [-clients 8] [-duration 6s] [-rounds 6]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/quorumlock/quorumlock/bench"
)

func main() {
	clients := flag.Int("clients", 8, "lockers on the lock, each with its own connections")
	duration := flag.Duration("duration", 6*time.Second, "time each contender runs, over all rounds")
	rounds := flag.Int("rounds", 6, "slices the duration is cut into, contenders shuffled per round")
	flag.Parse()
	var cs []bench.Contender
	for _, c := range bench.Contenders() {
		if slices.Contains([]string{"quorumlock", "quorumlock-fair", "redsync", "rueidislock"}, c.Name) {
			cs = append(cs, c)
		}
	}
	// The healthy rows at N=5 (few cycles) give the fair mode's
	// uncontended target.
	cfg := bench.Config{Ns: []int{5}, Cycles: 200, Contenders: cs,
		Contention: bench.Contention{Clients: *clients, Ns: []int{5}, Duration: *duration, Rounds: *rounds}}
	rows, err := bench.Run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "contention:", err)
		os.Exit(1)
	}
	if err := bench.WriteMarkdown(os.Stdout, rows); err != nil {
		fmt.Fprintln(os.Stderr, "contention:", err)
		os.Exit(1)
	}
	fmt.Println()
	if err := bench.WriteTargets(os.Stdout, rows); err != nil {
		fmt.Fprintln(os.Stderr, "contention:", err)
		os.Exit(1)
	}
}
