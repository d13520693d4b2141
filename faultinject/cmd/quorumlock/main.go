// Command quorumlock runs quorumlock's chaos suite and inspects locks.
//
// Usage:
//
//	quorumlock chaos [--quick] [--scenario NAME[,NAME...]] [--backend auto|docker|process|memory]
//	                 [--nodes N[,N...]] [--duration D] [--short] [--json FILE] [--list]
//	quorumlock status --addrs HOST:PORT[,HOST:PORT...] NAME
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
// verdict is FAIL, 2 on a usage error.
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
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/faultinject/chaos"
	"github.com/quorumlock/quorumlock/faultinject/internal/lockkey"
	"github.com/quorumlock/quorumlock/internal/redisproc"
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
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "quorumlock: unknown command %q (commands: chaos, status)\n%s", args[0], usage)
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
	var reps []chaos.Report
	start := time.Now()
	for i, j := range jobs {
		sc := j.sc
		opt.Nodes = j.nodes
		fmt.Fprintf(stderr, "chaos: [%d/%d] %s (expect %s)\n", i+1, len(jobs), sc.Name, sc.Expect)
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
	var list []string
	seen := map[string]bool{}
	for _, a := range strings.Split(*addrs, ",") {
		a = strings.TrimSpace(a)
		if err := checkAddr(a); err != nil {
			fmt.Fprintf(stderr, "quorumlock status: --addrs: %v\n", err)
			return exitUsage
		}
		if seen[a] {
			fmt.Fprintf(stderr, "quorumlock status: --addrs: %s given twice\n", a)
			return exitUsage
		}
		seen[a] = true
		list = append(list, a)
	}
	// Each master's failure is printed below; go-redis's own log of failed
	// dials would only repeat it.
	lockkey.DiscardClientLog()
	quorum := len(list)/2 + 1
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	hs := inspectAll(ctx, list, fs.Arg(0))
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
			o := lockkey.ParseOwner(h.Holder.Value)
			holders[o.Token]++
			fmt.Fprintf(stdout, "%-22s held by %s (host %q, pid %d, label %q), TTL %v\n",
				h.Node, o.Token, o.Host, o.PID, o.Label, h.Holder.TTL.Round(time.Millisecond))
		}
	}
	held := ""
	for tok, k := range holders {
		if k >= quorum {
			held = tok
		}
	}
	switch {
	case held != "":
		fmt.Fprintf(stdout, "lock %q: held by %s on a quorum (%d of %d)\n", fs.Arg(0), held, holders[held], len(hs))
	case failed > len(hs)-quorum:
		fmt.Fprintf(stdout, "lock %q: unknown (%d of %d masters did not answer)\n", fs.Arg(0), failed, len(hs))
		return exitFail
	default:
		fmt.Fprintf(stdout, "lock %q: not held by any quorum\n", fs.Arg(0))
	}
	return exitOK
}

// checkAddr accepts host:port with a non-empty host and a port in 1..65535.
func checkAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("address %q is not host:port", a)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("address %q has a bad port (want 1..65535)", a)
	}
	return nil
}

// nodeHolder is one master's view of a lock.
type nodeHolder struct {
	Node   string
	Holder lockkey.Holder
	Err    error
}

// inspectAll reads the lock key name on every master at once, each with a
// raw go-redis client bounded by ctx, and waits for all of them.
func inspectAll(ctx context.Context, addrs []string, name string) []nodeHolder {
	out := make([]nodeHolder, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			c := redis.NewClient(lockkey.ClientOptions(a))
			defer c.Close()
			h, err := lockkey.Inspect(ctx, c, name)
			out[i] = nodeHolder{Node: a, Holder: h, Err: err}
		})
	}
	wg.Wait()
	return out
}
