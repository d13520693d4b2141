package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

func TestMain(m *testing.M) {
	lockkey.DiscardClientLog()
	goleak.VerifyTestMain(m)
}

// runMain runs the command in this process with the process's environment.
func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "nope"}, `unknown scenario "nope"; valid scenarios: aof-tail-loss-pg, aof-tail-loss-pg-n5, aof-tail-loss-pg-n5-no-run-stamp, aof-tail-loss-pg-no-run-stamp, client-pause, client-pause-fenced`},
		{[]string{"--backend", "vm"}, `--backend "vm": want auto, docker, process or memory`},
		{[]string{"--nodes", "-3"}, `--nodes "-3": "-3" is not a positive number of masters`},
		{[]string{"--nodes", "3,x"}, `--nodes "3,x": "x" is not a positive number of masters`},
		{[]string{"--duration", "-1s"}, "--duration -1s must not be negative"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
		{[]string{"--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"--nodes", "4"}, `--nodes 4: chaos: scenario "split-quorums": split needs an odd number of nodes, have 4`},
	}
	// 64 (EX_USAGE), as the operator's quorumlock command gives.
	const usage = 64
	for _, c := range cases {
		code, _, stderr := runMain(t, c.args...)
		if code != usage || !strings.Contains(stderr, c.want) {
			t.Errorf("chaos %q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, usage, c.want)
		}
	}
}

// TestList: one line per scenario, its columns aligned whatever the length
// of the names (the longest are past 30 characters).
func TestList(t *testing.T) {
	code, out, _ := runMain(t, "--list")
	if code != exitOK || !strings.Contains(out, "restart-no-persistence") || !strings.Contains(out, "unsafe") {
		t.Fatalf("chaos --list: exit %d, output %q", code, out)
	}
	// Each column starts where it starts on the first line.
	var first []int
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			t.Fatalf("short line %q", l)
		}
		var at []int
		from := 0
		for _, field := range f[1:5] { // expect, N=, K=, TTL=
			i := strings.Index(l[from:], field)
			at = append(at, from+i)
			from += i + len(field)
		}
		if first == nil {
			first = at
		}
		if !slices.Equal(at, first) {
			t.Errorf("columns of %q start at %v, the first line's at %v:\n%s", f[0], at, first, out)
			break
		}
	}
}

// TestChaosCommand runs two short scenarios, one safe and one unsafe, on the
// memory backend through the command, and checks the table, the JSON file
// and the exit status.
func TestChaosCommand(t *testing.T) {
	js := filepath.Join(t.TempDir(), "out.json")
	code, out, stderr := runMain(t, "--short", "--backend", "memory", "--scenario", "healthy,client-pause", "--duration", "2s", "--json", js)
	_, sized, sizedErr := runMain(t, "--short", "--backend", "memory", "--scenario", "healthy", "--duration", "1s", "--nodes", "3,5")
	if !strings.Contains(sizedErr, "healthy (N=3) on memory: safe") || !strings.Contains(sizedErr, "healthy (N=5) on memory: safe") || strings.Count(sized, "healthy") != 2 {
		t.Errorf("--nodes 3,5 did not run the scenario once per size:\n%s\n%s", sized, sizedErr)
	}
	if code != exitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for _, s := range []string{"scenario", "expected", "acquisitions", "faults injected", "violations", "stale writes accepted", "leaked keys", "verdict", "healthy", "client-pause"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	if !strings.Contains(stderr, "chaos: [1/2] healthy") || !strings.Contains(stderr, "chaos: [2/2] client-pause (N=3) on memory: caught") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, b)
	}
	if len(got) != 2 || got[0]["name"] != "healthy" || got[0]["expect"] != "safe" || got[0]["verdict"] != "safe" || got[1]["expect"] != "unsafe" || got[1]["verdict"] != "caught" {
		t.Fatalf("JSON = %s", b)
	}
	if v, _ := got[1]["stale_writes_accepted"].(float64); v < 1 {
		t.Errorf("client-pause accepted %v stale writes, want at least 1", got[1]["stale_writes_accepted"])
	}
	if len(got[0]) != 8 {
		t.Errorf("JSON object has %d fields, want 8: %v", len(got[0]), got[0])
	}
}

// TestChaosCommandFails checks that a FAIL verdict gives exit status 1 and
// says why: an unsafe scenario run too briefly for its first fault (at
// 200ms) shows no violation.
func TestChaosCommandFails(t *testing.T) {
	code, out, stderr := runMain(t, "--backend", "memory", "--scenario", "client-pause", "--duration", "100ms")
	if code != exitFail || !regexp.MustCompile(`client-pause +3 +unsafe .* FAIL\n`).MatchString(out) ||
		!strings.Contains(out, "client-pause: FAIL: no violation seen, but this unsafe scenario forces one") {
		t.Fatalf("exit %d, want %d with a FAIL verdict and its reason; stdout:\n%s\nstderr:\n%s", code, exitFail, out, stderr)
	}
	if !strings.Contains(stderr, "client-pause (N=3) on memory: FAIL") {
		t.Errorf("the progress line does not say FAIL:\n%s", stderr)
	}
}

// TestChaosFirstRunWithoutRedisServer is the README's first command on a
// machine without redis-server (with or without a Docker engine): auto says
// once which backend it chose and why, and every row runs there and passes.
func TestChaosFirstRunWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, out, stderr := runMain(t, "--short", "--scenario", "healthy,client-pause", "--duration", "2s")
	if code != exitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if n := strings.Count(stderr, "auto backend: memory"); n != 1 {
		t.Errorf("the backend choice is said %d times, want once:\n%s", n, stderr)
	}
	if !regexp.MustCompile(`healthy +5 +safe .* safe\n`).MatchString(out) || !regexp.MustCompile(`client-pause +3 +unsafe .* caught\n`).MatchString(out) {
		t.Errorf("rows are not healthy safe and client-pause caught:\n%s\n%s", out, stderr)
	}
	if !strings.Contains(stderr, "healthy (N=5) on memory: safe") {
		t.Errorf("the progress line does not name the backend:\n%s", stderr)
	}
}

// TestChaosQuick is the README's first command, on two scenarios: --quick
// runs on redis-server processes when redis-server is installed, says so
// and why, and uses the short duration (3s).
func TestChaosQuick(t *testing.T) {
	redisproc.Require(t)
	code, out, stderr := runMain(t, "--quick", "--scenario", "healthy,client-pause")
	if code != exitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if n := strings.Count(stderr, "chaos: quick backend: process (redis-server at "); n != 1 {
		t.Errorf("the quick backend choice is said %d times, want once:\n%s", n, stderr)
	}
	for _, s := range []string{"healthy (N=5) on process: safe", "client-pause (N=3) on process: caught", "TTL 1s, 3s;", "that was the quick run"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr)
		}
	}
	if !regexp.MustCompile(`client-pause +3 +unsafe .* caught\n`).MatchString(out) {
		t.Errorf("client-pause is not caught in the table:\n%s", out)
	}
}

// TestChaosQuickWithoutRedisServer: without redis-server --quick falls back
// to memory and says why; an explicit --backend is kept.
func TestChaosQuickWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, out, stderr := runMain(t, "--quick", "--scenario", "client-pause", "--duration", "1s")
	if code != exitOK || !strings.Contains(out, "caught") {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "chaos: quick backend: memory (docker unavailable: ") || !strings.Contains(stderr, "process unavailable: redisproc: redis-server not found") {
		t.Errorf("the fallback to memory is not explained:\n%s", stderr)
	}
	code, _, stderr = runMain(t, "--quick", "--backend", "process", "--scenario", "healthy")
	if code != exitFail || !strings.Contains(stderr, "--backend process is not available here") {
		t.Errorf("--quick --backend process without redis-server: exit %d, stderr:\n%s", code, stderr)
	}
}
