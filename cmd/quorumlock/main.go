// Command quorumlock runs quorumlock's chaos suite and inspects locks.
//
// Usage:
//
//	quorumlock chaos [--scenario NAME[,NAME...]] [--backend auto|docker|process|memory]
//	                 [--nodes N] [--duration D] [--short] [--json FILE] [--list]
//	quorumlock status --addrs HOST:PORT[,HOST:PORT...] NAME
//	quorumlock bench | run     (not yet available)
//
// chaos runs every scenario (or the named ones) of package
// faultinject/chaos, shows progress on stderr, and prints a table on stdout:
// scenario, expected, acquisitions, faults injected, violations, stale writes
// accepted, leaked keys, verdict. Verdict pass means a safe scenario showed no
// violation and an unsafe one showed at least one. The exit status is 1 when
// any verdict is fail, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/faultinject/chaos"
	"github.com/quorumlock/quorumlock/node"
	"github.com/quorumlock/quorumlock/redlock"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: quorumlock <command> [flags]

commands:
  chaos   run the chaos suite and check the lock's safety (quorumlock chaos -h)
  status  show who holds a lock on given masters (quorumlock status -h)
  bench   not yet available
  run     not yet available
`

// run is main without the process: it parses args, writes to stdout and
// stderr, and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "chaos":
		return chaosCmd(ctx, args[1:], stdout, stderr)
	case "status":
		return statusCmd(ctx, args[1:], stdout, stderr)
	case "bench", "run":
		fmt.Fprintf(stderr, "quorumlock %s: not yet available\n", args[0])
		return exitUsage
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "quorumlock: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

func chaosCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quorumlock chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenario := fs.String("scenario", "", "run only these scenarios (comma-separated names; default: all)")
	backend := fs.String("backend", "auto", "where the masters run: auto, docker, process or memory")
	nodes := fs.Int("nodes", 0, "number of masters, overriding each scenario's (0: the scenario's)")
	duration := fs.Duration("duration", 0, "workload duration per scenario, overriding the scenario's (0: the scenario's)")
	short := fs.Bool("short", false, "run the CI-sized variant (a few seconds per scenario)")
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
		for _, s := range scs {
			fmt.Fprintf(stdout, "%-24s %-6s N=%d K=%d TTL=%v  %s\n", s.Name, s.Expect, s.Nodes, s.Clients, s.TTL, s.About)
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
	if *nodes < 0 {
		fmt.Fprintf(stderr, "quorumlock chaos: --nodes %d must not be negative\n", *nodes)
		return exitUsage
	}
	if *duration < 0 {
		fmt.Fprintf(stderr, "quorumlock chaos: --duration %v must not be negative\n", *duration)
		return exitUsage
	}
	for _, sc := range scs {
		if *nodes > 0 {
			sc.Nodes = *nodes
		}
		if err := sc.Validate(); err != nil {
			fmt.Fprintf(stderr, "quorumlock chaos: --nodes %d: %v\n", *nodes, err)
			return exitUsage
		}
	}
	if kind != faultinject.Auto {
		if err := faultinject.BackendAvailable(ctx, kind); err != nil {
			fmt.Fprintf(stderr, "quorumlock chaos: --backend %s is not available here: %v\n", kind, err)
			return exitFail
		}
	}
	if !*verbose {
		// go-redis logs every failed dial; during a chaos run they are expected.
		node.DiscardClientLog()
	}
	opt := chaos.Options{Backend: kind, Short: *short, Nodes: *nodes, Duration: *duration, Progress: stderr, CheckGoroutines: true}
	var reps []chaos.Report
	start := time.Now()
	for i, sc := range scs {
		fmt.Fprintf(stderr, "chaos: [%d/%d] %s (expect %s)\n", i+1, len(scs), sc.Name, sc.Expect)
		rep, err := chaos.Run(ctx, sc, opt)
		if err != nil {
			fmt.Fprintf(stderr, "quorumlock chaos: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "chaos: [%d/%d] %s on %s: %s in %.1fs (%d acquisitions, %d faults, %d violations, %d locks lost)\n",
			i+1, len(scs), sc.Name, rep.Backend, rep.Verdict, rep.Elapsed.Seconds(), rep.Acquisitions, rep.Faults, rep.Violations, rep.Findings.LocksLost)
		reps = append(reps, rep)
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "chaos: interrupted")
			break
		}
	}
	fmt.Fprintf(stderr, "chaos: %d scenarios in %.1fs\n", len(reps), time.Since(start).Seconds())
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
		if r.Verdict != chaos.Pass {
			return exitFail
		}
	}
	if ctx.Err() != nil || len(reps) < len(scs) {
		return exitFail
	}
	return exitOK
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

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quorumlock status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addrs := fs.String("addrs", "", "the masters, comma-separated host:port (required)")
	timeout := fs.Duration("timeout", 2*time.Second, "overall deadline")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: quorumlock status --addrs HOST:PORT[,HOST:PORT...] NAME\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 1 || *addrs == "" {
		fmt.Fprintf(stderr, "quorumlock status: need --addrs and exactly one lock name, got --addrs %q and %d names\n", *addrs, fs.NArg())
		return exitUsage
	}
	var nodes []node.Node
	defer func() {
		for _, n := range nodes {
			_ = n.(*node.Redis).Close()
		}
	}()
	for _, a := range strings.Split(*addrs, ",") {
		n, err := node.Dial(strings.TrimSpace(a))
		if err != nil {
			fmt.Fprintf(stderr, "quorumlock status: --addrs: %v\n", err)
			return exitUsage
		}
		nodes = append(nodes, n)
	}
	c, err := redlock.New(nodes)
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock status: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	hs, err := c.Inspect(ctx, fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock status: %v\n", err)
		return exitFail
	}
	holders := map[string]int{}
	failed := 0
	for _, h := range hs {
		switch {
		case h.Err != nil:
			failed++
			fmt.Fprintf(stdout, "%-22s error: %v\n", h.Node, h.Err)
		case !h.Holder.Exists:
			fmt.Fprintf(stdout, "%-22s free\n", h.Node)
		default:
			holders[h.Owner.Token]++
			fmt.Fprintf(stdout, "%-22s held by %s (host %q, pid %d, label %q), TTL %v\n",
				h.Node, h.Owner.Token, h.Owner.Host, h.Owner.PID, h.Owner.Label, h.Holder.TTL.Round(time.Millisecond))
		}
	}
	held := ""
	for tok, k := range holders {
		if k >= c.Quorum() {
			held = tok
		}
	}
	switch {
	case held != "":
		fmt.Fprintf(stdout, "lock %q: held by %s on a quorum (%d of %d)\n", fs.Arg(0), held, holders[held], len(hs))
	case failed > len(hs)-c.Quorum():
		fmt.Fprintf(stdout, "lock %q: unknown (%d of %d masters did not answer)\n", fs.Arg(0), failed, len(hs))
		return exitFail
	default:
		fmt.Fprintf(stdout, "lock %q: not held by any quorum\n", fs.Arg(0))
	}
	return exitOK
}
