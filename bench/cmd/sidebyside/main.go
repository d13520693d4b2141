// Command sidebyside runs the bench package's side-by-side measurement
// with chosen sizes, delays and cycle counts, and prints markdown tables
// (and, with -json, the rows as JSON). quorumlock-bench runs the whole
// measurement (every condition, contention, targets, chart).
//
//	cd bench && go run ./cmd/sidebyside -n 1,3,5 -cycles 2000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
}

func run() error {
	ns := flag.String("n", "1,3,5", "numbers of masters, comma-separated")
	addrs := flag.String("addrs", "", "comma-separated masters to use, host:port or redis:// URLs (default: start redis-server processes)")
	delays := flag.String("delay", "0", "conditions: comma-separated delays added in the client before every write to every node (0: healthy)")
	cycles := flag.Int("cycles", 2000, "measured cycles per contender, N and condition")
	slice := flag.Int("slice", 50, "cycles per contender per round")
	warmup := flag.Int("warmup", 20, "unmeasured cycles per contender first")
	ttl := flag.Duration("ttl", 8*time.Second, "lock TTL of every contender")
	seed := flag.Uint64("seed", 1, "seed of the order within rounds")
	jsonOut := flag.String("json", "", "also write the rows as JSON to this file")
	flag.Parse()

	cfg := bench.Config{Cycles: *cycles, Slice: *slice, Warmup: *warmup, TTL: *ttl, Seed: *seed, Log: os.Stderr}
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-n: %w", err)
		}
		cfg.Ns = append(cfg.Ns, n)
	}
	if *addrs != "" {
		ms, err := bench.ParseMasters(strings.Split(*addrs, ","))
		if err != nil {
			return fmt.Errorf("-addrs: %w", err)
		}
		cfg.Masters = ms
	}
	for _, s := range strings.Split(*delays, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-delay: %w", err)
		}
		if d == 0 {
			cfg.Conditions = append(cfg.Conditions, bench.Case{Condition: bench.Healthy})
		} else {
			cfg.Conditions = append(cfg.Conditions, bench.Case{Condition: bench.Delayed(d)})
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rows, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s/%s, GOMAXPROCS=%d;%s\n\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), versions())
	if err := bench.WriteMarkdown(os.Stdout, rows); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("Contenders (every one with the same TTL):")
	for _, c := range bench.Contenders() {
		fmt.Printf("- %s: %s\n", c.Name, c.Settings)
	}
	for _, c := range cfg.Conditions {
		fmt.Printf("\n%s: %s.\n", c.Condition.Name, c.Condition.Describe())
	}
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			return err
		}
		if err := bench.WriteJSON(f, rows); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

// versions lists the contenders' module versions compiled in.
func versions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var out string
	for _, m := range bi.Deps {
		switch m.Path {
		case "github.com/redis/go-redis/v9", "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/redis/rueidis":
			out += " " + m.Path + " " + m.Version
		}
	}
	return out
}
