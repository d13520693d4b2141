// Command quorumlock runs commands under a distributed lock, inspects locks
// and their masters, and runs quorumlock's chaos suite.
//
// Usage:
//
//	quorumlock run [--nodes URL,...] [--ttl 10s] [--wait 0|D|-1] [--grace D] [--fencing]
//	               [--quarantine D] [--min-hold D] [--cooldown D] [--shared | --exclusive | --semaphore K]
//	               [--conflict-exit-code N] [--label L] [--log-level L | --verbose] [--metrics-addr ADDR] NAME [--] COMMAND [ARGS...]
//	quorumlock status [--nodes URL,...] [--json] [--watch D] [--quarantine D] NAME|PATTERN
//	quorumlock doctor [--nodes URL,...] [--json]
//	quorumlock chaos [--quick] [--scenario NAME[,NAME...]] [--backend auto|docker|process|memory]
//	                 [--nodes N[,N...]] [--duration D] [--short] [--json FILE] [--list]
//
// The masters of run, status and doctor are host:port addresses or
// redis:// and rediss:// URLs (users, passwords, TLS; node/redisnode.Dial's
// forms), from --nodes, --nodes-file, $QUORUMLOCK_NODES or
// $QUORUMLOCK_NODES_FILE; no output shows a password.
//
// run is a flock(1) across hosts: it takes the lock, renews it, runs the
// command in its own process group, forwards SIGINT, SIGTERM, SIGHUP and
// SIGQUIT, and when the lock cannot be kept sends SIGTERM and then SIGKILL
// so that both come before the lease's validity ends. Its exit status is
// the command's, or 75 (not obtained, --conflict-exit-code), 124 (lock
// lost, command terminated), 64 (usage), 69 (masters unavailable or access
// denied), 126 or 127 (command not executable or not found). status shows
// holders, TTLs, fencing counters and the masters' state; doctor checks the
// masters' settings (eviction, persistence, role, version). See
// docs/operations.md.
//
// chaos runs every scenario (or the named ones) of package
// faultinject/chaos, shows progress on stderr, and prints a table on stdout:
// scenario, expected, acquisitions, faults injected, violations, stale writes
// accepted, leaked keys, verdict. The verdict is "safe" for a safe scenario
// that showed no violation, "caught" for an unsafe scenario whose forced
// violation the checker found (RedLock alone cannot prevent it; the
// scenario's protected twins show which mitigation does), and "FAIL"
// otherwise, with a line below the table saying why. The JSON file's
// "verdict" field has the same three values. The exit status is 1 when any
// verdict is FAIL, 64 on a usage error (as for every command).
//
// chaos --quick gives the whole table in about two minutes on two cores:
// every scenario once, at its own number of masters, for the short
// duration (3 s), on the fastest real backend: redis-server processes when
// redis-server is installed (containers restart far slower), else the
// in-memory one. --backend, --nodes and --duration still override.
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

// Exit statuses. A usage error is 64 (EX_USAGE) for every command, run's
// runUsage among them.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 64
)

func main() {
	sigs := make(chan os.Signal, 8)
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	ctx, cancel := context.WithCancel(context.Background())
	if len(os.Args) > 1 && os.Args[1] == "run" {
		// run forwards these to its command; they never end run itself.
		signal.Notify(sigs, forwarded...)
		e.signals = sigs
	} else {
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() { <-sigs; cancel() }()
	}
	code := dispatch(ctx, os.Args[1:], e)
	cancel()
	os.Exit(code)
}

// env is what a command takes from its process: the standard streams, the
// environment, and (run only) the signals to forward.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	signals        <-chan os.Signal
}

const usage = `usage: quorumlock <command> [flags]

commands:
  run     run a command while holding a lock on a quorum of masters (quorumlock run -h)
  status  show who holds a lock, its TTL and fencing counter, per master (quorumlock status -h)
  doctor  check the masters' settings the lock relies on (quorumlock doctor -h)
  chaos   run the chaos suite and check the lock's safety (quorumlock chaos -h)
  bench   measure quorumlock side by side with redsync, redislock and rueidislock (quorumlock bench -h)
`

// run is main without the process: it parses args, writes to stdout and
// stderr, and returns the exit status. The environment is the process's;
// no signal reaches a command it runs (ctx ending counts as SIGTERM).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, args, &env{stdout: stdout, stderr: stderr, getenv: os.Getenv})
}

func dispatch(ctx context.Context, args []string, e *env) int {
	stdout, stderr := e.stdout, e.stderr
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], e)
	case "status":
		return statusCmd(ctx, args[1:], e)
	case "doctor":
		return doctorCmd(ctx, args[1:], e)
	case "chaos":
		return chaosCmd(ctx, args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "quorumlock: unknown command %q (commands: run, status, doctor, chaos, bench)\n%s", args[0], usage)
	return exitUsage
}

func chaosCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quorumlock chaos", flag.ContinueOnError)
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
		fmt.Fprintf(stderr, "usage: quorumlock chaos [flags]\n\nScenarios: %s\n\nFlags:\n", strings.Join(chaos.Names(), ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "quorumlock chaos: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	scs := chaos.Scenarios()
	if *scenario != "" {
		var err error
		if scs, err = chaos.Lookup(strings.Split(*scenario, ",")...); err != nil {
			fmt.Fprintf(stderr, "quorumlock chaos: --scenario: %v\n", err)
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
		fmt.Fprintf(stderr, "quorumlock chaos: --backend %q: want auto, docker, process or memory\n", *backend)
		return exitUsage
	}
	sizes := []int{0} // 0: the scenario's own
	if *nodesFlag != "" {
		sizes = nil
		for _, f := range strings.Split(*nodesFlag, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				fmt.Fprintf(stderr, "quorumlock chaos: --nodes %q: %q is not a positive number of masters\n", *nodesFlag, f)
				return exitUsage
			}
			sizes = append(sizes, n)
		}
	}
	if *duration < 0 {
		fmt.Fprintf(stderr, "quorumlock chaos: --duration %v must not be negative\n", *duration)
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
				fmt.Fprintf(stderr, "quorumlock chaos: --nodes %d: %v\n", n, err)
				return exitUsage
			}
			jobs = append(jobs, job{sc, n})
		}
	}
	// The backend is chosen once, before the first scenario: a setup error
	// is reported once, and every row runs on the same backend.
	kind, why, err := resolveBackend(ctx, kind, *quick)
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock chaos: --backend %s is not available here: %v\n", kind, err)
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
			fmt.Fprintf(stderr, "quorumlock chaos: %v\n", err)
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
			fmt.Fprintf(stderr, "chaos: %s runs on the process backend: its faults act on redis-server processes\n", sc.Name)
		}
		rep, err := chaos.Run(ctx, sc, opt)
		if err != nil {
			fmt.Fprintf(stderr, "quorumlock chaos: %v\n", err)
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
		fmt.Fprintf(stderr, "quorumlock chaos: %v\n", err)
		return exitFail
	}
	if *jsonFile != "" {
		if err := writeJSON(*jsonFile, reps); err != nil {
			fmt.Fprintf(stderr, "quorumlock chaos: --json: %v\n", err)
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

// parseFlags parses a command's args with fs. On -h or --help it prints
// usageText and fs's flags on stdout and reports help; otherwise it returns
// fs.Parse's error.
func parseFlags(fs *flag.FlagSet, args []string, usageText string, stdout io.Writer) (help bool, err error) {
	err = fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageText)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return true, nil
	}
	return false, err
}
