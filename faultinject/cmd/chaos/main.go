// Command chaos runs quorumlock's chaos suite (package faultinject/chaos)
// and checks the lock's safety on the masters of package faultinject.
//
// Usage, from the faultinject directory of a clone:
//
//	go run ./cmd/chaos [--quick] [--scenario NAME[,NAME...]] [--backend auto|docker|process|memory]
//	                   [--nodes N[,N...]] [--duration D] [--short] [--json FILE] [--list]
//
// It runs every scenario (or the named ones), shows progress on stderr,
// and prints a table on stdout: scenario, expected, acquisitions, faults
// injected, violations, stale writes accepted, leaked keys, verdict. The
// verdict is "safe" for a safe scenario that showed no violation, "caught"
// for an unsafe scenario whose forced violation the checker found (RedLock
// alone cannot prevent it; the scenario's protected twins show which
// mitigation does), and "FAIL" otherwise, with a line below the table
// saying why. The JSON file's "verdict" field has the same three values.
// The exit status is 1 when any verdict is FAIL, 64 on a usage error.
//
// --quick gives the whole table in about two minutes on two cores: every
// scenario once, at its own number of masters, for the short duration
// (3 s), on the fastest real backend: redis-server processes when
// redis-server is installed (containers restart far slower), else the
// in-memory one. --backend, --nodes and --duration still override.
//
// The operator's command (run, status, doctor) is cmd/quorumlock at the
// repository's root, a module without this harness's dependencies.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/faultinject/chaos"
	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// Exit statuses: 64 (EX_USAGE) for a usage error, as the operator's
// quorumlock command gives.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 64
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenario := fs.String("scenario", "", "run only these scenarios (comma-separated names; default: all)")
	backend := fs.String("backend", "auto", "where the masters run: auto, docker, process or memory")
	nodesFlag := fs.String("nodes", "", "numbers of masters, comma-separated: each scenario runs once per number (default: the scenario's own; make chaos uses 3,5)")
	duration := fs.Duration("duration", 0, "workload duration per scenario, overriding the scenario's (0: the scenario's)")
	short := fs.Bool("short", false, "run the CI-sized variant (a few seconds per scenario)")
	quick := fs.Bool("quick", false, "the whole table in about two minutes: every scenario once at its own size for the short duration, on the fastest real backend (process when redis-server is installed)")
	jsonFile := fs.String("json", "", "also write the results as JSON to this file")
	list := fs.Bool("list", false, "list the scenarios and exit")
	verbose := fs.Bool("verbose", false, "also show go-redis's log (failed dials while masters are down)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: chaos [flags]\n\nScenarios: %s\n\nFlags:\n", strings.Join(chaos.Names(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "chaos: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	scs := chaos.Scenarios()
	if *scenario != "" {
		var err error
		if scs, err = chaos.Lookup(strings.Split(*scenario, ",")...); err != nil {
			fmt.Fprintf(stderr, "chaos: --scenario: %v\n", err)
			return exitUsage
		}
	}
	if *list {
		// Columns as wide as their longest entry: names outgrow any fixed width.
		nw, ttlw := 0, 0
		for _, s := range scs {
			nw, ttlw = max(nw, len(s.Name)), max(ttlw, len(s.TTL.String()))
		}
		for _, s := range scs {
			fmt.Fprintf(stdout, "%-*s  %-6s  N=%d  K=%-2d  TTL=%-*v  %s\n", nw, s.Name, s.Expect, s.Nodes, s.Clients, ttlw, s.TTL, s.About)
		}
		return exitOK
	}
	kind := faultinject.BackendKind(*backend)
	switch kind {
	case faultinject.Auto, faultinject.Docker, faultinject.Process, faultinject.Memory:
	default:
		fmt.Fprintf(stderr, "chaos: --backend %q: want auto, docker, process or memory\n", *backend)
		return exitUsage
	}
	sizes := []int{0} // 0: the scenario's own
	if *nodesFlag != "" {
		sizes = nil
		for _, f := range strings.Split(*nodesFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "chaos: --nodes %q: %q is not a positive number of masters\n", *nodesFlag, f)
				return exitUsage
			}
			sizes = append(sizes, n)
		}
	}
	if *duration < 0 {
		fmt.Fprintf(stderr, "chaos: --duration %v must not be negative\n", *duration)
		return exitUsage
	}
	type job struct {
		sc    chaos.Scenario
		nodes int
	}
	var jobs []job
	for _, sc := range scs {
		for _, n := range sizes {
			s := sc
			if n > 0 {
				s.Nodes = n
			}
			if err := s.Validate(); err != nil {
				fmt.Fprintf(stderr, "chaos: --nodes %d: %v\n", n, err)
				return exitUsage
			}
			jobs = append(jobs, job{sc, n})
		}
	}
	// The backend is chosen once, before the first scenario: a setup error
	// is reported once, and every row runs on the same backend.
	kind, why, err := resolveBackend(ctx, kind, *quick)
	if err != nil {
		fmt.Fprintf(stderr, "chaos: --backend %s is not available here: %v\n", kind, err)
		return exitFail
	}
	if why != "" {
		fmt.Fprintf(stderr, "chaos: %s\n", why)
	}
	if !*verbose {
		// go-redis logs every failed dial; during a chaos run they are expected.
		lockkey.DiscardClientLog()
	}
	opt := chaos.Options{Backend: kind, Short: *short || *quick, Duration: *duration, Progress: stderr, CheckGoroutines: true}
	start := time.Now()
	// One PostgreSQL server for the scenarios that write to one (each run
	// writes a resource of its own); without PostgreSQL they fail, saying
	// so.
	for _, j := range jobs {
		if j.sc.Resource != chaos.PostgreSQL || chaos.PostgresAvailable() != nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		pg, err := chaos.StartPostgres(pctx)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
			return exitFail
		}
		defer pg.Close()
		opt.Postgres = pg
		fmt.Fprintf(stderr, "chaos: PostgreSQL for the scenarios that write to it at %s\n", pg.Addr())
		break
	}
	var reps []chaos.Report
	for i, j := range jobs {
		sc := j.sc
		opt := opt
		opt.Nodes = j.nodes
		fmt.Fprintf(stderr, "chaos: [%d/%d] %s (expect %s)\n", i+1, len(jobs), sc.Name, sc.Expect)
		if sc.Needs().Process && kind != faultinject.Process && faultinject.BackendAvailable(ctx, faultinject.Process) == nil {
			opt.Backend = faultinject.Process
			fmt.Fprintf(stderr, "chaos: %s runs on the process backend: it needs redis-server processes (its faults, or a waiting line)\n", sc.Name)
		}
		rep, err := chaos.Run(ctx, sc, opt)
		for retry := 0; err == nil && ctx.Err() == nil && chaos.Vacuous(sc, rep) && retry < 2; retry++ {
			// As the CI suite does: a run that proved nothing (an unsafe
			// scenario's forced violation missed on a loaded machine, a
			// safe one that locked nothing) runs again, at most twice.
			fmt.Fprintf(stderr, "chaos: %s: %d acquisitions, %d violations: it proved nothing, running it again\n", sc.Name, rep.Acquisitions, rep.Violations)
			rep, err = chaos.Run(ctx, sc, opt)
		}
		if err != nil {
			fmt.Fprintf(stderr, "chaos: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "chaos: [%d/%d] %s (N=%d) on %s: %s in %.1fs (%d acquisitions, %d faults, %d violations, %d locks lost)\n",
			i+1, len(jobs), sc.Name, rep.Nodes, rep.Backend, rep.Outcome(), rep.Elapsed.Seconds(), rep.Acquisitions, rep.Faults, rep.Violations, rep.Findings.LocksLost)
		reps = append(reps, rep)
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "chaos: interrupted")
			break
		}
	}
	fmt.Fprintf(stderr, "chaos: %d scenarios in %.1fs\n", len(reps), time.Since(start).Seconds())
	if *quick {
		fmt.Fprintln(stderr, "chaos: that was the quick run; without --quick each scenario runs for 30s on the auto backend")
	}
	if err := chaos.WriteTable(stdout, reps); err != nil {
		fmt.Fprintf(stderr, "chaos: %v\n", err)
		return exitFail
	}
	if *jsonFile != "" {
		if err := writeJSON(*jsonFile, reps); err != nil {
			fmt.Fprintf(stderr, "chaos: --json: %v\n", err)
			return exitFail
		}
	}
	for _, r := range reps {
		if r.Outcome() == chaos.OutcomeFail {
			return exitFail
		}
	}
	if ctx.Err() != nil || len(reps) < len(scs) {
		return exitFail
	}
	return exitOK
}

// resolveBackend is faultinject.Resolve, except that a quick run on the
// auto backend prefers redis-server processes: real servers like docker's
// (whose image is built from the same binary), and the fastest to kill and
// restart, which most scenarios do again and again. Without redis-server
// neither can run, and Resolve falls back to memory.
func resolveBackend(ctx context.Context, kind faultinject.BackendKind, quick bool) (faultinject.BackendKind, string, error) {
	if quick && kind == faultinject.Auto {
		if bin, err := redisproc.LookPath(); err == nil {
			return faultinject.Process, fmt.Sprintf("quick backend: process (redis-server at %s: real servers, and the fastest backend to kill and restart; --backend docker runs them in containers)", bin), nil
		}
		kind, why, err := faultinject.Resolve(ctx, kind)
		return kind, "quick " + strings.TrimPrefix(why, "auto "), err
	}
	return faultinject.Resolve(ctx, kind)
}

func writeJSON(name string, reps []chaos.Report) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := chaos.WriteJSON(f, reps); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return f.Close()
}
