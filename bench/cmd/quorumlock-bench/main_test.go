package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/bench"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// TestMain fails the package when a run leaves a goroutine behind, except
// rueidis's connection goroutines that rueidislock leaves after Close once
// a master was hung: the run reports them (goroutines after Close, in the
// one-hung table), which is what the figure is for.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*pipe)._background.func1"))
}

// tiny shrinks a plan to seconds: a few cycles, N = 1 and 3 (faults at 3),
// 3 clients for 0.4s under contention.
func tiny(cfg *bench.Config) {
	cfg.Cycles, cfg.Slice, cfg.Warmup, cfg.Budget = 4, 2, 1, time.Second
	cfg.Ns = []int{1, 3}
	for i := range cfg.Conditions {
		cfg.Conditions[i].Ns = []int{1, 3}
	}
	cfg.Contention.Clients, cfg.Contention.Ns = 3, []int{3}
	cfg.Contention.Duration, cfg.Contention.Rounds = 400*time.Millisecond, 2
}

// TestQuickTiny runs the --quick plan shrunk by tiny on redis-server
// processes the command starts: it exits 0 and prints a table for every
// condition and the contention with every figure's column, the targets and
// the contenders; --json writes one row per contender, N and condition
// (faulted conditions at N=3 only) and --svg a well-formed chart.
func TestQuickTiny(t *testing.T) {
	redisproc.Require(t)
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "rows.json"), filepath.Join(dir, "chart.svg")
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"--quick", "--json", js, "--svg", svg}, &out, &errOut, tiny); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	s := out.String()
	for _, want := range []string{
		"- machine: ", "- load average (1, 5, 15 min): ", "- masters: 3 redis-server processes",
		"Condition `healthy`", "Condition `delay-1ms`", "Condition `jitter-0-2ms`", "Condition `one-slow-20ms`",
		"Condition `one-hung`", "Condition `one-dead`", "Condition `contention-3`",
		"| p50 ms | p90 ms | p99 ms | max ms |", "| cycles/s | allocs/cycle | B/cycle | CPU µs/cycle | server CPU µs/cycle | scripts µs/cycle | goroutines loop / close | orphan keys |",
		"first lock after death ms", "| acq/s | same-client re-locks | handoff p50 ms | handoff p99 ms |", "| longest wait ms |",
		"## Targets", "healthy N=5 p50 <= 0.85x redsync", "## Contenders",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	for _, c := range bench.Contenders() {
		if !strings.Contains(s, "| "+c.Name+" | 1 |") {
			t.Errorf("stdout has no N=1 row of %s", c.Name)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", s)
	}

	var rows []bench.Row
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	// 3 unfaulted conditions x (every contender at N=1 + the quorum ones at
	// N=3), 3 faulted x the quorum ones at N=3, the quorum ones under
	// contention.
	all, multi := contenderCounts()
	if want := 3*(all+multi) + 3*multi + multi; len(rows) != want {
		t.Errorf("%d JSON rows, want %d", len(rows), want)
	}
	for _, r := range rows {
		if r.Cycles == 0 {
			t.Errorf("%s N=%d %s: no successful cycle (%d errors: %s)", r.Contender, r.N, r.Condition, r.Errors, r.Err)
		}
	}

	b, err = os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName   xml.Name
		Polylines []struct{} `xml:"polyline"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil || doc.XMLName.Local != "svg" || len(doc.Polylines) == 0 {
		t.Errorf("chart: %v, root %q, %d lines; want an svg with lines", err, doc.XMLName.Local, len(doc.Polylines))
	}
}

// TestNodesWithPassword measures three masters the test started with a
// password, given as redis:// URLs: the rows cover N = 1 and 3, the
// password appears nowhere in the output, and the run's keys (fencing
// counters included) are gone from the masters afterwards.
func TestNodesWithPassword(t *testing.T) {
	redisproc.Require(t)
	const secret = "Bench-s3cret"
	var urls []string
	var clients []*redis.Client
	for range 3 {
		s := redisproc.StartT(t, redisproc.Config{})
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		if err := c.ConfigSet(t.Context(), "requirepass", secret).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
		c = redis.NewClient(&redis.Options{Addr: s.Addr(), Password: secret})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
		urls = append(urls, "redis://:"+secret+"@"+s.Addr())
	}
	js := filepath.Join(t.TempDir(), "rows.json")
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"--nodes", strings.Join(urls, ","), "--json", js}, &out, &errOut, func(cfg *bench.Config) {
		cfg.Cycles, cfg.Slice, cfg.Warmup = 3, 3, 1
		cfg.Contention.Clients, cfg.Contention.Duration, cfg.Contention.Rounds = 2, 300*time.Millisecond, 1
	})
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	b, _ := os.ReadFile(js)
	for name, text := range map[string]string{"stdout": out.String(), "stderr": errOut.String(), "JSON": string(b)} {
		if strings.Contains(text, secret) {
			t.Errorf("%s shows the password", name)
		}
	}
	if !strings.Contains(out.String(), "- masters: given with --nodes (3): 127.0.0.1:") {
		t.Errorf("stdout does not list the masters as host:port:\n%s", out.String())
	}
	var rows []bench.Row
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	ns := map[int]int{}
	for _, r := range rows {
		if r.Clients == 0 {
			ns[r.N]++
		}
		if r.Cycles == 0 {
			t.Errorf("%s N=%d %s: no successful cycle (%s)", r.Contender, r.N, r.Condition, r.Err)
		}
	}
	if all, multi := contenderCounts(); ns[1] != all || ns[3] != multi || len(ns) != 2 {
		t.Errorf("healthy rows per N: %v, want %d at N=1 and %d at N=3", ns, all, multi)
	}
	for i, c := range clients {
		if n, err := c.DBSize(t.Context()).Result(); err != nil || n != 0 {
			t.Errorf("master %d: %d keys left (%v), want 0", i, n, err)
		}
	}
}

// TestUsage: a bad flag or argument is a usage error, and a bad --nodes
// URL is refused without showing its password.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"--frob"}, {"extra"}, {"--nodes", "redis://:pw-XYZ@h:99999"}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut, nil); code != exitUsage || strings.Contains(errOut.String(), "pw-XYZ") {
			t.Errorf("%q: exit %d, stderr %q; want %d without the password", args, code, errOut.String(), exitUsage)
		}
	}
}

// contenderCounts returns how many contenders the bench has, and how many
// of them run on more than one master.
func contenderCounts() (all, multi int) {
	for _, c := range bench.Contenders() {
		all++
		if !c.OneNode {
			multi++
		}
	}
	return all, multi
}
