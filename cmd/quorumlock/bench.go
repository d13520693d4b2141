package main

// quorumlock bench: the side-by-side benchmark. It is a program of the
// bench module (bench/cmd/quorumlock-bench), because its peers (redsync,
// bsm/redislock, rueidis) are kept out of this module's dependencies; this
// command finds it and runs it.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const benchUsageText = `usage: quorumlock bench [--nodes URL,...] [--quick] [--json FILE] [--svg FILE]

Measures quorumlock side by side with redsync (default and fail-fast),
bsm/redislock, rueidislock and the floor (SET NX PX + compare-and-delete on
one node): single node versus quorums of 3, 5 and 7 masters; plain, fencing
and auto-renewal; healthy, 1ms and 0-2ms jitter on every master, one master
20ms slow, hung or dead, and 8 clients on one lock. It prints markdown tables
(p50/p90/p99/max, cycles/s, allocations, bytes and client CPU per cycle,
goroutines after the loop and after Close, orphan keys; under contention
acquisitions/s, same-client re-locks, handoff p50/p99, longest wait), the
performance targets with the ratios measured, and with --json the rows and
with --svg a chart.

  --nodes URL,...  measure these masters (host:port or redis://[user:pw@]host:port[/db],
                   rediss://...) instead of starting redis-server processes; their
                   keys of the run are deleted at the end; passwords are never printed
  --quick          every figure in about two minutes (fewer sizes and cycles)
  --json FILE      also write the rows as JSON
  --svg FILE       also write the chart as SVG

The benchmark is its own program, quorumlock-bench. quorumlock bench runs:
  1. quorumlock-bench found on PATH (install it from a checkout:
     cd bench && go install ./cmd/quorumlock-bench), or else
  2. inside a checkout of this repository (the current directory or a parent
     holds bench/go.mod): the checkout's benchmark, as go run ./cmd/quorumlock-bench
     in its bench/ directory would run it (built with go build into a temporary
     directory, so that its exit status comes through; go run makes every
     failure 1).
The flags are passed on unchanged; the exit status is the benchmark's.
`

// benchModule is the module path of the benchmark's module.
const benchModule = "github.com/quorumlock/quorumlock/bench"

// runBench runs quorumlock-bench with args, its output going to stdout and
// stderr, and returns its exit status (exitFail when it cannot be found or
// started; exitOK after printing the usage for -h).
func runBench(args []string, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stdout, benchUsageText)
			return exitOK
		}
	}
	cmd, how, cleanup, err := benchCommand(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock bench: %v\n", err)
		return exitFail
	}
	defer cleanup()
	cmd.Stdin = os.Stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	fmt.Fprintf(stderr, "quorumlock bench: running %s\n", how)
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	}
	fmt.Fprintf(stderr, "quorumlock bench: %s: %v\n", how, err)
	return exitFail
}

// benchCommand returns the command that runs the benchmark with args, says
// which it is (quorumlock-bench from PATH, or the one of the checkout the
// working directory is in, built into a temporary directory that cleanup
// removes), and a cleanup function. go build writes its errors to stderr.
func benchCommand(args []string, stderr io.Writer) (cmd *exec.Cmd, how string, cleanup func(), err error) {
	if p, err := exec.LookPath("quorumlock-bench"); err == nil {
		return exec.Command(p, args...), p, func() {}, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, "", nil, err
	}
	dir, ok := benchDir(wd)
	if !ok {
		return nil, "", nil, fmt.Errorf("quorumlock-bench is not on PATH, and %s is not inside a checkout of quorumlock (no bench/go.mod of %s in it or above it): in a checkout, run cd bench && go install ./cmd/quorumlock-bench, or run quorumlock bench from the checkout", wd, benchModule)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, "", nil, fmt.Errorf("found the benchmark in %s, but no go command on PATH to build it: %w", dir, err)
	}
	tmp, err := os.MkdirTemp("", "quorumlock-bench-")
	if err != nil {
		return nil, "", nil, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	bin := filepath.Join(tmp, "quorumlock-bench")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/quorumlock-bench")
	build.Dir = dir
	build.Stdout, build.Stderr = stderr, stderr
	if err := build.Run(); err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("go build ./cmd/quorumlock-bench in %s: %w", dir, err)
	}
	return exec.Command(bin, args...), "the benchmark of " + dir + " (go build ./cmd/quorumlock-bench there)", cleanup, nil
}

// benchDir returns the bench/ directory of the checkout that holds dir:
// dir itself or the first parent that is the bench module, or has it in
// bench/.
func benchDir(dir string) (string, bool) {
	for {
		for _, d := range []string{dir, filepath.Join(dir, "bench")} {
			if isBenchModule(filepath.Join(d, "go.mod")) {
				return d, true
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// isBenchModule reports whether the go.mod file at path declares the
// benchmark's module.
func isBenchModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if mod, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(mod), `"`) == benchModule
		}
	}
	return false
}
