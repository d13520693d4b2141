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

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/faultinject/internal/lockkey"
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
			c := faultinject.StartT(t, faultinject.Config{N: 3, Backend: faultinject.Process, Persistence: []faultinject.Persistence{faultinject.AOFAlways}})
			link, err := c.NewLink("a")
			if err != nil {
				t.Fatal(err)
			}
			var aAddrs, bAddrs []string
			for i := range 3 {
				aAddrs = append(aAddrs, link.Addr(i))
				bAddrs = append(bAddrs, c.Addr(i))
			}
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			a := startProc(t, "A", []string{nodesEnv(aAddrs), "LOG=" + log}, "run", "--ttl", "2s", "--grace", "300ms", "jobs:majority", "--",
				script(t, dir, "a.sh", tc.trap+`
echo "A start" >> "$LOG"
while :; do echo "A tick" >> "$LOG"; sleep 0.02; done
`))
			waitUntil(t, procLimit, "A's child to start", func() bool { return logHas(readLog(t, log), "A tick") })
			b := startProc(t, "B", []string{nodesEnv(bAddrs), "LOG=" + log}, "run", "--wait", "-1", "--ttl", "2s", "jobs:majority", "--",
				script(t, dir, "b.sh", `echo "B start" >> "$LOG"; echo "B end" >> "$LOG"`))

			ctx := context.Background()
			kill := faultinject.Kill{Nodes: []int{0, 1}}
			if err := kill.Inject(ctx, c); err != nil {
				t.Fatal(err)
			}
			// A must not reach the masters again; B may, once they are back.
			if err := (faultinject.Partition{Nodes: []int{0, 1}, Link: "a"}).Inject(ctx, c); err != nil {
				t.Fatal(err)
			}
			if err := kill.Undo(ctx, c); err != nil {
				t.Fatal(err)
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
	waitUntil(t, procLimit, "A's child to start", func() bool { return logHas(readLog(t, log), "A tick") })
	waitUntil(t, procLimit, "a renewal by A", func() bool { return len(extendsBy(t, admins[0], sha, runPID, -1)) > 0 })

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
	waitUntil(t, procLimit, "B's child to start, and A's child to write after it", func() bool {
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
		{"held elsewhere", addrs, []string{"jobs:held", "--", "true"}, runNotObtained, `quorumlock run: redlock: lock not obtained "jobs:held": 0 of 3 nodes, quorum 2;`},
		{"held elsewhere, own code", addrs, []string{"--conflict-exit-code", "9", "jobs:held", "--", "true"}, 9, "lock not obtained"},
		{"held elsewhere, conflict code 0", addrs, []string{"--conflict-exit-code", "0", "jobs:held", "--", "true"}, 0, "lock not obtained"},
		{"held elsewhere past --wait", addrs, []string{"--wait", "300ms", "jobs:held", "--", "true"}, runNotObtained, "lock not obtained"},
		{"majority unreachable", []string{addrs[0], down, fmt.Sprintf("127.0.0.1:%d", free+1)}, []string{"jobs:a", "--", "true"}, runUnavailable, "connection refused"},
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
			if tc.say != "" && strings.Count(stderr, "\n") != 1 {
				t.Errorf("stderr is not one line:\n%s", stderr)
			}
		})
	}
}
