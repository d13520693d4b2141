// Command quorumlock-bench measures quorumlock side by side with the Redis
// locks Go users pick instead (redsync, bsm/redislock, rueidislock) and
// with the least a lock can cost on one node (the floor), on the same
// masters, the contenders interleaved round by round.
//
// Usage:
//
//	quorumlock-bench [--nodes URL,...] [--quick] [--json FILE] [--svg FILE]
//
// Without --nodes it starts its own masters: redis-server processes (from
// PATH) on loopback, as many as the largest N, stopped at the end. It
// measures N = 1, 3, 5 and 7 under every condition: healthy; 1ms added on
// every master; a delay uniform in 0-2ms on every master; the first master
// 20ms slow, hung, or dead (with the first lock after its death); and 8
// clients on one lock (N = 3, 5, 7). --quick measures healthy at every N,
// the two delays at N = 1 and 5, the faults and the contention at N = 5,
// with fewer cycles: about two minutes on two cores.
//
// With --nodes it measures the masters given (host:port or
// redis://[user:password@]host:port[/db], rediss://... with ca_file,
// cert_file, key_file and server_name, as redisnode.Dial reads them; a
// comma in a password must be percent-encoded, %2C): single node versus
// quorums of 3, 5 and 7 of them (the first N), plain versus fencing versus
// renewal, beside the peers, on the network as it is (no condition is
// added), and 8 clients on one lock with the largest N. The run's keys
// ("qlbench:<run id>:...") are deleted from them at the end. Passwords
// are never printed: masters show as host:port.
//
// It prints on stdout the machine, the load average before and after, and
// one markdown table per condition: p50/p90/p99/max lock+unlock latency,
// cycles/s, allocations and bytes per cycle, client CPU per cycle
// (getrusage), goroutines after the loop and after Close, orphan keys;
// under contention acquisitions/s, the share of same-client re-locks, the
// handoff to another client p50/p99 and the longest wait of any waiter.
// Then the performance targets with the ratio measured, and the
// contenders' settings. --json writes the rows (contender, n, condition,
// one field per figure), --svg a chart (p50 by N per contender;
// contention fairness). Progress goes to stderr: a bar when it is a
// terminal, else a line every tenth of the rounds.
//
// Every delay and fault is made in the client (a net.Conn wrapper), not in
// the kernel: see the bench package's Condition.
//
//	cd bench && go run ./cmd/quorumlock-bench --quick
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench"
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
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil)
	stop()
	os.Exit(code)
}

// run is main without the process. tweak, when not nil, changes the plan
// before the run (the tests shrink it).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, tweak func(*bench.Config)) int {
	fs := flag.NewFlagSet("quorumlock-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", "", "comma-separated masters to measure (host:port or redis:// / rediss:// URLs); default: start redis-server processes")
	quick := fs.Bool("quick", false, "fewer sizes and cycles: every figure in about two minutes")
	jsonFile := fs.String("json", "", "also write the rows as JSON to this file")
	svgFile := fs.String("svg", "", "also write the chart as SVG to this file")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: quorumlock-bench [--nodes URL,...] [--quick] [--json FILE] [--svg FILE]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "quorumlock-bench: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	var masters []bench.Master
	if *nodes != "" {
		var err error
		if masters, err = bench.ParseMasters(strings.Split(*nodes, ",")); err != nil {
			fmt.Fprintf(stderr, "quorumlock-bench: --nodes: %v\n", err)
			return exitUsage
		}
	} else if _, err := redisproc.LookPath(); err != nil {
		fmt.Fprintf(stderr, "quorumlock-bench: %v; or measure masters you started with --nodes\n", err)
		return exitFail
	}
	cfg := plan(*quick, len(masters))
	cfg.Masters = masters
	if tweak != nil {
		tweak(&cfg)
	}
	// go-redis logs every failed dial; a dead master's are the point.
	redis.SetLogger(quiet{})

	bar := newBar(stderr)
	cfg.Progress = bar.update
	if !bar.tty {
		cfg.Log = stderr // progress as lines instead
	}
	before := loadAvg()
	start := time.Now()
	fmt.Fprintf(stderr, "quorumlock-bench: %s\n", where(cfg, masters))
	rows, err := bench.Run(ctx, cfg)
	bar.done()
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock-bench: %v\n", err)
		return exitFail
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	fmt.Fprintf(stderr, "quorumlock-bench: %d rows in %v\n", len(rows), took)

	w := bufio.NewWriter(stdout)
	fmt.Fprintf(w, "# quorumlock bench\n\n")
	fmt.Fprintf(w, "- command: `quorumlock-bench %s` (%v)\n", shownArgs(fs, masters), took)
	fmt.Fprintf(w, "- machine: %s, %d CPUs (GOMAXPROCS=%d), %s %s/%s\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(w, "- load average (1, 5, 15 min): %s before, %s after\n", before, loadAvg())
	fmt.Fprintf(w, "- masters: %s\n", where(cfg, masters))
	fmt.Fprintf(w, "- versions:%s\n", versions())
	fmt.Fprintf(w, "- every contender: lock TTL %v, go-redis clients with the lock settings of redisnode.Dial; contenders interleaved round by round (%d cycles per row, slices of %d, %v at most per row)\n",
		cfg.TTL, cfg.Cycles, cfg.Slice, cfg.Budget)
	fmt.Fprintf(w, "\nConditions (made in the client: a net.Conn wrapper, not the kernel):\n\n")
	for _, c := range cfg.Conditions {
		fmt.Fprintf(w, "- `%s` (N = %s): %s\n", c.Condition.Name, ints(c.Ns), c.Condition.Describe())
	}
	if ct := cfg.Contention; ct.Clients > 0 {
		fmt.Fprintf(w, "- `%s` (N = %s): %d clients (each with its own connections) cycle on one lock with no hold, healthy network, %v per contender in %d interleaved slices\n",
			ct.Name(), ints(ct.Ns), ct.Clients, ct.Duration, ct.Rounds)
	}
	fmt.Fprintf(w, "\n## Results\n\n")
	if err := bench.WriteMarkdown(w, rows); err != nil {
		fmt.Fprintf(stderr, "quorumlock-bench: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(w, "\n## Targets (quorumlock vs redsync default)\n\n")
	if err := bench.WriteTargets(w, rows); err != nil {
		fmt.Fprintf(stderr, "quorumlock-bench: %v\n", err)
		return exitFail
	}
	fmt.Fprintf(w, "\n## Contenders\n\n")
	for _, c := range cfg.Contenders {
		fmt.Fprintf(w, "- %s: %s\n", c.Name, c.Settings)
	}
	if errs := rowErrors(rows); errs != "" {
		fmt.Fprintf(w, "\nFirst error of each row with errors:\n\n%s", errs)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "quorumlock-bench: %v\n", err)
		return exitFail
	}
	for _, out := range []struct {
		file  string
		write func(io.Writer, []bench.Row) error
	}{{*jsonFile, bench.WriteJSON}, {*svgFile, bench.WriteSVG}} {
		if out.file == "" {
			continue
		}
		if err := writeFile(out.file, rows, out.write); err != nil {
			fmt.Fprintf(stderr, "quorumlock-bench: %v\n", err)
			return exitFail
		}
	}
	return exitOK
}

// plan returns what a run measures: on the masters the run starts
// (given == 0) or on given masters.
func plan(quick bool, given int) bench.Config {
	cfg := bench.Config{
		Contenders: bench.Contenders(),
		Cycles:     2000,
		Slice:      50,
		Warmup:     20,
		Budget:     20 * time.Second,
		TTL:        8 * time.Second,
		Contention: bench.Contention{Clients: 8, Duration: 10 * time.Second, Rounds: 5},
	}
	if quick {
		cfg.Cycles, cfg.Warmup, cfg.Budget = 300, 10, 3*time.Second
		cfg.Contention.Duration, cfg.Contention.Rounds = 3*time.Second, 3
	}
	if given > 0 {
		var ns []int
		for _, n := range []int{1, 3, 5, 7} {
			if n <= given {
				ns = append(ns, n)
			}
		}
		if given > 7 && given%2 == 1 {
			ns = append(ns, given)
		}
		cfg.Ns = ns
		cfg.Conditions = []bench.Case{{Condition: bench.Healthy}}
		cfg.Contention.Ns = []int{ns[len(ns)-1]}
		return cfg
	}
	all, faults := []int{1, 3, 5, 7}, []int{3, 5, 7}
	delays := all
	cfg.Contention.Ns = []int{3, 5, 7}
	if quick {
		delays, faults = []int{1, 5}, []int{5}
		cfg.Contention.Ns = []int{5}
	}
	cfg.Ns = all
	cfg.Conditions = []bench.Case{
		{Condition: bench.Healthy, Ns: all},
		{Condition: bench.Delayed(time.Millisecond), Ns: delays},
		{Condition: bench.Jittered(time.Millisecond, time.Millisecond), Ns: delays},
		{Condition: bench.OneSlow(20 * time.Millisecond), Ns: faults},
		{Condition: bench.OneHung, Ns: faults},
		{Condition: bench.OneDead, Ns: faults},
	}
	return cfg
}

// where says which masters the run uses, without passwords.
func where(cfg bench.Config, masters []bench.Master) string {
	if masters == nil {
		n := 0
		for _, c := range cfg.Conditions {
			for _, k := range c.Ns {
				n = max(n, k)
			}
		}
		for _, k := range cfg.Contention.Ns {
			n = max(n, k)
		}
		return fmt.Sprintf("%d redis-server processes started by the bench on loopback (%s)", n, redisVersion())
	}
	addrs := make([]string, len(masters))
	for i, m := range masters {
		addrs[i] = m.String()
	}
	return fmt.Sprintf("given with --nodes (%d): %s", len(masters), strings.Join(addrs, ", "))
}

// shownArgs returns the command's flags as parsed, the masters of --nodes
// as host:port (a URL may hold a password).
func shownArgs(fs *flag.FlagSet, masters []bench.Master) string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "nodes":
			addrs := make([]string, len(masters))
			for i, m := range masters {
				addrs[i] = m.String()
			}
			out = append(out, "--nodes "+strings.Join(addrs, ","))
		case f.Value.String() == "true":
			out = append(out, "--"+f.Name)
		default:
			out = append(out, "--"+f.Name+" "+f.Value.String())
		}
	})
	return strings.Join(out, " ")
}

func ints(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// rowErrors lists the first error of every row that had one.
func rowErrors(rows []bench.Row) string {
	var b strings.Builder
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(&b, "- %s N=%d %s (%d errors): %s\n", r.Contender, r.N, r.Condition, r.Errors, r.Err)
		}
	}
	return b.String()
}

func writeFile(name string, rows []bench.Row, write func(io.Writer, []bench.Row) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f, rows); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	return f.Close()
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// cpuModel returns the CPU's model name, or "unknown CPU".
func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// redisVersion returns redis-server's version line, shortened.
func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server version unknown"
	}
	f := strings.Fields(string(out))
	for _, s := range f {
		if v, ok := strings.CutPrefix(s, "v="); ok {
			return "redis-server " + v
		}
	}
	return strings.TrimSpace(string(out))
}

// versions lists the contenders' module versions compiled in.
func versions() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return " unknown"
	}
	var out string
	for _, m := range bi.Deps {
		switch m.Path {
		case "github.com/redis/go-redis/v9", "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/redis/rueidis":
			out += " " + m.Path + " " + m.Version + ","
		}
	}
	return strings.TrimSuffix(out, ",")
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// bar draws a progress bar on a terminal, and nothing elsewhere.
type bar struct {
	w     io.Writer
	tty   bool
	start time.Time
	last  time.Time
	drawn bool
}

func newBar(w io.Writer) *bar {
	b := &bar{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	return b
}

func (b *bar) update(done, total int) {
	if !b.tty || total == 0 || (time.Since(b.last) < 100*time.Millisecond && done < total) {
		return
	}
	b.last = time.Now()
	const width = 40
	full := done * width / total
	fmt.Fprintf(b.w, "\r[%s%s] %3d%% of %d slices, %v   ", strings.Repeat("#", full), strings.Repeat(".", width-full),
		done*100/total, total, time.Since(b.start).Round(time.Second))
	b.drawn = true
}

func (b *bar) done() {
	if b.drawn {
		fmt.Fprintln(b.w)
	}
}
