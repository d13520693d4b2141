package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// The bounds of the run tests: how long any one wait may take before the
// test fails (failsafes, not measurements).
const (
	procLimit = 30 * time.Second
)

// checkNoOverlap reports the first place where the log shows two holders:
// a line of one job between another job's "<id> start" and "<id> end".
func checkNoOverlap(lines []string) error {
	holder := ""
	for i, l := range lines {
		id, ev, _ := strings.Cut(l, " ")
		switch {
		case holder != "" && id != holder:
			return fmt.Errorf("line %d %q while %s holds the lock", i+1, l, holder)
		case ev == "start":
			holder = id
		case ev == "end":
			holder = ""
		}
	}
	return nil
}

func TestCheckNoOverlapCatchesOverlap(t *testing.T) {
	if err := checkNoOverlap([]string{"a start", "a tick", "a end", "b start", "b end"}); err != nil {
		t.Errorf("a clean log: %v", err)
	}
	if err := checkNoOverlap([]string{"a start", "a tick", "b start", "a end", "b end"}); err == nil {
		t.Error("an overlap was not reported")
	}
}

// TestRunNeverOverlaps: four hosts run a job that appends to one file under
// the same lock, all at once, each waiting as long as it takes; the file
// shows one job at a time, and every job ran.
func TestRunNeverOverlaps(t *testing.T) {
	addrs := startMasters(t, 3)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	job := script(t, dir, "job.sh", `echo "$ID start" >> "$LOG"
for i in 1 2 3 4 5; do echo "$ID tick" >> "$LOG"; sleep 0.02; done
echo "$ID end" >> "$LOG"
`)
	var ps []*proc
	for i := range 4 {
		id := fmt.Sprintf("h%d", i)
		ps = append(ps, startProc(t, id, []string{nodesEnv(addrs), "ID=" + id, "LOG=" + log},
			"run", "--wait", "-1", "--ttl", "2s", "jobs:nightly", "--", job))
	}
	for _, p := range ps {
		if code := p.wait(procLimit); code != 0 {
			t.Fatalf("%s: exit %d; stderr:\n%s", p.name, code, p.stderr.String())
		}
	}
	lines := readLog(t, log)
	if err := checkNoOverlap(lines); err != nil {
		t.Fatalf("%v; log:\n%s", err, strings.Join(lines, "\n"))
	}
	for i := range 4 {
		if !logHas(lines, fmt.Sprintf("h%d end", i)) {
			t.Errorf("h%d did not run; log:\n%s", i, strings.Join(lines, "\n"))
		}
	}
}

// TestRunKillsChildWhenMajorityDies: while the child runs, two of three
// masters are killed. run cannot renew and terminates the child before the
// lease's validity ends. The masters come back at once with their keys
// (AOF) for a second host, whose own command starts only once run's keys
// have expired on a quorum: that is the earliest anyone else can hold the
// lock, and the first host's child must be gone by then. The child either
// exits on SIGTERM or ignores it and is killed with SIGKILL.
func TestRunKillsChildWhenMajorityDies(t *testing.T) {
	for _, tc := range []struct {
		name, trap string
		term       string // the line the child's TERM trap logs
	}{
		{"sigterm", `trap 'echo "A term" >> "$LOG"; exit 5' TERM`, "A term"},
		{"sigkill", `trap 'echo "A term-ignored" >> "$LOG"' TERM`, "A term-ignored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Appendfsync always: the keys survive the kill. A reaches the
			// masters through links of its own, B directly.
			var srvs []*redisproc.Server
			var links []*link
			var aAddrs, bAddrs []string
			for range 3 {
				srv := redisproc.StartT(t, redisproc.Config{AppendOnly: true})
				l := newLink(t, srv.Addr())
				srvs, links = append(srvs, srv), append(links, l)
				aAddrs, bAddrs = append(aAddrs, l.Addr()), append(bAddrs, srv.Addr())
			}
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			a := startProc(t, "A", []string{nodesEnv(aAddrs), "LOG=" + log}, "run", "--ttl", "2s", "--grace", "300ms", "jobs:majority", "--",
				script(t, dir, "a.sh", tc.trap+`
echo "A start" >> "$LOG"
while :; do echo "A tick" >> "$LOG"; sleep 0.02; done
`))
			a.waitWhile(procLimit, "A's child to start", func() bool { return logHas(readLog(t, log), "A tick") })
			b := startProc(t, "B", []string{nodesEnv(bAddrs), "LOG=" + log}, "run", "--wait", "-1", "--ttl", "2s", "jobs:majority", "--",
				script(t, dir, "b.sh", `echo "B start" >> "$LOG"; echo "B end" >> "$LOG"`))

			for _, srv := range srvs[:2] {
				if err := srv.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			// A must not reach the masters again; B may, once they are back.
			for _, l := range links[:2] {
				l.Cut()
			}
			for _, srv := range srvs[:2] {
				if err := srv.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			if code := a.wait(procLimit); code != runLost {
				t.Errorf("A: exit %d, want %d (lock lost); stderr:\n%s", code, runLost, a.stderr.String())
			}
			if code := b.wait(procLimit); code != 0 {
				t.Fatalf("B: exit %d; stderr:\n%s", code, b.stderr.String())
			}
			lines := readLog(t, log)
			term, bStart := indexOf(lines, tc.term), indexOf(lines, "B start")
			if term < 0 || bStart < 0 || term > bStart {
				t.Fatalf("A's child got no SIGTERM before B started (%q at line %d, B start at %d); log:\n%s\nA's stderr:\n%s",
					tc.term, term+1, bStart+1, strings.Join(lines, "\n"), a.stderr.String())
			}
			for _, l := range lines[bStart:] {
				if strings.HasPrefix(l, "A ") {
					t.Fatalf("A's child wrote %q after B started; log:\n%s", l, strings.Join(lines, "\n"))
				}
			}
			want := "sent SIGTERM to the command"
			if tc.name == "sigkill" {
				want = "the command outlived --grace: sent SIGKILL"
			}
			if !strings.Contains(a.stderr.String(), want) {
				t.Errorf("A's stderr does not say %q:\n%s", want, a.stderr.String())
			}
		})
	}
}

// extendSHA is the SHA1 of redisnode's extend script, as EVALSHA names it.
func extendSHA(t *testing.T) string {
	t.Helper()
	src, err := redisnode.Scripts.ReadFile("scripts/extend.lua")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// extendsBy returns the SLOWLOG ids (every command is logged: slower than
// 0us) of the extend scripts run with a value of the process pid, above
// after.
func extendsBy(t *testing.T, c *redis.Client, sha string, pid int, after int64) []int64 {
	t.Helper()
	entries, err := c.SlowLogGet(context.Background(), -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range entries {
		if e.ID <= after || len(e.Args) < 5 || !strings.EqualFold(e.Args[0], "evalsha") || e.Args[1] != sha {
			continue
		}
		if strings.Contains(e.Args[4], "pid="+strconv.Itoa(pid)) {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

func lastSlowID(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	entries, err := c.SlowLogGet(context.Background(), 1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		return -1
	}
	return entries[0].ID
}

// TestRunStoppedPastValidity: the run process itself is stopped (SIGSTOP)
// while its child works, until its keys have expired everywhere; another
// host takes the lock and starts its own child. The first child, which the
// stop did not reach, goes on writing meanwhile: only fencing protects a
// resource from that (docs/operations.md). When run resumes it kills its
// child at once (SIGKILL, no SIGTERM first), exits with 124, and never
// renews the lease it lost: no extend of its token reaches any master
// after the resume (every command is in the masters' SLOWLOG), while
// before the stop its renewals did.
func TestRunStoppedPastValidity(t *testing.T) {
	addrs := startMasters(t, 3, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "100000")
	var admins []*redis.Client
	for _, a := range addrs {
		admins = append(admins, admin(t, &redis.Options{Addr: a}))
	}
	dir := t.TempDir()
	log, pidFile, stopB := filepath.Join(dir, "log"), filepath.Join(dir, "a.pid"), filepath.Join(dir, "stop-b")
	const name = "jobs:stopped"
	a := startProc(t, "A", []string{nodesEnv(addrs), "LOG=" + log, "PIDFILE=" + pidFile}, "run", "--ttl", "1s", "--grace", "200ms", name, "--",
		script(t, dir, "a.sh", `trap 'echo "A term" >> "$LOG"; exit 5' TERM
echo $$ > "$PIDFILE"
echo "A start" >> "$LOG"
while :; do echo "A tick" >> "$LOG"; sleep 0.02; done
`))
	runPID := a.cmd.Process.Pid
	sha := extendSHA(t)
	a.waitWhile(procLimit, "A's child to start", func() bool { return logHas(readLog(t, log), "A tick") })
	a.waitWhile(procLimit, "a renewal by A", func() bool { return len(extendsBy(t, admins[0], sha, runPID, -1)) > 0 })

	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, procLimit, "A's keys to expire on every master", func() bool {
		for _, c := range admins {
			if n, err := c.Exists(context.Background(), name).Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	b := startProc(t, "B", []string{nodesEnv(addrs), "LOG=" + log, "STOP=" + stopB}, "run", "--wait", "-1", "--ttl", "2s", name, "--",
		script(t, dir, "b.sh", `echo "B start" >> "$LOG"
while [ ! -f "$STOP" ]; do sleep 0.02; done
echo "B end" >> "$LOG"
`))
	b.waitWhile(procLimit, "B's child to start, and A's child to write after it", func() bool {
		lines := readLog(t, log)
		i := indexOf(lines, "B start")
		return i >= 0 && logHas(lines[i:], "A tick")
	})
	marks := make([]int64, len(admins))
	for i, c := range admins {
		marks[i] = lastSlowID(t, c)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(procLimit); code != runLost {
		t.Errorf("A: exit %d, want %d; stderr:\n%s", code, runLost, a.stderr.String())
	}
	if !strings.Contains(a.stderr.String(), "sent SIGKILL to the command at once") {
		t.Errorf("A's stderr does not say it killed its child at once:\n%s", a.stderr.String())
	}
	lines := readLog(t, log)
	if logHas(lines, "A term") {
		t.Errorf("A's child got SIGTERM after the resume, not SIGKILL at once; log:\n%s", strings.Join(lines, "\n"))
	}
	b2, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	childPID, _ := strconv.Atoi(strings.TrimSpace(string(b2)))
	// The group's processes were killed; the last zombies (the child's own
	// children, reparented) are reaped by init soon after.
	waitUntil(t, procLimit, "A's child's process group to be gone", func() bool {
		return errors.Is(syscall.Kill(-childPID, 0), syscall.ESRCH)
	})
	for i, c := range admins {
		if ids := extendsBy(t, c, sha, runPID, marks[i]); len(ids) > 0 {
			t.Errorf("master %s ran %d extends of A's token after the resume (slowlog ids %v)", addrs[i], len(ids), ids)
		}
		l, err := lockkey.Read(context.Background(), c, name)
		if err != nil || !strings.Contains(l.Value, "pid="+strconv.Itoa(b.cmd.Process.Pid)) {
			t.Errorf("master %s: the lock is not B's after A exited: %+v, %v", addrs[i], l, err)
		}
	}
	if err := os.WriteFile(stopB, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := b.wait(procLimit); code != 0 {
		t.Errorf("B: exit %d; stderr:\n%s", code, b.stderr.String())
	}
}

// holdLock takes name on addrs in this process and returns the lease
// (released, and the client closed, when the test ends).
func holdLock(t *testing.T, addrs []string, name string) *redlock.Lease {
	t.Helper()
	ns, err := redisnode.DialAll(addrs...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := redlock.New(ns.Redlock(), redlock.WithOwnerLabel("test holder"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.NewMutex(name, redlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitOnAll(t, addrs, name, 1)
	t.Cleanup(func() {
		_ = l.Unlock(context.Background())
		_ = c.Close(context.Background())
		_ = ns.Close()
	})
	return l
}

// TestRunExitStatus: the command's own status when it ran to its end
// (128+N after signal N), and run's documented statuses otherwise.
func TestRunExitStatus(t *testing.T) {
	addrs := startMasters(t, 3)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	holdLock(t, addrs, "jobs:held")
	free, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("127.0.0.1:%d", free)
	for _, tc := range []struct {
		name  string
		nodes []string
		args  []string
		code  int
		say   string
	}{
		{"own status", addrs, []string{"jobs:a", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"killed by a signal", addrs, []string{"jobs:a", "--", "sh", "-c", "kill -USR1 $$"}, 128 + int(syscall.SIGUSR1), ""},
		{"without --", addrs, []string{"jobs:a", "true"}, 0, ""},
		{"held elsewhere", addrs, []string{"jobs:held", "--", "true"}, runNotObtained, ""},
		{"held elsewhere, verbose", addrs, []string{"--verbose", "jobs:held", "--", "true"}, runNotObtained, `quorumlock run: redlock: lock not obtained "jobs:held": 0 of 3 nodes, quorum 2;`},
		{"held elsewhere, own code", addrs, []string{"--conflict-exit-code", "9", "jobs:held", "--", "true"}, 9, ""},
		{"held elsewhere, conflict code 0", addrs, []string{"--conflict-exit-code", "0", "jobs:held", "--", "true"}, 0, ""},
		{"held elsewhere past --wait", addrs, []string{"--wait", "300ms", "--verbose", "jobs:held", "--", "true"}, runNotObtained, "lock not obtained"},
		{"majority unreachable", []string{addrs[0], down, fmt.Sprintf("127.0.0.1:%d", free+1)}, []string{"jobs:a", "--", "true"}, runUnavailable, "connection refused"},
		{"masters in restart quarantine", addrs, []string{"--quarantine", "1h", "jobs:a", "--", "true"}, runUnavailable, "quarantined: "},
		{"not found", addrs, []string{"jobs:a", "--", filepath.Join(dir, "nonexistent")}, runNotFound, "no such file or directory"},
		{"not executable", addrs, []string{"jobs:a", "--", notExec}, runCannotExec, "permission denied"},
		{"bad flag", addrs, []string{"--ttl", "soon", "jobs:a", "--", "true"}, runUsage, `invalid value "soon" for flag -ttl`},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			p := startProc(t, tc.name, []string{nodesEnv(tc.nodes)}, append([]string{"run"}, tc.args...)...)
			code := p.wait(procLimit)
			stderr := p.stderr.String()
			if code != tc.code || !strings.Contains(stderr, tc.say) {
				t.Fatalf("exit %d, want %d; stderr (want %q):\n%s", code, tc.code, tc.say, stderr)
			}
			switch {
			case tc.say == "" && stderr != "":
				t.Errorf("stderr is not empty:\n%s", stderr)
			case tc.say != "" && !strings.Contains(strings.Join(tc.args, " "), "--verbose") && strings.Count(stderr, "\n") != 1:
				t.Errorf("stderr is not one line:\n%s", stderr)
			}
		})
	}
}

// TestRunSignals: SIGINT, SIGTERM, SIGHUP and SIGQUIT while run waits for
// the lock end the wait with 128+N and the command never starts; while
// the command runs, they reach it (its trap records which) and run exits
// with the command's status, releasing the lock.
func TestRunSignals(t *testing.T) {
	addrs := startMasters(t, 3)
	holdLock(t, addrs, "jobs:busy")
	dir := t.TempDir()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		name := strings.TrimPrefix(sig.String(), "")
		t.Run("waiting/"+strconv.Itoa(int(sig)), func(t *testing.T) {
			started := filepath.Join(dir, fmt.Sprintf("started-%d", sig))
			w := startProc(t, "W", []string{nodesEnv(addrs)}, "run", "--verbose", "--wait", "-1", "jobs:busy", "--", "touch", started)
			w.waitStderr(`waiting for lock "jobs:busy"`, procLimit)
			if err := w.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := w.wait(procLimit); code != 128+int(sig) {
				t.Errorf("%s while waiting: exit %d, want %d; stderr:\n%s", name, code, 128+int(sig), w.stderr.String())
			}
			if !strings.Contains(w.stderr.String(), "the command was not started") {
				t.Errorf("stderr does not say the command was not started:\n%s", w.stderr.String())
			}
			if _, err := os.Stat(started); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the command ran after %s (stat: %v)", name, err)
			}
		})
		t.Run("running/"+strconv.Itoa(int(sig)), func(t *testing.T) {
			ready, got := filepath.Join(dir, fmt.Sprintf("ready-%d", sig)), filepath.Join(dir, fmt.Sprintf("got-%d", sig))
			job := script(t, dir, fmt.Sprintf("trap-%d.sh", sig), `for s in INT TERM HUP QUIT; do trap "echo $s > '`+got+`'; exit 7" $s; done
touch '`+ready+`'
while :; do sleep 0.02; done
`)
			r := startProc(t, "R", []string{nodesEnv(addrs)}, "run", "jobs:signals", "--", job)
			r.waitWhile(procLimit, "the command's traps", func() bool { _, err := os.Stat(ready); return err == nil })
			if err := r.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := r.wait(procLimit); code != 7 {
				t.Errorf("%s while running: exit %d, want the command's 7; stderr:\n%s", name, code, r.stderr.String())
			}
			b, err := os.ReadFile(got)
			if want := strings.TrimPrefix(strings.ToUpper(unixName(sig)), "SIG"); err != nil || strings.TrimSpace(string(b)) != want {
				t.Errorf("the command's trap recorded %q (%v), want %s", b, err, want)
			}
			// The lock was released: a new run takes it at once.
			if code, _, stderr := runMain(t, "run", "--nodes", strings.Join(addrs, ","), "jobs:signals", "--", "true"); code != 0 {
				t.Errorf("the lock was not released: exit %d: %s", code, stderr)
			}
		})
	}
}

// unixName is the signal's name as sh's trap takes it.
func unixName(sig syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT"}[sig]
}

// TestRunMinHoldAndCooldown: two hosts. With --min-hold, a command that
// ends early keeps the lock until the minimum hold has passed, so the other
// host cannot run it again in the meantime. With --cooldown, run exits
// at once after a command that exited 0 and leaves the lock held for the
// cooldown (at most one run per window, even with run gone), while a
// failed command releases it for another host to retry; without either,
// the lock is free as soon as run exits.
func TestRunMinHoldAndCooldown(t *testing.T) {
	addrs := startMasters(t, 3)
	env := []string{nodesEnv(addrs)}
	try := func(name string) int { // the second host, one attempt
		t.Helper()
		p := startProc(t, "B", env, "run", name, "--", "true")
		return p.wait(procLimit)
	}

	t.Run("min-hold", func(t *testing.T) {
		a := startProc(t, "A", env, "run", "--verbose", "--min-hold", "1500ms", "--ttl", "1s", "jobs:minhold", "--", "true")
		a.waitStderr("holding lock \"jobs:minhold\" until --min-hold", procLimit)
		if code := try("jobs:minhold"); code != runNotObtained {
			t.Errorf("a second host during A's min-hold: exit %d, want %d", code, runNotObtained)
		}
		if code := a.wait(procLimit); code != 0 {
			t.Fatalf("A: exit %d; stderr:\n%s", code, a.stderr.String())
		}
		if code := try("jobs:minhold"); code != 0 {
			t.Errorf("a second host after A's min-hold: exit %d, want 0", code)
		}
	})

	t.Run("cooldown", func(t *testing.T) {
		a := startProc(t, "A", env, "run", "--cooldown", "1s", "--ttl", "1s", "jobs:cooldown", "--", "true")
		if code := a.wait(procLimit); code != 0 {
			t.Fatalf("A: exit %d; stderr:\n%s", code, a.stderr.String())
		}
		// A has exited; its keys stay for TTL + cooldown after its last renewal.
		if code := try("jobs:cooldown"); code != runNotObtained {
			t.Errorf("a second host right after A's clean exit: exit %d, want %d (cooldown)", code, runNotObtained)
		}
		b := startProc(t, "B", env, "run", "--wait", "-1", "jobs:cooldown", "--", "true")
		if code := b.wait(procLimit); code != 0 {
			t.Errorf("a second host waiting out the cooldown: exit %d; stderr:\n%s", code, b.stderr.String())
		}
	})

	t.Run("cooldown after a failure", func(t *testing.T) {
		a := startProc(t, "A", env, "run", "--cooldown", "1h", "jobs:cooldown-failed", "--", "false")
		if code := a.wait(procLimit); code != 1 {
			t.Fatalf("A: exit %d, want the command's 1; stderr:\n%s", code, a.stderr.String())
		}
		if code := try("jobs:cooldown-failed"); code != 0 {
			t.Errorf("a second host after A's failed command: exit %d, want 0 (released for a retry)", code)
		}
	})

	t.Run("neither", func(t *testing.T) {
		a := startProc(t, "A", env, "run", "jobs:plain", "--", "true")
		if code := a.wait(procLimit); code != 0 {
			t.Fatalf("A: exit %d; stderr:\n%s", code, a.stderr.String())
		}
		if code := try("jobs:plain"); code != 0 {
			t.Errorf("a second host after A: exit %d, want 0", code)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		// Both hosts start together, each once per window: exactly one runs.
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		var ps []*proc
		for _, id := range []string{"h1", "h2"} {
			ps = append(ps, startProc(t, id, append(env, "LOG="+log), "run", "--cooldown", "1h", "jobs:once", "--", "sh", "-c", `echo ran >> "$LOG"`))
		}
		codes := map[int]int{}
		for _, p := range ps {
			codes[p.wait(procLimit)]++
		}
		if codes[0] != 1 || codes[runNotObtained] != 1 || len(readLog(t, log)) != 1 {
			t.Errorf("exit statuses %v and %d runs, want one 0 and one %d, one run", codes, len(readLog(t, log)), runNotObtained)
		}
	})
}

// TestRunUsageErrors: each bad command line gives status 64 and one line
// on stderr naming the bad value, never a password.
func TestRunUsageErrors(t *testing.T) {
	const secret = "s3cr3t-Pw"
	good := "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	t.Setenv(envNodes, "")
	t.Setenv(envNodesFile, "")
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "no lock name and command given"},
		{[]string{"--nodes", good, "jobs:a"}, `no command given for lock "jobs:a"`},
		{[]string{"--nodes", good, "jobs:a", "--ttl", "5s", "--", "true"}, `flag "--ttl" after the lock name: flags go before NAME`},
		{[]string{"--bogus", "jobs:a", "true"}, "flag provided but not defined: -bogus"},
		{[]string{"--ttl", "soon", "jobs:a", "true"}, `invalid value "soon" for flag -ttl`},
		{[]string{"--wait", "-2", "jobs:a", "true"}, "want 0 (one attempt), a duration such as 30s, or -1 (wait forever)"},
		{[]string{"--grace", "5s", "jobs:a", "true"}, "--grace 5s does not fit --ttl 10s"},
		{[]string{"--ttl", "5ms", "--grace", "0s", "jobs:a", "true"}, "--ttl 5ms is too short to supervise a command"},
		{[]string{"--ttl", "10ms", "jobs:a", "true"}, "use --grace 1.9ms or less"}, // rounded down: 2ms would not fit
		{[]string{"--grace", "x", "jobs:a", "true"}, `--grace "x": want a non-negative duration`},
		{[]string{"--shared", "--semaphore", "2", "jobs:a", "true"}, "--shared, --exclusive and --semaphore exclude each other"},
		{[]string{"--semaphore", "-1", "jobs:a", "true"}, "--semaphore -1: want at least 1 place"},
		{[]string{"--semaphore", "0", "jobs:a", "true"}, "--semaphore 0: want at least 1 place"},
		{[]string{"--semaphore=0", "--shared", "jobs:a", "true"}, "--shared, --exclusive and --semaphore exclude each other"},
		{[]string{"--fencing", "--shared", "jobs:a", "true"}, "--fencing works with a plain lock only"},
		{[]string{"--quarantine", "5s", "jobs:a", "true"}, "--quarantine 5s is shorter than --ttl plus --cooldown (10s)"},
		{[]string{"--min-hold", "-1s", "jobs:a", "true"}, "--min-hold -1s must not be negative"},
		{[]string{"--conflict-exit-code", "300", "jobs:a", "true"}, "--conflict-exit-code 300: want 0..255"},
		{[]string{"jobs:a", "true"}, "no masters given: use --nodes, --nodes-file, $QUORUMLOCK_NODES or $QUORUMLOCK_NODES_FILE"},
		{[]string{"--nodes", good, "--nodes-file", missing, "jobs:a", "true"}, "give --nodes or --nodes-file, not both"},
		{[]string{"--nodes-file", missing, "jobs:a", "true"}, "no such file or directory"},
		{[]string{"--nodes", "redis://locker:" + secret + "@127.0.0.1:0", "jobs:a", "true"}, `master 1 of --nodes: redisnode: bad port "0"`},
		{[]string{"--nodes", "redis://locker:" + secret + "@127.0.0.1", "jobs:a", "true"}, "master 2 of --nodes is empty"}, // see below
		{[]string{"--nodes", "redis://locker:s3cr,3t-Pw@127.0.0.1:7001,127.0.0.1:7002", "jobs:a", "true"}, "master 1 of --nodes is not a valid address (not shown: the list holds a password; write a ',' in a password as %2C)"},
		{[]string{"--nodes", good + ",127.0.0.1:7001", "jobs:a", "true"}, "masters 1 and 4 of --nodes are both 127.0.0.1:7001"},
		{[]string{"--nodes", "127.0.0.1:7001,127.0.0.1:7002", "jobs:a", "true"}, "2 nodes tolerate no failure"},
	} {
		args := append([]string{"run"}, tc.args...)
		if tc.want == "master 2 of --nodes is empty" {
			args = []string{"run", "--nodes", tc.args[1] + ",", "jobs:a", "true"}
		}
		code, out, stderr := runMain(t, args...)
		if code != runUsage || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 || out != "" {
			t.Errorf("quorumlock %q: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", args, code, out, stderr, runUsage, tc.want)
		}
		if strings.Contains(stderr, secret) || strings.Contains(stderr, "s3cr") {
			t.Errorf("quorumlock %q shows the password: %q", args, stderr)
		}
	}
	if code, out, _ := runMain(t, "run", "-h"); code != exitOK || !strings.Contains(out, "Exit status: COMMAND's own") || !strings.Contains(out, "-conflict-exit-code") {
		t.Errorf("run -h: exit %d\n%s", code, out)
	}
}

// TestRunNodesFromEnvironmentAndFile: the masters and their credentials
// come from $QUORUMLOCK_NODES, $QUORUMLOCK_NODES_FILE or --nodes-file,
// never necessarily from the command line; a wrong password gives status
// 69 and one line that names the master and the server's refusal, without
// the password; a wrong password for one master of three runs the command
// on the lock the other two gave, with one warning naming that master.
func TestRunNodesFromEnvironmentAndFile(t *testing.T) {
	const pw, wrong = "Right-pw-41", "Wrong-pw-42"
	addrs := startMasters(t, 3)
	for _, a := range addrs {
		requirePass(t, a, pw)
	}
	urls := func(p string) []string {
		var us []string
		for _, a := range addrs {
			us = append(us, "redis://:"+p+"@"+a)
		}
		return us
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "nodes")
	if err := os.WriteFile(file, []byte("# the masters\n"+strings.Join(urls(pw), "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envNodes, "")
	t.Setenv(envNodesFile, "")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"QUORUMLOCK_NODES", map[string]string{envNodes: strings.Join(urls(pw), ",")}, nil},
		{"QUORUMLOCK_NODES_FILE", map[string]string{envNodesFile: file}, nil},
		{"--nodes-file", nil, []string{"--nodes-file", file}},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		args := append(append([]string{"run"}, tc.args...), "jobs:auth", "--", "true")
		if code, out, stderr := runMain(t, args...); code != 0 || strings.Contains(out+stderr, pw) {
			t.Errorf("%s: exit %d, output %q %q", tc.name, code, out, stderr)
		}
		for k := range tc.env {
			t.Setenv(k, "")
		}
	}
	t.Setenv(envNodes, strings.Join(urls(wrong), ","))
	code, out, stderr := runMain(t, "run", "jobs:auth", "--", "true")
	// One line is the error, naming WRONGPASS; around it (a straggler's
	// refusal can be reported after the decision), the client's logger
	// warns once per denied master, so that a lock that still succeeds on
	// the others is told of it.
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	errLines := 0
	for _, l := range lines {
		switch {
		case strings.Contains(l, "lock not obtained"):
			errLines++
			if !strings.Contains(l, "WRONGPASS") {
				t.Errorf("a wrong password: the error does not name WRONGPASS: %q", l)
			}
		case !strings.Contains(l, "node denied access node="):
			t.Errorf("a wrong password: a line that is neither the error nor a denied master's warning: %q", l)
		}
	}
	if code != runUnavailable || errLines != 1 || !strings.Contains(stderr, addrs[0]) || len(lines) > 1+len(addrs) {
		t.Errorf("a wrong password: exit %d, want %d, one error line, a warning per master at most, naming the master:\n%s", code, runUnavailable, stderr)
	}
	if strings.Contains(out+stderr, wrong) {
		t.Errorf("the output shows the password:\n%s%s", out, stderr)
	}
	t.Setenv(envNodes, strings.Join(addrs, ","))
	code, _, stderr = runMain(t, "run", "jobs:auth", "--", "true")
	if code != runUnavailable || !strings.Contains(stderr, "NOAUTH") {
		t.Errorf("no password: exit %d, want %d and NOAUTH:\n%s", code, runUnavailable, stderr)
	}
	// One master denies (a wrong password for it alone): the lock is
	// obtained on the other two, the command runs, run exits with its
	// status, and the denied master is named in one warning
	// (docs/operations.md, exit 69).
	one := urls(pw)
	one[0] = "redis://:" + wrong + "@" + addrs[0]
	t.Setenv(envNodes, strings.Join(one, ","))
	ran := filepath.Join(dir, "ran")
	code, out, stderr = runMain(t, "run", "jobs:auth", "--", "touch", ran)
	if _, err := os.Stat(ran); code != 0 || err != nil {
		t.Errorf("one master denied: exit %d, want 0, and the command run (stat: %v); stderr:\n%s", code, err, stderr)
	}
	if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 ||
		!strings.Contains(lines[0], "node denied access node=") || !strings.Contains(lines[0], addrs[0]) || !strings.Contains(lines[0], "WRONGPASS") {
		t.Errorf("one master denied: want one warning naming %s and WRONGPASS, got:\n%s", addrs[0], stderr)
	}
	if strings.Contains(out+stderr, wrong) || strings.Contains(out+stderr, pw) {
		t.Errorf("one master denied: the output shows a password:\n%s%s", out, stderr)
	}
}

// TestRunKilledTakesItsCommand: when run itself is killed with SIGKILL, the
// kernel kills its command too (Pdeathsig), so that the command does not
// go on after the lock has expired.
func TestRunKilledTakesItsCommand(t *testing.T) {
	addrs := startMasters(t, 3)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	r := startProc(t, "R", []string{nodesEnv(addrs), "PIDFILE=" + pidFile}, "run", "jobs:killed", "--",
		script(t, dir, "job.sh", `echo $$ > "$PIDFILE"
while :; do sleep 0.02; done
`))
	var pid int
	r.waitWhile(procLimit, "the command's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // if it survived
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	r.wait(procLimit)
	waitUntil(t, procLimit, "the command to be gone", func() bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// Gone, or a zombie waiting for init to reap it.
		return err != nil || strings.Contains(string(b), ") Z ")
	})
}
