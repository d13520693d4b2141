// Command quorumlock runs commands under a distributed lock and inspects
// locks and their masters: the operator's tool. Install it from a clone
// with cd /path/to/quorumlock/cmd/quorumlock && go install . (its module
// links the library, go-redis and the Prometheus client, and none of the
// chaos harness).
//
// Usage:
//
//	quorumlock run [--nodes URL,...] [--ttl 10s] [--wait 0|D|-1] [--grace D] [--fencing]
//	               [--quarantine D] [--min-hold D] [--cooldown D] [--shared | --exclusive | --semaphore K]
//	               [--conflict-exit-code N] [--label L] [--log-level L | --verbose] [--metrics-addr ADDR] NAME [--] COMMAND [ARGS...]
//	quorumlock status [--nodes URL,...] [--json] [--watch D] [--quarantine D] NAME|PATTERN
//	quorumlock doctor [--nodes URL,...] [--json]
//	quorumlock bench [--nodes URL,...] [--quick] [--json FILE] [--svg FILE]
//	quorumlock reconfig init|set|status|repair [--nodes URL,...] --config-file F [--max-key-ttl D] [HOST:PORT,...]
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
// masters' settings (eviction, persistence, role, version). reconfig
// changes the set of masters one master per step with the waits the
// masters enforce (package reconfig, docs/reconfig.md). See
// docs/operations.md.
//
// bench launches the side-by-side benchmark, a program of the bench module
// (quorumlock-bench on PATH, or the checkout's bench/cmd/quorumlock-bench),
// so that its peers (redsync, bsm/redislock, rueidis) are not linked here.
// The chaos suite is the harness's command: cd faultinject && go run
// ./cmd/chaos --quick in a clone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
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
  reconfig change the set of masters while clients hold locks (quorumlock reconfig -h)
  bench   measure quorumlock side by side with redsync, redislock and rueidislock (quorumlock bench -h)
`

// run is main without the process: it parses args, writes to stdout and
// stderr, and returns the exit status. The environment is the process's;
// no signal reaches a command it runs (ctx ending counts as SIGTERM).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, args, &env{stdout: stdout, stderr: stderr, getenv: os.Getenv})
}

// chaosMoved answers quorumlock chaos: the suite links the harness
// (containers, proxies, in-memory masters), which an operator's binary
// does without.
const chaosMoved = `quorumlock: the chaos suite is not part of the operator's command; it is the harness's own:
  cd faultinject && go run ./cmd/chaos --quick   (in a clone of quorumlock)
`

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
	case "reconfig":
		return reconfigCmd(ctx, args[1:], e)
	case "chaos":
		fmt.Fprint(stderr, chaosMoved)
		return exitUsage
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "quorumlock: unknown command %q (commands: run, status, doctor, reconfig, bench)\n%s", args[0], usage)
	return exitUsage
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
