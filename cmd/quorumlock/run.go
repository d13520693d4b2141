package main

// quorumlock run: a distributed flock(1). See runUsage for the contract and
// docs/operations.md for how to use it.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/reconfig"
	"github.com/quorumlock/quorumlock/redlock"
)

// Exit statuses of quorumlock run, besides the command's own (its exit
// status, or 128+N when a signal N ended it).
const (
	// runNotObtained: the lock is held elsewhere (or was, until --wait
	// ran out). --conflict-exit-code changes it (flock -E). EX_TEMPFAIL.
	runNotObtained = 75
	// runLost: the lock could not be kept while the command ran; the
	// command was sent SIGTERM, and SIGKILL after --grace (or at once),
	// before the lease's validity ended (as timeout(1)'s 124).
	runLost = 124
	// runUsage: bad flags, a bad address, options that do not fit.
	// EX_USAGE, as every command's usage error (exitUsage).
	runUsage = exitUsage
	// runUnavailable: too few masters answered to decide (unreachable,
	// denied: a wrong password or a missing ACL grant). EX_UNAVAILABLE.
	runUnavailable = 69
	// runCannotExec and runNotFound: the command could not be started
	// (as a shell's 126 and 127).
	runCannotExec = 126
	runNotFound   = 127
)

// forwarded are the signals run passes on to the command's process group.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

const runUsageText = `usage: quorumlock run [flags] NAME [--] COMMAND [ARGS...]

Runs COMMAND while holding the lock NAME on a quorum of the masters: a
flock(1) across hosts. The lock is renewed in the background; when renewal
cannot keep it, COMMAND's process group gets SIGTERM, then SIGKILL --grace
later, both before the lease's validity ends (SIGKILL at once when the
masters say the lock is gone, or when run itself was stopped past the
deadline). SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to COMMAND; while
run is still waiting they end the wait, and COMMAND is not started.

COMMAND runs in its own process group with QUORUMLOCK_NAME, QUORUMLOCK_UNTIL
(the validity deadline when it started, RFC 3339, UTC; renewals move it) and,
with --fencing, QUORUMLOCK_FENCE (the fencing token) in its environment.

Masters: --nodes, --nodes-file, $QUORUMLOCK_NODES or $QUORUMLOCK_NODES_FILE
(host:port, redis://user:password@host:port/db, rediss://...). With
--config-file F (the file quorumlock reconfig publishes) run locks on F's
masters, with F's quorum, sending F's record, which the masters check: a
master at a later configuration refuses it, and run waits for F to publish
that configuration (up to 30s, and within --wait), then tries again on it. --nodes then names
at least F's masters (by host:port, with their credentials).

Logging: one line per record on stderr, "quorumlock run: " and a message
with key=value attributes. --log-level error shows run's errors (a lock not
obtained for a reason other than held elsewhere, a lost lock, a command that
cannot start); warn (the default) adds the library's warnings: failed
renewals with every master's answer, a lease lost, releases given up;
info (--verbose) adds when the lock is waited for, taken, held elsewhere
and released, quarantines and new fencing epochs; debug adds every attempt
and master call, and go-redis's own lines (failed dials).

Metrics: --metrics-addr host:port serves Prometheus text on
http://host:port/metrics while run waits for the lock, holds it and
releases it: the lock's instruments (quorumlock_lock_wait_seconds,
quorumlock_lease_held_seconds, ...: docs/observability.md), run's
quorumlock_run_lock_held and quorumlock_run_validity_seconds, and the Go
runtime's go_* metrics. Port 0 picks a free port; --log-level info says
which. The server stops when run exits.

Exit status: COMMAND's own when it ran to its end (128+N after signal N);
75 held elsewhere (--conflict-exit-code; silent unless --log-level info);
124 lock lost, COMMAND terminated;
64 usage (a bad flag, a bad address, a --metrics-addr that cannot be
listened on); 69 masters unavailable or denied access; 126 COMMAND cannot be
executed; 127 COMMAND not found.

Flags:
`

// waitFlag is --wait: 0 (one attempt), a duration, or -1 (forever).
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w.forever {
		return "-1"
	}
	return w.d.String()
}

func (w *waitFlag) Set(s string) error {
	switch s {
	case "-1":
		*w = waitFlag{forever: true}
		return nil
	case "0":
		*w = waitFlag{}
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return errors.New("want 0 (one attempt), a duration such as 30s, or -1 (wait forever)")
	}
	*w = waitFlag{d: d}
	return nil
}

// runConfig is run's parsed command line.
type runConfig struct {
	name     string
	argv     []string
	ttl      time.Duration
	wait     waitFlag
	grace    time.Duration
	fencing  bool
	quar     time.Duration
	minHold  time.Duration
	cooldown time.Duration
	shared   bool
	excl     bool
	sem      int
	label    string
	conflict int
	verbose  bool
	level    levelFlag
	metrics  string
	nodes    nodeList
	config   string // --config-file
}

// logLevel is the level of run's logger: --log-level, at least info with
// --verbose; warn by default.
func (rc *runConfig) logLevel() slog.Level {
	l := slog.LevelWarn
	if rc.level.set {
		l = rc.level.level
	}
	if rc.verbose {
		l = min(l, slog.LevelInfo)
	}
	return l
}

// killMargin is how long before the validity deadline run sends SIGKILL:
// a tenth of the TTL, the time a process starved of CPU may take to act on
// its timer (redlock's default cancel margin, for the same reason).
func killMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// drift is redlock's default drift allowance for ttl.
func drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*0.01) + 2*time.Millisecond
}

// maxGrace is the longest --grace for ttl: SIGTERM comes grace before the
// SIGKILL, which comes killMargin before the validity deadline, and both
// must lie in the second half of the TTL, so that a renewal every third of
// the TTL moves the deadline before either is due.
func maxGrace(ttl time.Duration) time.Duration { return ttl/2 - killMargin(ttl) - drift(ttl) }

func parseRun(args []string, e *env) (*runConfig, int, error) {
	fs := flag.NewFlagSet("quorumlock run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rc := &runConfig{}
	nf := addNodeFlags(fs)
	fs.DurationVar(&rc.ttl, "ttl", 10*time.Second, "the lock's time to live on each master; renewed every third of it")
	fs.Var(&rc.wait, "wait", "how long to wait for the lock: 0 (one attempt), a duration, or -1 (forever)")
	grace := fs.String("grace", "", "time between SIGTERM and SIGKILL when the lock cannot be kept (default: a fifth of --ttl; at most 0.39*ttl-2ms)")
	fs.BoolVar(&rc.fencing, "fencing", false, "give the command a fencing token in $QUORUMLOCK_FENCE (a mutex only)")
	fs.DurationVar(&rc.quar, "quarantine", 0, "restart quarantine: a master that restarted (or failed over) less than this ago does not vote; at least --ttl plus --cooldown (default: off)")
	fs.DurationVar(&rc.minHold, "min-hold", 0, "hold the lock at least this long after acquiring it, even when the command ends sooner")
	fs.DurationVar(&rc.cooldown, "cooldown", 0, "after the command exits 0, keep the lock this long (at least) and exit: at most one run per window")
	fs.BoolVar(&rc.shared, "shared", false, "take a read (shared) lease of the read-write lock NAME")
	fs.BoolVar(&rc.excl, "exclusive", false, "take the write lease of the read-write lock NAME (excludes --shared holders)")
	fs.IntVar(&rc.sem, "semaphore", 0, "take one of K places of the semaphore NAME")
	fs.StringVar(&rc.label, "label", "quorumlock run", "owner label stored with the lock, shown by quorumlock status (with --cooldown, run adds \"; cooldown=D ttl=T\", from which status tells a lock kept by its cooldown)")
	fs.IntVar(&rc.conflict, "conflict-exit-code", runNotObtained, "exit status when the lock is held elsewhere, which run does not report below --log-level info (0..255)")
	rc.level.level = slog.LevelWarn
	fs.Var(&rc.level, "log-level", "`LEVEL` of what run writes on stderr: error, warn (also the library's warnings: failed renewals, a lease lost), info (also the lock taken, held elsewhere, released; quarantines) or debug (also every master call, and go-redis's own log)")
	fs.BoolVar(&rc.verbose, "verbose", false, "--log-level info (or debug, when given)")
	fs.StringVar(&rc.config, "config-file", "", "the masters' configuration that quorumlock reconfig publishes: lock on its masters with its quorum, sending its record (default: none: every master of --nodes, unchecked)")
	fs.StringVar(&rc.metrics, "metrics-addr", "", "serve Prometheus metrics on http://`ADDR`/metrics while run waits and holds the lock (host:port; port 0: a free one, said at --log-level info) (default: none)")
	if help, err := parseFlags(fs, args, runUsageText, e.stdout); help {
		return nil, exitOK, flag.ErrHelp
	} else if err != nil {
		return nil, runUsage, err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, runUsage, errors.New("no lock name and command given")
	}
	rc.name, rest = rest[0], rest[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	} else if len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		return nil, runUsage, fmt.Errorf("flag %q after the lock name: flags go before NAME", bounded(rest[0]))
	}
	if len(rest) == 0 {
		return nil, runUsage, fmt.Errorf("no command given for lock %q", bounded(rc.name))
	}
	rc.argv = rest
	if rc.name == "" {
		return nil, runUsage, errors.New("the lock name is empty")
	}
	if rc.ttl <= 0 {
		return nil, runUsage, fmt.Errorf("--ttl %v must be positive", rc.ttl)
	}
	if *grace == "" {
		rc.grace = rc.ttl / 5
	} else {
		d, err := time.ParseDuration(*grace)
		if err != nil || d < 0 {
			return nil, runUsage, fmt.Errorf("--grace %q: want a non-negative duration", bounded(*grace))
		}
		rc.grace = d
	}
	if m := maxGrace(rc.ttl); rc.grace > m && m <= 0 {
		return nil, runUsage, fmt.Errorf("--ttl %v is too short to supervise a command (SIGKILL a tenth of the TTL before the validity ends, SIGTERM --grace before it, both in the TTL's second half): use a longer --ttl", rc.ttl)
	} else if rc.grace > m {
		return nil, runUsage, fmt.Errorf("--grace %v does not fit --ttl %v: SIGKILL comes a tenth of the TTL before the validity ends and SIGTERM --grace before it, both in the TTL's second half so that renewals can keep the lock; use --grace %v or less, or a longer --ttl", rc.grace, rc.ttl, m.Truncate(100*time.Microsecond))
	}
	semSet := false // --semaphore given, whatever its value: 0 is refused, not a plain mutex
	fs.Visit(func(f *flag.Flag) { semSet = semSet || f.Name == "semaphore" })
	kinds := 0
	for _, on := range []bool{rc.shared, rc.excl, semSet} {
		if on {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		return nil, runUsage, errors.New("--shared, --exclusive and --semaphore exclude each other")
	case semSet && rc.sem < 1:
		return nil, runUsage, fmt.Errorf("--semaphore %d: want at least 1 place", rc.sem)
	case rc.fencing && kinds > 0:
		return nil, runUsage, errors.New("--fencing works with a plain lock only, not with --shared, --exclusive or --semaphore")
	case rc.minHold < 0:
		return nil, runUsage, fmt.Errorf("--min-hold %v must not be negative", rc.minHold)
	case rc.cooldown < 0:
		return nil, runUsage, fmt.Errorf("--cooldown %v must not be negative", rc.cooldown)
	case rc.quar < 0:
		return nil, runUsage, fmt.Errorf("--quarantine %v must not be negative", rc.quar)
	case rc.quar > 0 && rc.quar < rc.ttl+rc.cooldown:
		return nil, runUsage, fmt.Errorf("--quarantine %v is shorter than --ttl plus --cooldown (%v): a master that restarted empty could vote again before the keys it lost would have expired", rc.quar, rc.ttl+rc.cooldown)
	case rc.conflict < 0 || rc.conflict > 255:
		return nil, runUsage, fmt.Errorf("--conflict-exit-code %d: want 0..255", rc.conflict)
	}
	nl, err := nf.resolve(e.getenv)
	if err != nil {
		return nil, runUsage, err
	}
	rc.nodes = nl
	return rc, exitOK, nil
}

// bounded cuts s to at most 64 bytes for an error message.
func bounded(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}

// supervisor is run's shared state between the signal handler and the
// command: the first shutdown signal, and the command's process group once
// it started.
type supervisor struct {
	mu     sync.Mutex
	sig    os.Signal // the first shutdown signal, nil before
	pgid   int       // the command's process group, 0 before it started
	stopCh chan struct{}
	cancel context.CancelFunc // ends the wait for the lock
}

// signal records a shutdown signal and forwards it to the command.
func (s *supervisor) signal(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sig == nil {
		s.sig = sig
		close(s.stopCh)
		s.cancel()
	}
	if s.pgid > 0 {
		_ = syscall.Kill(-s.pgid, sig.(syscall.Signal))
	}
}

// shutdown returns the first shutdown signal, or nil.
func (s *supervisor) shutdown() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sig
}

// kill sends sig to the command's process group.
func (s *supervisor) kill(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pgid > 0 {
		_ = syscall.Kill(-s.pgid, sig)
	}
}

// signalStatus is the exit status for a shutdown by sig: 128+N.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + int(syscall.SIGTERM)
}

// runCmd is quorumlock run, in its phases: parse the command line, find
// the command, connect (the metrics endpoint, the masters, the lock's
// client), take the lock, start the command, supervise it while the lease
// lasts, and once it exited on its own keep the lock for --min-hold or
// --cooldown or release it. Each phase that ends run returns its exit
// status; the connections are closed when run returns.
func runCmd(ctx context.Context, args []string, e *env) int {
	rc, code, err := parseRun(args, e)
	if err != nil {
		if code != exitOK {
			fmt.Fprintf(e.stderr, "quorumlock run: %v (quorumlock run -h for help)\n", err)
		}
		return code
	}
	r := newRunner(rc, e)
	path, err := exec.LookPath(rc.argv[0])
	if err != nil {
		r.say("%v", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return runNotFound
		}
		return runCannotExec
	}
	client, disconnect, code := r.connect()
	if client == nil {
		return code
	}
	defer disconnect()
	acquire, err := rc.acquirer(client)
	if err != nil {
		r.say("%v", err)
		return runUsage
	}
	if r.clients != nil {
		acquire = r.reloading(acquire)
	}
	sup, waitCtx, stopSignals := r.watchSignals(ctx)
	defer stopSignals()
	lease, code := r.acquire(waitCtx, sup, acquire)
	if lease == nil {
		return code
	}
	acquired := time.Now()
	r.met.hold(lease)
	exited, code := r.start(path, lease, sup)
	if exited == nil {
		return code
	}
	status, terminated := r.supervise(lease, sup, exited)
	if terminated {
		sup.kill(syscall.SIGKILL) // what is left of the group
		r.release(lease)
		r.say("lock %q lost while the command ran: it was terminated (its status was %d)", rc.name, status)
		return runLost
	}
	r.verbose("the command exited with status %d", status)
	r.afterCommand(lease, sup, acquired, status)
	return status
}

// runner is one quorumlock run past its command line: the configuration,
// the process's streams, the logger, and the metrics endpoint (nil without
// --metrics-addr).
type runner struct {
	rc  *runConfig
	e   *env
	log *slog.Logger
	met *runMetrics
	// clients: the clients of --config-file's configurations (nil
	// without it).
	clients *reconfig.Clients
}

// newRunner builds run's logger: one for run's own lines, the library's
// records and go-redis's.
func newRunner(rc *runConfig, e *env) *runner {
	if _, ok := e.stderr.(*os.File); !ok {
		// A writer that is not a file (a test's buffer) is shared by run's
		// log lines and the child's stderr, which os/exec copies from a
		// goroutine of its own: one lock serialises the two.
		se := *e
		se.stderr = &syncWriter{w: e.stderr}
		e = &se
	}
	return &runner{rc: rc, e: e, log: slog.New(newLineHandler(e.stderr, "quorumlock run: ", rc.logLevel()))}
}

func (r *runner) logf(level slog.Level, format string, args ...any) {
	r.log.Log(context.Background(), level, fmt.Sprintf(format, args...))
}

// say logs at error level: what run reports by default.
func (r *runner) say(format string, args ...any) { r.logf(slog.LevelError, format, args...) }

// verbose logs at info level (--verbose).
func (r *runner) verbose(format string, args ...any) { r.logf(slog.LevelInfo, format, args...) }

// connect listens for metrics (before the masters are dialled: a port in
// use fails the run before it takes the lock), dials the masters and
// builds the lock's client, with the library's own account going to run's
// logger: failed renewals with every master's answer (warn), the lease's
// end, quarantines, new fencing epochs (info). go-redis's own log (a line
// per failed dial) goes there too, at debug. disconnect undoes it all in
// reverse order: the client's Close, the masters, go-redis's log back to
// discarded, and the metrics endpoint last, so that a scrape meanwhile sees
// the release. On failure client is nil, what was set up is undone, and
// code is run's exit status.
func (r *runner) connect() (client *redlock.Client, disconnect func(), code int) {
	rc := r.rc
	var undo []func()
	disconnect = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	fail := func(code int) (*redlock.Client, func(), int) {
		disconnect()
		return nil, nil, code
	}
	label := rc.label
	if rc.cooldown > 0 {
		// status reads the mark to tell a lock kept by the cooldown.
		label = cooldownLabel(label, rc.cooldown, rc.ttl)
	}
	copts := []redlock.ClientOption{redlock.WithOwnerLabel(label), redlock.WithLogger(r.log)}
	if rc.metrics != "" {
		met, err := listenMetrics(rc.metrics, rc.name)
		if err != nil {
			r.say("%v (quorumlock run -h for help)", err)
			return fail(runUsage)
		}
		r.met = met
		undo = append(undo, met.close)
		copts = append(copts, redlock.WithObserver(met.obs))
		r.verbose("serving metrics on %s", met.url())
	}
	redis.SetLogger(goRedisLog{r.log})
	undo = append(undo, lockkey.DiscardClientLog)
	nodes, err := rc.nodes.dial()
	if err != nil {
		r.say("%v (quorumlock run -h for help)", err)
		return fail(runUsage)
	}
	undo = append(undo, func() { _ = nodes.Close() })
	if rc.quar > 0 {
		copts = append(copts, redlock.WithRestartQuarantine(rc.quar))
	}
	if rc.config != "" {
		given := map[string]string{} // host:port -> the address as given (credentials, TLS)
		for i, n := range nodes {
			given[n.Addr()] = rc.nodes.addrs[i]
		}
		dial := func(addr string) (*redisnode.Node, error) {
			a, ok := given[addr]
			if !ok {
				return nil, fmt.Errorf("master %s of %s is not among %s", addr, rc.config, rc.nodes.source)
			}
			return redisnode.Dial(a)
		}
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		clients, err := reconfig.NewClients(cctx, reconfig.FileSource(rc.config), dial, copts...)
		cancel()
		if err != nil {
			r.say("%v (quorumlock run -h for help)", err)
			return fail(runUsage)
		}
		r.clients = clients
		undo = append(undo, func() {
			if err := clients.Close(context.Background()); err != nil {
				r.verbose("%v", err)
			}
		})
		client, cfg := clients.Client()
		r.verbose("masters of %s: epoch %d, %s", rc.config, cfg.Epoch, cfg.Summary())
		return client, disconnect, exitOK
	}
	client, err = redlock.New(nodes.Redlock(), copts...)
	if err != nil {
		r.say("%v", err)
		return fail(runUsage)
	}
	undo = append(undo, func() {
		// Without a deadline Close waits at most about 500ms for releases
		// still queued (a master that timed out); their keys expire with
		// their TTL.
		if err := client.Close(context.Background()); err != nil {
			r.verbose("%v", err)
		}
	})
	return client, disconnect, exitOK
}

// watchSignals hands the signals run receives, and ctx's end (as SIGTERM),
// to a supervisor, which forwards them to the command once it runs; the
// first one also ends waitCtx, the wait for the lock. stop ends the
// watching and waitCtx.
func (r *runner) watchSignals(ctx context.Context) (sup *supervisor, waitCtx context.Context, stop func()) {
	waitCtx, cancelWait := context.WithCancel(ctx)
	sup = &supervisor{stopCh: make(chan struct{}), cancel: cancelWait}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-r.e.signals:
				sup.signal(sig)
			case <-ctx.Done():
				sup.signal(syscall.SIGTERM)
				return
			case <-done:
				return
			}
		}
	}()
	return sup, waitCtx, func() {
		close(done)
		cancelWait()
	}
}

// acquire takes the lock with take, waiting as --wait says until ctx ends
// (a signal). Without a lease it returns run's exit status: 128+N after
// signal N, --conflict-exit-code when the lock is held elsewhere (silent
// below --log-level info), 69 when the masters could not decide.
func (r *runner) acquire(ctx context.Context, sup *supervisor, take func(context.Context) (*redlock.Lease, error)) (*redlock.Lease, int) {
	rc := r.rc
	switch {
	case rc.wait.forever:
		r.verbose("waiting for lock %q (--wait -1: until it is free)", rc.name)
	case rc.wait.d > 0:
		r.verbose("waiting for lock %q (--wait %v)", rc.name, rc.wait.d)
	}
	lease, err := take(ctx)
	if err == nil {
		fence, _ := lease.Fence()
		r.verbose("acquired lock %q (token %s%s), valid until %s", rc.name, lease.Token(), fenceNote(rc.fencing, fence), wallUntil(lease))
		return lease, exitOK
	}
	if sig := sup.shutdown(); sig != nil {
		r.logf(slog.LevelWarn, "%v while waiting for lock %q: the command was not started", sig, rc.name)
		return nil, signalStatus(sig)
	}
	var cfg *reconfig.Config // --config-file's, whose sets decide (joint mode)
	if r.clients != nil {
		_, c := r.clients.Client()
		cfg = &c
	}
	code := rc.notObtainedStatus(err, cfg)
	if code == rc.conflict {
		// Held elsewhere is routine (cron on every host): silent, as
		// flock -n is, below --log-level info.
		r.verbose("%v", err)
	} else {
		r.say("%v", err)
	}
	return nil, code
}

// reloadWait bounds how long run waits for --config-file to publish the
// configuration a master refused its own for.
const reloadWait = 30 * time.Second

// reloading is acquire that, when a master refuses the configuration as
// stale (a step of quorumlock reconfig committed), waits for --config-file
// to publish the next one and tries again on it: all within --wait when it
// is a duration (the reload and the attempts after it take what remains;
// the reload at most reloadWait), one attempt per configuration for
// --wait 0, without end for --wait -1 (each reload at most reloadWait).
func (r *runner) reloading(acquire func(context.Context) (*redlock.Lease, error)) func(context.Context) (*redlock.Lease, error) {
	return func(ctx context.Context) (*redlock.Lease, error) {
		start := time.Now()
		finite := !r.rc.wait.forever && r.rc.wait.d > 0
		left := func() time.Duration { return r.rc.wait.d - time.Since(start) }
		lease, err := acquire(ctx)
		for errors.Is(err, redlock.ErrConfigStale) {
			bound := reloadWait
			if finite {
				if left() <= 0 {
					return nil, err
				}
				bound = min(bound, left())
			}
			r.verbose("%v: waiting for %s to publish the masters' configuration", err, r.rc.config)
			rctx, cancel := context.WithTimeout(ctx, bound)
			c, rerr := r.clients.Reload(rctx)
			cancel()
			if rerr != nil {
				return nil, fmt.Errorf("%w; %w", err, rerr)
			}
			rc := *r.rc
			if finite {
				if rc.wait.d = left(); rc.wait.d <= 0 {
					return nil, err
				}
			}
			if acquire, rerr = rc.acquirer(c); rerr != nil {
				return nil, rerr
			}
			_, cfg := r.clients.Client()
			r.verbose("masters of %s: epoch %d, %s", rc.config, cfg.Epoch, cfg.Summary())
			lease, err = acquire(ctx)
		}
		return lease, err
	}
}

// release releases the lease, within 2 seconds.
func (r *runner) release(lease *redlock.Lease) {
	uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := lease.Unlock(uctx); err != nil && !errors.Is(err, redlock.ErrReleased) {
		r.verbose("release: %v", err)
	} else {
		r.verbose("released lock %q", r.rc.name)
	}
}

// start starts the command at path, in its own process group, with
// QUORUMLOCK_NAME, QUORUMLOCK_UNTIL and (--fencing) QUORUMLOCK_FENCE in
// its environment, unless a shutdown began while the lock was taken. It
// returns the channel that receives the command's end; when the command
// did not start, the lock is released and code is run's exit status.
func (r *runner) start(path string, lease *redlock.Lease, sup *supervisor) (exited <-chan error, code int) {
	rc := r.rc
	cmd := exec.Command(path, rc.argv[1:]...)
	cmd.Args[0] = rc.argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.e.stdin, r.e.stdout, r.e.stderr
	cmd.Env = append(os.Environ(), "QUORUMLOCK_NAME="+rc.name, "QUORUMLOCK_UNTIL="+wallUntil(lease))
	if rc.fencing {
		fence, _ := lease.Fence()
		cmd.Env = append(cmd.Env, "QUORUMLOCK_FENCE="+strconv.FormatInt(fence, 10))
	}
	// Its own process group, so that run signals the whole job; and SIGKILL
	// if run itself dies (a kill -9 of run), so that the command does not
	// outlive the lock by more than its TTL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	exited, err := sup.start(cmd)
	if err == nil {
		return exited, exitOK
	}
	r.release(lease)
	if errors.Is(err, errShutdown) {
		sig := sup.shutdown()
		r.logf(slog.LevelWarn, "%v after lock %q was taken: the command was not started", sig, rc.name)
		return nil, signalStatus(sig)
	}
	r.say("%v", err)
	return nil, runCannotExec
}

// supervise waits for the command to exit while the lease lasts: SIGTERM
// at the validity deadline less killMargin less --grace (a renewal moves
// it), SIGKILL killMargin before the deadline or --grace after the
// SIGTERM, whichever is first; SIGKILL at once when the lease ends early
// (the masters say the lock is gone) or when run wakes up past the SIGKILL
// time (it was stopped). It returns the command's exit status, and whether
// run terminated it (the lock could not be kept).
func (r *runner) supervise(lease *redlock.Lease, sup *supervisor, exited <-chan error) (status int, terminated bool) {
	rc := r.rc
	var (
		termSent, killSent bool
		killBy             time.Time
		leaseDone          = lease.Done()
		timer              = time.NewTimer(time.Hour)
		waitErr            error
	)
	defer timer.Stop()
	margin := killMargin(rc.ttl)
	for {
		now := time.Now()
		until := lease.Until()
		switch {
		case killSent:
		case leaseDone == nil || !now.Before(until.Add(-margin)) || termSent && !now.Before(killBy):
			// The lease ended before its deadline, run woke up past the
			// SIGKILL time, or the grace is over.
			sup.kill(syscall.SIGKILL)
			killSent = true
			if !termSent {
				r.say("lock %q lost (%v): sent SIGKILL to the command at once", rc.name, leaseErr(lease, until))
			} else {
				r.say("lock %q: the command outlived --grace: sent SIGKILL", rc.name)
			}
		case !termSent && !now.Before(until.Add(-margin-rc.grace)):
			sup.kill(syscall.SIGTERM)
			termSent = true
			killBy = until.Add(-margin)
			if g := now.Add(rc.grace); g.Before(killBy) {
				killBy = g
			}
			r.say("lock %q cannot be kept (renewal failed; %v of validity left): sent SIGTERM to the command, SIGKILL in %v", rc.name, until.Sub(now).Round(time.Millisecond), killBy.Sub(now).Round(time.Millisecond))
		}
		var next time.Time
		switch {
		case killSent:
			next = now.Add(time.Hour)
		case termSent:
			next = killBy
		default:
			next = until.Add(-margin - rc.grace)
		}
		timer.Reset(time.Until(next))
		select {
		case waitErr = <-exited:
			return exitStatus(waitErr), termSent || killSent
		case <-timer.C:
		case <-leaseDone:
			leaseDone = nil // ended: handled at the top of the loop
		}
	}
}

// afterCommand follows a command that exited on its own (with status):
// --min-hold keeps (and renews) the lock until it has been held that long
// since acquired, unless a shutdown begins (the keys are then left to
// expire rather than let another host in now) or the lease ends; after
// status 0, --cooldown leaves the lock held, to expire with its TTL plus
// the cooldown. Otherwise the lock is released.
func (r *runner) afterCommand(lease *redlock.Lease, sup *supervisor, acquired time.Time, status int) {
	rc := r.rc
	keep := false
	if left := rc.minHold - time.Since(acquired); left > 0 && lease.Err() == nil {
		r.verbose("holding lock %q until --min-hold %v has passed (%v more)", rc.name, rc.minHold, left.Round(time.Millisecond))
		t := time.NewTimer(left)
		select {
		case <-t.C:
		case <-lease.Done():
		case <-sup.stopCh:
			keep = true
			r.verbose("%v during --min-hold: leaving lock %q to expire with its TTL", sup.shutdown(), rc.name)
		}
		t.Stop()
	}
	if rc.cooldown > 0 && status == 0 && lease.Err() == nil {
		keep = true
		r.verbose("--cooldown %v: leaving lock %q held; it expires %v after its last renewal", rc.cooldown, rc.name, rc.ttl+rc.cooldown)
	}
	if !keep {
		r.release(lease)
	}
}

// errShutdown: the command was not started because a shutdown had begun.
var errShutdown = errors.New("shutdown began")

// start starts cmd unless a shutdown began, and returns a channel that
// receives cmd.Wait's error. The goroutine that starts and waits keeps its
// OS thread to itself until the child is reaped: Pdeathsig fires when the
// thread that forked the child exits, and Go ends a thread only when a
// goroutine exits while locked to it, which no other goroutine can do to
// this one meanwhile. It unlocks before it exits, so that the thread, which
// may have forked other processes with Pdeathsig before, lives on.
func (s *supervisor) start(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		s.mu.Lock()
		if s.sig != nil {
			s.mu.Unlock()
			started <- errShutdown
			return
		}
		err := cmd.Start()
		if err == nil {
			s.pgid = cmd.Process.Pid
		}
		s.mu.Unlock()
		started <- err
		if err != nil {
			return
		}
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}

// exitStatus is a shell's status for the command's end: its exit code, or
// 128+N when signal N ended it.
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return runCannotExec
}

// leaseErr says why the lease ended, or that its deadline passed.
func leaseErr(l *redlock.Lease, until time.Time) error {
	if err := l.Err(); err != nil {
		return err
	}
	return fmt.Errorf("run woke up %v after the lease's SIGKILL time", time.Since(until).Round(time.Millisecond))
}

// wallUntil is the lease's validity deadline on the wall clock, RFC 3339 UTC.
func wallUntil(l *redlock.Lease) string {
	return time.Now().Add(time.Until(l.Until())).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func fenceNote(fencing bool, fence int64) string {
	if !fencing {
		return ""
	}
	return ", fence " + strconv.FormatInt(fence, 10)
}

// acquirer returns the call that takes the lock as the flags say.
func (rc *runConfig) acquirer(c *redlock.Client) (func(context.Context) (*redlock.Lease, error), error) {
	opts := []redlock.LockOption{redlock.WithTTL(rc.ttl), redlock.WithAutoRenew(0)}
	if rc.cooldown > 0 {
		opts = append(opts, redlock.WithLockDelay(rc.cooldown))
	}
	if rc.wait.d > 0 {
		opts = append(opts, redlock.WithMaxWait(rc.wait.d))
	}
	once := !rc.wait.forever && rc.wait.d == 0
	switch {
	case rc.shared || rc.excl:
		reader, writer, err := c.NewRWMutex(rc.name, opts...)
		if err != nil {
			return nil, err
		}
		m := writer
		if rc.shared {
			m = reader
		}
		if once {
			return m.TryLock, nil
		}
		return m.Lock, nil
	case rc.sem > 0:
		s, err := c.NewSemaphore(rc.name, rc.sem, opts...)
		if err != nil {
			return nil, err
		}
		if once {
			return s.TryLock, nil
		}
		return s.Lock, nil
	}
	if rc.fencing {
		opts = append(opts, redlock.WithFencing())
	}
	m, err := c.NewMutex(rc.name, opts...)
	if err != nil {
		return nil, err
	}
	if once {
		return m.TryLock, nil
	}
	return m.Lock, nil
}

// notObtainedStatus classifies a failed acquisition: masters unavailable
// (too few answered or could vote: failed, or in restart quarantine; or one
// denied access, or one server is listed twice) or held elsewhere
// (--conflict-exit-code).
func (rc *runConfig) notObtainedStatus(err error, cfg *reconfig.Config) int {
	if errors.Is(err, redlock.ErrInvalidConfig) {
		return runUnavailable
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return runUnavailable
	}
	failed := map[string]bool{}
	for _, r := range qe.Nodes {
		switch {
		case r.Err == nil, errors.Is(r.Err, redlock.ErrNodeTaken),
			errors.Is(r.Err, redlock.ErrNoReply): // undecided when the attempt was: not a failure
		case errors.Is(r.Err, redlock.ErrNodeDenied):
			return runUnavailable
		default:
			failed[r.Node] = true
		}
	}
	if cfg != nil && cfg.Joint() { // a quorum of each set: QuorumError.Quorum is the first set's
		if !cfg.Reached(func(m string) bool { return !failed[m] }) {
			return runUnavailable
		}
		return rc.conflict
	}
	if len(failed) > len(qe.Nodes)-qe.Quorum {
		return runUnavailable
	}
	return rc.conflict
}

// syncWriter serialises the writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
