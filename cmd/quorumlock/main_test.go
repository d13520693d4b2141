package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/node"
)

func TestMain(m *testing.M) {
	node.DiscardClientLog()
	goleak.VerifyTestMain(m)
}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
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
		{nil, "usage: quorumlock"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"bench"}, "not yet available"},
		{[]string{"run"}, "not yet available"},
		{[]string{"chaos", "--scenario", "nope"}, `unknown scenario "nope"; valid scenarios: client-pause, clock-drift`},
		{[]string{"chaos", "--backend", "vm"}, `--backend "vm": want auto, docker, process or memory`},
		{[]string{"chaos", "--nodes", "-3"}, "--nodes -3 must not be negative"},
		{[]string{"chaos", "--duration", "-1s"}, "--duration -1s must not be negative"},
		{[]string{"chaos", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"chaos", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"status", "lockname"}, "need --addrs and exactly one lock name"},
		{[]string{"chaos", "--nodes", "4"}, `--nodes 4: chaos: scenario "restart-delayed": split needs an odd number of nodes, have 4`},
	}
	for _, c := range cases {
		code, _, stderr := runCmd(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("quorumlock %q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

func TestList(t *testing.T) {
	code, out, _ := runCmd(t, "chaos", "--list")
	if code != exitOK || !strings.Contains(out, "restart-no-persistence") || !strings.Contains(out, "unsafe") {
		t.Fatalf("chaos --list: exit %d, output %q", code, out)
	}
}

// TestChaosCommand runs two short scenarios, one safe and one unsafe, on the
// memory backend through the command, and checks the table, the JSON file
// and the exit status.
func TestChaosCommand(t *testing.T) {
	js := filepath.Join(t.TempDir(), "out.json")
	code, out, stderr := runCmd(t, "chaos", "--short", "--backend", "memory", "--scenario", "healthy,client-pause", "--duration", "2s", "--json", js)
	if code != exitOK {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	for _, s := range []string{"scenario", "expected", "acquisitions", "faults injected", "violations", "stale writes accepted", "leaked keys", "verdict", "healthy", "client-pause"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	if !strings.Contains(stderr, "chaos: [1/2] healthy") || !strings.Contains(stderr, "chaos: [2/2] client-pause on memory: pass") {
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
	if len(got) != 2 || got[0]["name"] != "healthy" || got[0]["expect"] != "safe" || got[1]["expect"] != "unsafe" || got[1]["verdict"] != "pass" {
		t.Fatalf("JSON = %s", b)
	}
	if v, _ := got[1]["stale_writes_accepted"].(float64); v < 1 {
		t.Errorf("client-pause accepted %v stale writes, want at least 1", got[1]["stale_writes_accepted"])
	}
	if len(got[0]) != 8 {
		t.Errorf("JSON object has %d fields, want 8: %v", len(got[0]), got[0])
	}
}

// TestChaosCommandFails checks that a fail verdict gives exit status 1: an
// unsafe scenario run too briefly for its first fault shows no violation.
func TestChaosCommandFails(t *testing.T) {
	code, out, stderr := runCmd(t, "chaos", "--backend", "memory", "--scenario", "client-pause", "--duration", "100ms")
	if code != exitFail || !strings.Contains(out, "fail") {
		t.Fatalf("exit %d, want %d with a fail verdict; stdout:\n%s\nstderr:\n%s", code, exitFail, out, stderr)
	}
}

func TestStatus(t *testing.T) {
	c := faultinject.StartT(t, faultinject.Config{N: 3, Backend: faultinject.Memory})
	addrs := c.Addr(0) + "," + c.Addr(1) + "," + c.Addr(2)
	code, out, stderr := runCmd(t, "status", "--addrs", addrs, "mylock")
	if code != exitOK || !strings.Contains(out, `lock "mylock": not held by any quorum`) || strings.Count(out, "free") != 3 {
		t.Fatalf("status of a free lock: exit %d\n%s%s", code, out, stderr)
	}
	for i := range 2 {
		if _, err := c.Node(i).Acquire(context.Background(), "mylock", "tok?label=me", 10e9); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr = runCmd(t, "status", "--addrs", addrs, "mylock")
	if code != exitOK || !strings.Contains(out, `lock "mylock": held by tok on a quorum (2 of 3)`) || !strings.Contains(out, `label "me"`) {
		t.Fatalf("status of a held lock: exit %d\n%s%s", code, out, stderr)
	}
	if err := c.Kill(context.Background(), 0, 1); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCmd(t, "status", "--addrs", addrs, "mylock")
	if code != exitFail || !strings.Contains(out, "unknown (2 of 3 masters did not answer)") {
		t.Fatalf("status with 2 of 3 masters down: exit %d\n%s", code, out)
	}
}
