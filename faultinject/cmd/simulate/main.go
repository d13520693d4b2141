// Command simulate runs the deterministic simulator (package sim) over
// many schedules: go run ./cmd/simulate --schedules 1000000 --seed S.
//
// A schedule runs the real redlock coordinator inside a testing/synctest
// bubble, and synctest.Test needs a *testing.T (Go 1.26 has no bubble
// without one), so this command builds the sim package's test binary
// (go test -c) and runs its TestBatch in one process per core
// (GOMAXPROCS=1 each: bubbles are mostly serial, and separate processes
// scale better than one runtime with two Ps), each taking every n-th seed.
// It aggregates their progress into one line and writes a summary file.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/sim"
)

type report struct {
	Summary sim.Summary
	Elapsed time.Duration
	Fails   []struct {
		Seed       uint64
		Family     string
		Violations []string
		Replay     string
	}
	Done bool
}

func main() {
	schedules := flag.Uint64("schedules", 10000, "schedules to run")
	seed := flag.Uint64("seed", 1, "first seed (schedules use seed, seed+1, ...)")
	family := flag.String("family", "all", "schedule family, or all (the families in turn, by seed): "+fmt.Sprint(sim.Families))
	knob := flag.String("knob", "none", "safety mechanism to switch off (internal/knobs), or none")
	procs := flag.Int("procs", runtime.NumCPU(), "processes (one core each)")
	summary := flag.String("summary", "sim-summary.txt", "summary file")
	strict := flag.Bool("strict", true, "a fencing violation after a counter loss fails its schedule (false: classified apart, as before the fencing epoch)")
	flag.Parse()

	dir, err := os.MkdirTemp("", "simulate")
	check(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "sim.test")
	build := exec.Command("go", "test", "-c", "-o", bin, "github.com/quorumlock/quorumlock/faultinject/sim")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		check(fmt.Errorf("building the simulator (package sim) failed: %w; run from the harness module: cd faultinject && go run ./cmd/simulate", err))
	}

	rev := "?"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	load0 := loadavg()
	start := time.Now()
	var mu sync.Mutex
	latest := make([]sim.Summary, *procs)
	var fails []string
	var wg sync.WaitGroup
	for i := range *procs {
		args := []string{"-test.run", "^TestBatch$", "-test.timeout", "0", "-test.count", "1",
			"-schedules", fmt.Sprint(*schedules), "-seed", fmt.Sprint(*seed), "-family", *family,
			"-knob", *knob, "-shard", fmt.Sprint(i), "-shards", fmt.Sprint(*procs), fmt.Sprintf("-strict=%v", *strict)}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		if os.Getenv("GODEBUG") == "" {
			// New goroutines start with the stack size they usually need:
			// about 10% faster (every node call is a few goroutines).
			cmd.Env = append(cmd.Env, "GODEBUG=adaptivestackstart=1")
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		check(err)
		check(cmd.Start())
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for sc.Scan() {
				line := sc.Text()
				tag, js, ok := strings.Cut(line, " ")
				if !ok || (tag != "SIMPROGRESS" && tag != "SIMDONE") {
					continue
				}
				var r report
				if err := json.Unmarshal([]byte(js), &r); err != nil {
					continue
				}
				mu.Lock()
				latest[i] = r.Summary
				for _, f := range r.Fails {
					fails = append(fails, fmt.Sprintf("seed %d (%s): %s\n  replay: %s", f.Seed, f.Family, strings.Join(f.Violations, "; "), f.Replay))
					fmt.Fprintf(os.Stderr, "\nFAIL %s\n", fails[len(fails)-1])
				}
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				fmt.Fprintf(os.Stderr, "\nprocess %d: %v\n", i, err)
			}
		})
	}
	total := func() sim.Summary {
		mu.Lock()
		defer mu.Unlock()
		var s sim.Summary
		for _, l := range latest {
			s.Merge(l)
		}
		return s
	}
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s := total()
				fmt.Fprintf(os.Stderr, "\r%s", progress(s, *schedules, time.Since(start)))
			}
		}
	}()
	wg.Wait()
	close(stop)
	s := total()
	elapsed := time.Since(start)
	fmt.Fprintf(os.Stderr, "\r%s\n", progress(s, *schedules, elapsed))

	var b strings.Builder
	fmt.Fprintf(&b, "quorumlock simulation summary\n")
	fmt.Fprintf(&b, "command: simulate --schedules %d --seed %d --family %s --knob %s --procs %d\n", *schedules, *seed, *family, *knob, *procs)
	fmt.Fprintf(&b, "commit: %s (replay failing seeds at this commit)\n", rev)
	fmt.Fprintf(&b, "go: %s, %d cores; load average before: %s, after: %s\n", runtime.Version(), runtime.NumCPU(), load0, loadavg())
	fmt.Fprintf(&b, "elapsed: %v, %.1f schedules/s\n", elapsed.Round(time.Second), float64(s.Schedules)/elapsed.Seconds())
	fmt.Fprintf(&b, "%s\n", s.Line())
	fmt.Fprintf(&b, "schedules per fault kind: %s\n", s.CoverageLine())
	if len(s.KnownSeeds) > 0 {
		fmt.Fprintf(&b, "known fencing bug, first seeds: %v\n", s.KnownSeeds)
	}
	fmt.Fprintf(&b, "failures: %d\n", len(fails))
	for _, f := range fails {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	check(os.WriteFile(*summary, []byte(b.String()), 0o644))
	fmt.Fprint(os.Stderr, b.String())
	if s.Failed > 0 {
		os.Exit(1)
	}
}

func progress(s sim.Summary, n uint64, elapsed time.Duration) string {
	rate := float64(s.Schedules) / elapsed.Seconds()
	eta := "?"
	if rate > 0 {
		eta = (time.Duration(float64(int(n)-s.Schedules)/rate) * time.Second).Round(time.Second).String()
	}
	covered, kinds := s.KindsCovered()
	const width = 30
	done := int(float64(width) * float64(s.Schedules) / float64(n))
	return fmt.Sprintf("[%s%s] %d/%d  %.0f/s  violations %d  classified %d (known fencing %d)  kinds %d/%d  eta %s   ",
		strings.Repeat("#", done), strings.Repeat(".", width-done), s.Schedules, n, rate, s.Failed, s.Classified, s.Known, covered, kinds, eta)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "simulate:", err)
		os.Exit(2)
	}
}
