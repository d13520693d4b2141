package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/reconfig"
	"github.com/quorumlock/quorumlock/redlock"
)

// runJob is docs/operations.md's client of a reconfigured deployment, as
// it appears there between the BEGIN and END lines
// (TestReconfigClientIsTheDocs keeps the two identical): it runs job
// under the lock, on the newest configuration's client.
func runJob(ctx context.Context, clients *reconfig.Clients, job func(*redlock.Lease) error) error {
	// BEGIN reconfig-client
	client, _ := clients.Client()
	mutex, err := client.NewMutex("jobs:nightly", redlock.WithTTL(time.Second))
	if err != nil {
		return err
	}
	lease, err := mutex.Lock(ctx)
	if errors.Is(err, redlock.ErrConfigStale) {
		// A step has committed: wait for its configuration, lock on it.
		if client, err = clients.Reload(ctx); err != nil {
			return err
		}
		if mutex, err = client.NewMutex("jobs:nightly", redlock.WithTTL(time.Second)); err != nil {
			return err
		}
		lease, err = mutex.Lock(ctx)
	}
	if err != nil {
		return err
	}
	defer lease.Unlock(context.Background())
	return job(lease)
	// END reconfig-client
}

// docBlock returns the lines of docs/operations.md between "BEGIN name"
// and "END name" (exclusive).
func docBlock(t *testing.T, name string) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(doc), "# BEGIN "+name+"\n")
	body, _, ok2 := strings.Cut(body, "# END "+name+"\n")
	if !ok || !ok2 {
		t.Fatalf("docs/operations.md has no block %q", name)
	}
	return strings.Split(strings.TrimRight(body, "\n"), "\n")
}

// shellRun runs one line of the doc's recipe: export sets env, a comment
// does nothing, quorumlock runs the command in this process. $M1...$M6
// are the masters' addresses.
func shellRun(t *testing.T, line string, masters []string, vars map[string]string) (string, int) {
	t.Helper()
	for i := len(masters); i >= 1; i-- {
		line = strings.ReplaceAll(line, "$M"+string(rune('0'+i)), masters[i-1])
	}
	line, _, _ = strings.Cut(line, "#")
	f := strings.Fields(line)
	switch {
	case len(f) == 0:
		return "", 0
	case f[0] == "export":
		k, v, _ := strings.Cut(f[1], "=")
		vars[k] = v
		return "", 0
	case f[0] != "quorumlock":
		t.Fatalf("the recipe's line %q is not a quorumlock command", line)
	}
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, getenv: func(k string) string { return vars[k] }}
	code := dispatch(context.Background(), f[1:], e)
	t.Logf("$ %s\n%s%s", line, out.String(), errOut.String())
	return out.String() + errOut.String(), code
}

// TestReconfigRecipeIsTheDocs runs docs/operations.md's "Replacing a
// master" on six redis-server processes (in a temporary directory, the
// longest key life cut from 15s to 1s so that each wait takes 1.4 s): master 5 is replaced by master 6 in two steps. A client loaded
// from the file before the change is refused as stale afterwards; one
// loaded again takes the lock on the new set. The Go code is the doc's.
func TestReconfigRecipeIsTheDocs(t *testing.T) {
	var masters []string
	for range 6 {
		masters = append(masters, redisproc.StartT(t, redisproc.Config{}).Addr())
	}
	recipe := docBlock(t, "replace-master")
	t.Chdir(t.TempDir())
	env := map[string]string{}
	var clients *reconfig.Clients
	ran := 0
	job := func(*redlock.Lease) error { ran++; return nil }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, line := range recipe {
		line = strings.ReplaceAll(line, "--max-key-ttl 15s", "--max-key-ttl 1s")
		if strings.Contains(line, "reconfig set") {
			var err error
			if clients, err = reconfig.NewClients(ctx, reconfig.FileSource("masters.conf"), nil); err != nil {
				t.Fatal(err)
			}
			defer clients.Close(context.Background())
			if err := runJob(ctx, clients, job); err != nil {
				t.Fatalf("before the change: %v", err)
			}
		}
		out, code := shellRun(t, line, masters, env)
		if code != 0 {
			t.Fatalf("%q exited %d:\n%s", line, code, out)
		}
		if strings.Contains(line, "reconfig status") {
			cfg, err := reconfig.ReadFile("masters.conf")
			if err != nil {
				t.Fatal(err)
			}
			rec := cfg.Record()
			for _, m := range []string{masters[0], masters[5]} {
				if !strings.Contains(out, m+"  epoch 3 (5 masters, quorum 3, "+rec[len(rec)-8:]+"), sealed") {
					t.Errorf("status does not show %s at epoch 3:\n%s", m, out)
				}
			}
		}
	}
	cfg, err := reconfig.ReadFile("masters.conf")
	if err != nil {
		t.Fatal(err)
	}
	if want := append(masters[:4:4], masters[5]); cfg.Epoch != 3 || strings.Join(cfg.Masters, ",") != strings.Join(want, ",") {
		t.Fatalf("masters.conf: epoch %d, masters %v; want 3, %v", cfg.Epoch, cfg.Masters, want)
	}
	// The client of epoch 1 is refused; the doc's code reloads and runs the
	// job on epoch 3's.
	old, _ := clients.Client()
	if err := runJob(ctx, clients, job); err != nil {
		t.Fatalf("after the change: %v", err)
	}
	if now, c := clients.Client(); c.Epoch != 3 || now == old || ran != 2 {
		t.Fatalf("after the change: epoch %d, a new client %v, %d jobs run; want 3, true, 2", c.Epoch, now != old, ran)
	}
	lockOnce(t, old, redlock.ErrConfigStale)
}

// TestReconfigClientIsTheDocs: docs/operations.md shows runJob's body as
// it is.
func TestReconfigClientIsTheDocs(t *testing.T) {
	docShowsBlock(t, "reconfig_test.go", "reconfig-client")
}

// lockOnce locks (Lock) and unlocks a lock with a 1s TTL and wants err.
func lockOnce(t *testing.T, c *redlock.Client, want error) {
	t.Helper()
	m, err := c.NewMutex("jobs:reconfig", redlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := m.Lock(ctx) // retries a slow node; stops at once when stale
	if want == nil {
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		_ = lease.Unlock(ctx)
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("Lock: %v, want %v", err, want)
	}
}

// TestReconfigResumes: set resumes a step the masters hold beyond the file
// (interrupted after its commit point, before its publication), and
// re-seals the file's step when its seals were lost; it refuses a target
// that is not among --nodes without echoing it.
func TestReconfigResumes(t *testing.T) {
	_, masters, run := cmdRig(t, 6, redisproc.Config{})
	runLine := func(line string) string { t.Helper(); return run(line, exitOK) }
	runLine("quorumlock reconfig init --nodes $M1,$M2,$M3,$M4,$M5 --config-file masters.conf --max-key-ttl 200ms")
	// An interrupted set: the step to epoch 2 committed and sealed on the
	// masters, never published.
	ch, _, _ := stepUnpublished(t, masters)
	out := runLine("quorumlock reconfig set --config-file masters.conf $M1,$M2,$M3,$M4,$M6")
	if !strings.Contains(out, "resuming: epoch 2 is on the masters, masters.conf has 1") || !strings.Contains(out, "done: epoch 3") {
		t.Fatalf("set did not resume epoch 2 and finish at 3:\n%s", out)
	}
	// The seals of the file's epoch lost (a step interrupted before them):
	// set seals it again before its next step.
	for _, c := range ch.Masters {
		if err := c.HDel(t.Context(), "quorumlock:config", "sealed").Err(); err != nil {
			t.Fatal(err)
		}
	}
	out = runLine("quorumlock reconfig set --config-file masters.conf $M1,$M2,$M3,$M6")
	if !strings.Contains(out, "done: epoch 4") {
		t.Fatalf("set did not go on after re-sealing:\n%s", out)
	}

	out = runLine("quorumlock reconfig repair --config-file masters.conf")
	if !strings.Contains(out, "repaired: epoch 4") {
		t.Fatalf("repair with nothing lost:\n%s", out)
	}

	out = run("quorumlock reconfig set --config-file masters.conf $M1,redis://u:secret@10.0.0.9:6379", exitUsage)
	if strings.Contains(out, "secret") || !strings.Contains(out, "master 2 of the new set is not among --nodes") {
		t.Fatalf("a target not among --nodes, without the password:\n%s", out)
	}
}

// cmdRig starts n redis-server processes of cfg, moves the test into a
// temporary directory, and returns the servers, their addresses ($M1...)
// and run, which runs a command line with $QUORUMLOCK_NODES naming every
// master and fails the test unless it exits want.
func cmdRig(t *testing.T, n int, cfg redisproc.Config) ([]*redisproc.Server, []string, func(line string, want int) string) {
	t.Helper()
	var servers []*redisproc.Server
	var masters []string
	for range n {
		s := redisproc.StartT(t, cfg)
		servers = append(servers, s)
		masters = append(masters, s.Addr())
	}
	t.Chdir(t.TempDir())
	vars := map[string]string{"QUORUMLOCK_NODES": strings.Join(masters, ",")}
	return servers, masters, func(line string, want int) string {
		t.Helper()
		out, code := shellRun(t, line, masters, vars)
		if code != want {
			t.Fatalf("%q exited %d, want %d:\n%s", line, code, want, out)
		}
		return out
	}
}

// aofRig is cmdRig with AOF (appendfsync always).
func aofRig(t *testing.T, n int) ([]*redisproc.Server, []string, func(line string, want int) string) {
	t.Helper()
	return cmdRig(t, n, redisproc.Config{AppendOnly: true})
}

// TestReconfigRecover: after every master restarted (AOF on: the records
// survive, of another run), status exits 1 and says what to run, repair is
// refused, and recover writes the file's set at the next epoch, publishes
// it and makes status whole again; a file with a password in a master's
// line is refused without showing it.
func TestReconfigRecover(t *testing.T) {
	servers, masters, run := aofRig(t, 3)
	run("quorumlock reconfig init --config-file masters.conf --max-key-ttl 200ms", exitOK)
	run("quorumlock reconfig status --config-file masters.conf", exitOK)
	for _, s := range servers {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	out := run("quorumlock reconfig status --config-file masters.conf", exitFail)
	if !strings.Contains(out, "only 0 of 3 masters hold epoch 1 of their current run") || !strings.Contains(out, "recover if repair is refused") {
		t.Fatalf("status after the restarts:\n%s", out)
	}
	out = run("quorumlock reconfig repair --config-file masters.conf", exitFail)
	if !strings.Contains(out, "epoch 1 is held by 0 masters, fewer than a quorum of its 3 masters, quorum 2") {
		t.Fatalf("repair after the restarts:\n%s", out)
	}
	out = run("quorumlock reconfig recover --config-file masters.conf", exitOK)
	if !strings.Contains(out, "recovered: epoch 1's 3 masters, quorum 2 as epoch 2") || !strings.Contains(out, "published: masters.conf (epoch 2)") {
		t.Fatalf("recover:\n%s", out)
	}
	cfg, err := reconfig.ReadFile("masters.conf")
	if err != nil || cfg.Epoch != 2 {
		t.Fatalf("the file after recover: %+v, %v", cfg, err)
	}
	run("quorumlock reconfig status --config-file masters.conf", exitOK)
	out = run("quorumlock reconfig recover --config-file masters.conf", exitFail)
	if !strings.Contains(out, "run repair") {
		t.Fatalf("recover with nothing lost:\n%s", out)
	}

	text := strings.Replace(cfg.Text(), "master "+masters[0], "master redis://u:hunter2@"+masters[0], 1)
	if err := os.WriteFile("bad.conf", []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out = run("quorumlock reconfig status --config-file bad.conf", exitFail)
	if strings.Contains(out, "hunter2") || !strings.Contains(out, "not shown") {
		t.Fatalf("a file with a password:\n%s", out)
	}
}

// stepUnpublished runs the step from masters.conf's configuration to one
// that adds every other master of masters, to its commit and seals, without
// publishing it; it returns the changer and both configurations.
func stepUnpublished(t *testing.T, masters []string) (*reconfig.Changer, reconfig.Config, reconfig.Config) {
	t.Helper()
	e1, err := reconfig.ReadFile("masters.conf")
	if err != nil {
		t.Fatal(err)
	}
	ch := changerT(t, masters)
	e2, err := reconfig.Next(e1, masters)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Step(t.Context(), e1, e2); err != nil {
		t.Fatal(err)
	}
	return ch, e1, e2
}

// changerT is a reconfig.Changer on masters, its connections closed with
// the test.
func changerT(t *testing.T, masters []string) *reconfig.Changer {
	t.Helper()
	cs := map[string]redis.Cmdable{}
	for _, m := range masters {
		c := redis.NewClient(&redis.Options{Addr: m, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		cs[m] = c
	}
	return &reconfig.Changer{Masters: cs}
}

// TestRunWithConfigFile: quorumlock run --config-file locks on the file's
// masters with its record. After a step commits and before it is
// published, a run on the old file is refused as stale, waits for the
// file, and locks on the new configuration once it is published; a file
// naming a master --nodes does not is a usage error.
func TestRunWithConfigFile(t *testing.T) {
	var masters []string
	for range 6 {
		masters = append(masters, redisproc.StartT(t, redisproc.Config{}).Addr())
	}
	t.Chdir(t.TempDir())
	vars := map[string]string{"QUORUMLOCK_NODES": strings.Join(masters, ",")}
	out, code := shellRun(t, "quorumlock reconfig init --nodes $M1,$M2,$M3,$M4,$M5 --config-file masters.conf --max-key-ttl 1s", masters, vars)
	if code != exitOK {
		t.Fatalf("init: %d\n%s", code, out)
	}
	out, code = shellRun(t, "quorumlock run --config-file masters.conf --ttl 1s --verbose job true", masters, vars)
	if code != exitOK || !strings.Contains(out, "epoch 1, 5 masters, quorum 3") {
		t.Fatalf("run on epoch 1: %d\n%s", code, out)
	}
	out, code = shellRun(t, "quorumlock run --config-file masters.conf --ttl 10s job true", masters, vars)
	if code == exitOK || !strings.Contains(out, "above the configuration's longest key life") {
		t.Fatalf("a TTL above the key life: %d\n%s", code, out)
	}

	_, _, e2 := stepUnpublished(t, masters)
	// Committed, not published: the run is refused and waits for the file.
	var stdoutBuf, stderrBuf bytes.Buffer
	stderr := &syncWriter{w: &stderrBuf}
	read := func() string { stderr.mu.Lock(); defer stderr.mu.Unlock(); return stderrBuf.String() }
	e := &env{stdout: &syncWriter{w: &stdoutBuf}, stderr: stderr, getenv: func(k string) string { return vars[k] }}
	done := make(chan int, 1)
	go func() {
		done <- dispatch(context.Background(), []string{"run", "--config-file", "masters.conf", "--ttl", "1s", "--wait", "20s", "--verbose", "job", "true"}, e)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(read(), "waiting for masters.conf to publish") {
		select {
		case code := <-done:
			t.Fatalf("run ended (%d) without waiting for the file:\n%s", code, read())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not wait for the file:\n%s", read())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := reconfig.WriteFile("masters.conf", e2); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != exitOK || !strings.Contains(read(), "epoch 2, 6 masters, quorum 4") || !strings.Contains(read(), "QLCONFIG stale 2 ") {
		t.Fatalf("run after the file was published: %d\n%s", code, read())
	}

	vars["QUORUMLOCK_NODES"] = strings.Join(masters[:5], ",")
	out, code = shellRun(t, "quorumlock run --config-file masters.conf --ttl 1s job true", masters, vars)
	if code != runUsage || !strings.Contains(out, masters[5]+" of masters.conf is not among $QUORUMLOCK_NODES") {
		t.Fatalf("a master not among the nodes: %d\n%s", code, out)
	}
}

// TestReconfigRecoverFromMasters: a quorum restarts (AOF: records of
// another run); the operator runs set before recovering: the one master
// that did not restart takes epoch 2 of four masters and the step is
// refused. recover from the file is then refused (a master holds a later
// configuration of another set); recover --from-masters recovers that
// configuration at epoch 3, after its wait, and publishes it.
func TestReconfigRecoverFromMasters(t *testing.T) {
	servers, masters, run := aofRig(t, 4)
	run("quorumlock reconfig init --nodes $M1,$M2,$M3 --config-file masters.conf --max-key-ttl 200ms", exitOK)
	e1, err := reconfig.ReadFile("masters.conf")
	if err != nil {
		t.Fatal(err)
	}
	ch := changerT(t, masters)
	for _, s := range servers[:2] {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	// set's first step, as the command would run it after the wait.
	e2, err := reconfig.Next(e1, masters)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := ch.Read(t.Context(), masters[2])
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Now.Before(rec.Sealed.Add(rec.Wait)) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ch.Step(t.Context(), e1, e2); !errors.Is(err, reconfig.ErrRefused) {
		t.Fatalf("the step with a quorum restarted: %v, want refused", err)
	}
	out := run("quorumlock reconfig recover --config-file masters.conf", exitFail)
	if !strings.Contains(out, "the newest configuration the masters recorded is epoch 2 (4 masters") || !strings.Contains(out, "--from-masters") {
		t.Fatalf("recover from the file:\n%s", out)
	}
	out = run("quorumlock reconfig recover --config-file masters.conf --from-masters", exitOK)
	if !strings.Contains(out, "the masters hold epoch 2 (4 masters, quorum 3), masters.conf has 1: recovering epoch 2") || !strings.Contains(out, "waiting") || !strings.Contains(out, "recovered: epoch 2's 4 masters, quorum 3 as epoch 3") {
		t.Fatalf("recover --from-masters:\n%s", out)
	}
	run("quorumlock reconfig status --config-file masters.conf", exitOK)
}

// TestReconfigUsageErrors: a bad subcommand or flag is one line on stderr
// naming it, exit 64, checked before the masters are looked for; a
// subcommand that looks like a URL is not echoed (it may hold a password);
// -h prints the usage on stdout, exit 0.
func TestReconfigUsageErrors(t *testing.T) {
	t.Setenv(envNodes, "")
	t.Setenv(envNodesFile, "")
	for _, tc := range []struct {
		args []string
		say  string
	}{
		{[]string{"reconfig", "bogus", "--config-file", "x"}, `quorumlock reconfig: unknown subcommand "bogus" (want init, set, status, repair or recover)`},
		{[]string{"reconfig", "redis://:Secret-pw-7@10.0.0.9:6379"}, "quorumlock reconfig: unknown subcommand (want"},
		{[]string{"reconfig", "set", "--bogus"}, "quorumlock reconfig set: flag provided but not defined: -bogus"},
		{[]string{"reconfig", "init", "--max-key-ttl", "soon"}, `quorumlock reconfig init: invalid value "soon" for flag -max-key-ttl`},
	} {
		code, out, stderr := runMain(t, tc.args...)
		if code != exitUsage || out != "" || !strings.HasPrefix(stderr, tc.say) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "Secret-pw-7") {
			t.Errorf("%q: exit %d, want %d and one line on stderr starting %q; stdout %q, stderr:\n%s", tc.args, code, exitUsage, tc.say, out, stderr)
		}
	}
	if code, out, stderr := runMain(t, "reconfig", "set", "-h"); code != exitOK || !strings.Contains(out, "usage: quorumlock reconfig") || !strings.Contains(out, "-joint") || stderr != "" {
		t.Errorf("reconfig set -h: exit %d, stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
}

// TestReconfigInitRefusesAKeyLife: a longest key life init cannot use is
// a usage error naming it.
func TestReconfigInitRefusesAKeyLife(t *testing.T) {
	t.Chdir(t.TempDir())
	vars := map[string]string{"QUORUMLOCK_NODES": "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"}
	for _, v := range []string{"1.5ms", "-1s", "25h"} {
		out, code := shellRun(t, "quorumlock reconfig init --config-file masters.conf --max-key-ttl "+v, nil, vars)
		if code != exitUsage || !strings.Contains(out, "--max-key-ttl ") || !strings.Contains(out, "want whole milliseconds, positive, at most 24h0m0s") {
			t.Errorf("--max-key-ttl %s: exit %d, want %d:\n%s", v, code, exitUsage, out)
		}
	}
}

// TestReconfigSetJoint: set --joint replaces two of three masters in two
// steps through joint mode, printing the joint configuration and the
// commit point of each set; interrupted after the step into joint mode
// (committed, not published), set resumes it, leaves joint mode, and goes
// on to its target one master per step.
func TestReconfigSetJoint(t *testing.T) {
	_, masters, run := cmdRig(t, 6, redisproc.Config{})
	runLine := func(line string) string { t.Helper(); return run(line, exitOK) }
	runLine("quorumlock reconfig init --nodes $M1,$M2,$M3 --config-file masters.conf --max-key-ttl 200ms")
	out := runLine("quorumlock reconfig set --joint --config-file masters.conf $M1,$M4,$M5")
	for _, want := range []string{
		"step 1 of 2:", "-> joint: 3 masters, quorum 2, and the old 3, quorum 2 (5 in all)",
		"commit point: 3 of 3 (quorum 2) old, 3 of 3 (quorum 2) and 3 of 3 (quorum 2) new", // into joint mode: each set of the joint one
		"commit point: 3 of 3 (quorum 2) old, 3 of 3 (quorum 2) new",                       // out of it: the old set's quorum, and the new set's
		"step 2 of 2:", "done: epoch 3, 3 masters, quorum 2",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("set --joint: no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "step 3") {
		t.Fatalf("set --joint took more than two steps:\n%s", out)
	}
	cur, err := reconfig.ReadFile("masters.conf")
	if err != nil || cur.Epoch != 3 || cur.Joint() || strings.Join(cur.Masters, ",") != strings.Join([]string{masters[0], masters[3], masters[4]}, ",") {
		t.Fatalf("published: %+v, %v", cur, err)
	}

	// Into joint mode again, committed, not published: set resumes.
	ch := changerT(t, masters)
	steps, err := reconfig.Joint(cur, []string{masters[0], masters[1], masters[5]})
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Step(t.Context(), cur, steps[0]); err != nil {
		t.Fatal(err)
	}
	out = run("quorumlock reconfig status --config-file masters.conf", exitFail)
	if !strings.Contains(out, "epoch 4 (joint: 3 masters, quorum 2, and the old 3, quorum 2 (5 in all)") || !strings.Contains(out, "run set again") {
		t.Fatalf("status during the joint step, not published:\n%s", out)
	}
	out = runLine("quorumlock reconfig set --config-file masters.conf $M1,$M2,$M6,$M3")
	for _, want := range []string{"resuming: epoch 4 is on the masters, masters.conf has 3", "step 1 of 2:", "done: epoch 6, 4 masters, quorum 3"} {
		if !strings.Contains(out, want) {
			t.Fatalf("set after an interrupted joint step: no %q in:\n%s", want, out)
		}
	}
}

// TestReconfigJointAbort: set --joint to a new set that cannot be reached
// writes nothing (the masters keep epoch 1 and its clients lock); and a
// joint configuration whose new set is lost after its step was published
// is left back to the old set by set with the old set (an abort: its
// commit point needs a quorum of the old set only), after which a client
// that reloads locks again; and so is a joint step that committed but was
// never published (set interrupted) when its new set is lost.
func TestReconfigJointAbort(t *testing.T) {
	servers, masters, run := cmdRig(t, 9, redisproc.Config{})
	run("quorumlock reconfig init --nodes $M1,$M2,$M3 --config-file masters.conf --max-key-ttl 200ms", exitOK)
	ctx := context.Background()
	clients, err := reconfig.NewClients(ctx, reconfig.FileSource("masters.conf"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close(ctx)
	lockOnce := func() error {
		c, _ := clients.Client()
		m, err := c.NewMutex("jobs:abort", redlock.WithTTL(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		lease, err := m.Lock(lctx)
		if err == nil {
			err = lease.Unlock(ctx)
		}
		return err
	}

	// The new set {1,4,5} with masters 4 and 5 down: refused, nothing written.
	if err := servers[3].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := servers[4].Stop(); err != nil {
		t.Fatal(err)
	}
	out := run("quorumlock reconfig set --joint --config-file masters.conf $M1,$M4,$M5", exitFail)
	if !strings.Contains(out, "nothing written") {
		t.Fatalf("set --joint to unreachable masters:\n%s", out)
	}
	run("quorumlock reconfig status --nodes $M1,$M2,$M3 --config-file masters.conf", exitOK)
	if err := lockOnce(); err != nil {
		t.Fatalf("epoch 1's client after the refused change: %v", err)
	}

	// Joint mode to {1,6,7}, published; then masters 6 and 7 are lost.
	e1, err := reconfig.ReadFile("masters.conf")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := reconfig.Joint(e1, []string{masters[0], masters[5], masters[6]})
	if err != nil {
		t.Fatal(err)
	}
	live := append(slices.Clone(masters[:3]), masters[5:]...)
	if err := changerT(t, live).Step(ctx, e1, steps[0]); err != nil {
		t.Fatal(err)
	}
	if err := reconfig.WriteFile("masters.conf", steps[0]); err != nil {
		t.Fatal(err)
	}
	if err := servers[5].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := servers[6].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := lockOnce(); !errors.Is(err, redlock.ErrConfigStale) {
		t.Fatalf("epoch 1's client after the joint step: %v, want ErrConfigStale", err)
	}
	if _, err := clients.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lockOnce(); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("a joint client with the new set lost: %v, want ErrNotObtained", err)
	}
	out = run("quorumlock reconfig set --config-file masters.conf $M1,$M2,$M3", exitOK)
	for _, want := range []string{"leaving joint mode first, to its old set (an abort)", "done: epoch 3, 3 masters, quorum 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the abort: no %q in:\n%s", want, out)
		}
	}
	if err := lockOnce(); !errors.Is(err, redlock.ErrConfigStale) {
		t.Fatalf("the joint client after the abort: %v, want ErrConfigStale", err)
	}
	if _, err := clients.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lockOnce(); err != nil {
		t.Fatalf("epoch 3's client: %v", err)
	}

	// Joint mode to {1,8,9} committed, not published (set interrupted);
	// masters 8 and 9 lost: set with the old set aborts it from the
	// masters' record.
	e3, err := reconfig.ReadFile("masters.conf")
	if err != nil {
		t.Fatal(err)
	}
	steps, err = reconfig.Joint(e3, []string{masters[0], masters[7], masters[8]})
	if err != nil {
		t.Fatal(err)
	}
	live = append(slices.Clone(masters[:3]), masters[7:]...)
	if err := changerT(t, live).Step(ctx, e3, steps[0]); err != nil {
		t.Fatal(err)
	}
	if err := servers[7].Stop(); err != nil {
		t.Fatal(err)
	}
	if err := servers[8].Stop(); err != nil {
		t.Fatal(err)
	}
	out = run("quorumlock reconfig set --config-file masters.conf $M1,$M2,$M3", exitOK)
	for _, want := range []string{"epoch 4 (joint) is on the masters, masters.conf has 3: aborting it, back to its old set", "done: epoch 5, 3 masters, quorum 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("the abort of an unpublished joint step: no %q in:\n%s", want, out)
		}
	}
	if err := lockOnce(); !errors.Is(err, redlock.ErrConfigStale) {
		t.Fatalf("epoch 3's client after the abort: %v, want ErrConfigStale", err)
	}
	if _, err := clients.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lockOnce(); err != nil {
		t.Fatalf("epoch 5's client: %v", err)
	}
}

// TestRunExitCodeInJointMode: quorumlock run tells "held elsewhere" from
// "masters unavailable" by the configuration's sets. With the new set's
// two other masters down and the old set free, the lock is unavailable,
// not held elsewhere, though fewer than the first set's quorum failed of
// all five nodes.
func TestRunExitCodeInJointMode(t *testing.T) {
	j := reconfig.Config{Epoch: 2, Masters: []string{"a:1", "d:1", "e:1"}, Quorum: 2, Old: []string{"a:1", "b:1", "c:1"}, OldQuorum: 2, MaxKeyTTL: time.Second, DriftFactor: 0.01}
	down := errors.New("connection refused")
	qe := &redlock.QuorumError{Op: "lock", Key: "k", Quorum: 2, Nodes: []redlock.NodeResult{
		{Node: "a:1"}, {Node: "d:1", Err: down}, {Node: "e:1", Err: down}, {Node: "b:1"}, {Node: "c:1"},
	}}
	rc := &runConfig{conflict: 75}
	if got := rc.notObtainedStatus(qe, &j); got != runUnavailable {
		t.Errorf("joint, the new set out: exit %d, want %d (unavailable)", got, runUnavailable)
	}
	taken := &redlock.QuorumError{Op: "lock", Key: "k", Quorum: 2, Nodes: []redlock.NodeResult{
		{Node: "a:1", Err: redlock.ErrNodeTaken}, {Node: "d:1", Err: down}, {Node: "e:1", Err: redlock.ErrNodeTaken}, {Node: "b:1", Err: redlock.ErrNodeTaken}, {Node: "c:1"},
	}}
	if got := rc.notObtainedStatus(taken, &j); got != 75 {
		t.Errorf("joint, held elsewhere, one master down: exit %d, want 75 (conflict)", got)
	}
}
