package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
	"time"
)

// aclOperator is the ACL of docs/operations.md for a user that runs, and
// reads the status of, locks whose names start with "jobs:": the lock's
// commands (mutex, fencing, the lock shapes) and status's (Read and SCAN).
const aclOperator = "on >Op-pw-7 resetchannels ~jobs:* ~{jobs:* -@all +evalsha +eval +info +get +set +del +exists +pexpire " +
	"+time +zadd +zrem +zrange +zremrangebyscore +zscore +zcard +pexpireat " +
	"+hset +hget +hdel +type +pttl +zrangebyscore +zcount +scan"

// authMasters starts three masters: the first with a password for the
// default user, the other two with the ACL users "operator" (aclOperator)
// and "admin" (everything), and the default user off. It returns the masters' URLs with the right
// credentials, and their host:port addresses.
func authMasters(t *testing.T) (urls, addrs []string) {
	t.Helper()
	addrs = startMasters(t, 3)
	ctx := context.Background()
	for i, a := range addrs {
		if i == 0 {
			requirePass(t, a, "Default-pw-3")
			urls = append(urls, "redis://:"+url.QueryEscape("Default-pw-3")+"@"+a)
			continue
		}
		c := admin(t, &redis.Options{Addr: a})
		for _, cmd := range [][]any{
			append([]any{"ACL", "SETUSER", "operator"}, toAny(strings.Fields(aclOperator))...),
			{"ACL", "SETUSER", "admin", "on", ">Admin-pw-1", "~*", "&*", "+@all"},
			{"ACL", "SETUSER", "default", "off"},
		} {
			if err := c.Do(ctx, cmd...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		urls = append(urls, "redis://operator:Op-pw-7@"+a)
	}
	return urls, addrs
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// waitOnAll waits until every master of urls has holds holds of the lock
// name (1 for a mutex): an acquisition returns at a quorum, and the other
// masters' replies may still be on their way.
func waitOnAll(t *testing.T, urls []string, name string, holds int) {
	t.Helper()
	var cs []*redis.Client
	for _, u := range urls {
		opt, err := lockkey.Options(u)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, admin(t, opt))
	}
	waitUntil(t, procLimit, fmt.Sprintf("%d holds of %s on every master", holds, name), func() bool {
		for _, c := range cs {
			l, err := lockkey.Read(context.Background(), c, name)
			if err != nil || l.Type == "string" && holds != 1 || l.Type != "string" && len(l.Holds) != holds {
				return false
			}
		}
		return true
	})
}

// libClient is a redlock client over urls, closed with the test.
func libClient(t *testing.T, label string, urls []string) *redlock.Client {
	t.Helper()
	ns, err := redisnode.DialAll(urls...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := redlock.New(ns.Redlock(), redlock.WithOwnerLabel(label))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close(context.Background())
		_ = ns.Close()
	})
	return c
}

// leases unlocks every lease when the test ends.
func unlockAtEnd(t *testing.T, ls ...*redlock.Lease) {
	t.Cleanup(func() {
		for _, l := range ls {
			_ = l.Unlock(context.Background())
		}
	})
}

// TestStatusOnPasswordAndACLMasters: status reads masters with a password
// and with an ACL user, the URLs coming from a file; shows a mutex's holder
// with its owner, TTL and fencing counter, every holder of a read-write
// lock and of a semaphore on its own line, a pattern, and JSON; and with
// no or wrong credentials says so per master. No output shows a password.
func TestStatusOnPasswordAndACLMasters(t *testing.T) {
	urls, addrs := authMasters(t)
	file := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(file, []byte(strings.Join(urls, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envNodes, "")
	t.Setenv(envNodesFile, file)
	secrets := []string{"Default-pw-3", "Op-pw-7", "Admin-pw-1"}
	runDoctor := func(t *testing.T) (int, string) {
		t.Helper()
		code, out, stderr := runMain(t, "doctor")
		for _, s := range secrets {
			if strings.Contains(out+stderr, s) {
				t.Fatalf("doctor shows a password:\n%s%s", out, stderr)
			}
		}
		return code, out + stderr
	}
	status := func(args ...string) (int, string) {
		t.Helper()
		code, out, stderr := runMain(t, append([]string{"status"}, args...)...)
		for _, s := range secrets {
			if strings.Contains(out+stderr, s) {
				t.Fatalf("status %q shows a password:\n%s%s", args, out, stderr)
			}
		}
		return code, out + stderr
	}
	ctx := context.Background()
	c := libClient(t, "status test", urls)

	m, err := c.NewMutex("jobs:mutex", redlock.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	ml, err := m.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	unlockAtEnd(t, ml)
	waitOnAll(t, urls, "jobs:mutex", 1)
	fence, _ := ml.Fence()
	code, out := status("jobs:mutex")
	host := hostname(t)
	// Since when it is held: the acquiring attempt's start, stored in the
	// value, between the clock readings around TryLock.
	sinceRE := regexp.MustCompile(`lock "jobs:mutex": held by ` + ml.Token() + ` on a quorum \(3 of 3\), held since (\S+ \S+ \S+) \(\S+ ago\)\n`)
	sm := sinceRE.FindStringSubmatch(out)
	if sm == nil {
		t.Fatalf("status of a mutex: no %s line:\n%s", sinceRE, out)
	}
	since, err := time.ParseInLocation("2006-01-02 15:04:05.000 MST", sm[1], time.Local)
	if err != nil || since.Before(before.Truncate(time.Millisecond)) || since.After(after) {
		t.Fatalf("status says the mutex is held since %q (%v), not between %v and %v (TryLock's call)", sm[1], err, before, after)
	}
	for _, want := range []string{
		fmt.Sprintf(`held by %s (host %q, pid %d, label "status test"), TTL `, ml.Token(), host, os.Getpid()),
		fmt.Sprintf(", fence %d", fence),
		addrs[0] + "  master, redis ",
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("status of a mutex: exit %d, lacks %q:\n%s", code, want, out)
		}
	}

	reader, _, err := c.NewRWMutex("jobs:config")
	if err != nil {
		t.Fatal(err)
	}
	r1, err := reader.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := reader.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unlockAtEnd(t, r1, r2)
	waitOnAll(t, urls, "jobs:config", 2)
	code, out = status("jobs:config")
	for _, want := range []string{
		`lock "jobs:config" (read-write)`,
		`lock "jobs:config": 2 holders, each on a quorum (at least 2 of 3 masters)`,
		fmt.Sprintf("  reader %s (host %q, pid %d, label \"status test\") on 3 of 3, held since ", r1.Token(), host, os.Getpid()),
		fmt.Sprintf("  reader %s (host %q, pid %d, label \"status test\") on 3 of 3, held since ", r2.Token(), host, os.Getpid()),
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("status of a read-write lock: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	for _, r := range []*redlock.Lease{r1, r2} {
		line := regexp.MustCompile(`\n  reader ` + r.Token() + ` \(host .*\) on 3 of 3, held since \S+ \S+ \S+ \(\S+ ago\)\n`)
		if !line.MatchString(out) {
			t.Fatalf("status of a read-write lock: no %s line:\n%s", line, out)
		}
	}
	// One line per hold on each master, none broken by the member's newline.
	holdLine := regexp.MustCompile(`(?m)^  \S+    reader [0-9a-f]{32} \(host .*\), TTL \S+$`)
	if n := len(holdLine.FindAllString(out, -1)); n != 6 {
		t.Errorf("%d reader lines on the masters, want 2 on each of 3:\n%s", n, out)
	}

	sem, err := c.NewSemaphore("jobs:pool", 3)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := sem.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := sem.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unlockAtEnd(t, s1, s2)
	waitOnAll(t, urls, "jobs:pool", 2)
	code, out = status("jobs:pool")
	for _, want := range []string{
		`lock "jobs:pool" (semaphore)`,
		`lock "jobs:pool": 2 holders, each on a quorum (at least 3 of 3 masters)`,
		fmt.Sprintf("  semaphore holder (k=3) %s (host", s1.Token()),
		fmt.Sprintf("  semaphore holder (k=3) %s (host", s2.Token()),
	} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("status of a semaphore: exit %d, lacks %q:\n%s", code, want, out)
		}
	}

	code, out = status("jobs:*")
	for _, want := range []string{`lock "jobs:config" (read-write)`, `lock "jobs:mutex" (mutex)`, `lock "jobs:pool" (semaphore)`} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("status of a pattern: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, ":fence") || strings.Contains(out, "release-guard") {
		t.Errorf("a pattern lists derived keys as locks:\n%s", out)
	}
	code, out = status("nomatch:*")
	if code != exitOK || !strings.Contains(out, `no lock matches "nomatch:*"`) {
		t.Errorf("a pattern without match: exit %d\n%s", code, out)
	}

	code, out = status("--json", "jobs:config")
	var snap statusSnap
	if err := json.Unmarshal([]byte(out), &snap); err != nil || code != exitOK {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, out)
	}
	if len(snap.Locks) != 1 || snap.Locks[0].Kind != "read-write" || snap.Locks[0].State != "held" || len(snap.Locks[0].Holders) != 2 ||
		len(snap.Nodes) != 3 || snap.Nodes[0].Role != "master" || len(snap.Locks[0].Nodes[1].Holds) != 2 {
		t.Errorf("--json: %+v", snap)
	}

	// doctor with the same user: without +config|get +command|info it says
	// what it could not read, asks EVALSHA and EVAL themselves, and exits 1
	// (the persistence it could not read may be bad); with them
	// (docs/operations.md) it reads all.
	code, out = runDoctor(t)
	if code != exitFail || !regexp.MustCompile(`(?m)^`+addrs[1]+` +ok +commands +EVALSHA and EVAL present \(the lock's scripts; asked directly, as COMMAND INFO was refused: NOPERM`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+addrs[1]+` +unknown +persistence +appendonly no, and whether RDB snapshots are on could not be read \(CONFIG GET save refused: NOPERM`).MatchString(out) {
		t.Errorf("doctor as a user without +config|get +command|info: exit %d\n%s", code, out)
	}
	for _, a := range addrs[1:] {
		c := admin(t, &redis.Options{Addr: a, Username: "admin", Password: "Admin-pw-1"})
		if err := c.Do(ctx, "ACL", "SETUSER", "operator", "+config|get", "+command|info").Err(); err != nil {
			t.Fatal(err)
		}
	}
	code, out = runDoctor(t)
	if code != exitOK || strings.Count(out, " ok    commands ") != 3 || strings.Count(out, " info  tcp-backlog ") != 3 {
		t.Errorf("doctor as a user with +config|get +command|info: exit %d\n%s", code, out)
	}

	// Without credentials, and with a wrong password: each master says why.
	t.Setenv(envNodesFile, "")
	code, out = status("--nodes", strings.Join(addrs, ","), "jobs:mutex")
	if code != exitFail || strings.Count(out, "error: NOAUTH") != 3 || !strings.Contains(out, `lock "jobs:mutex": unknown (3 of 3 masters did not answer)`) {
		t.Errorf("without credentials: exit %d\n%s", code, out)
	}
	secrets = append(secrets, "Wrong-pw-9")
	code, out = status("--nodes", strings.Replace(strings.Join(urls, ","), "Op-pw-7", "Wrong-pw-9", 1), "jobs:mutex")
	if code != exitOK || strings.Count(out, "error: WRONGPASS") != 1 || !strings.Contains(out, `lock "jobs:mutex": held by `+ml.Token()+" on a quorum (2 of 3)") {
		t.Errorf("a wrong password on one master: exit %d\n%s", code, out)
	}
}

// TestStatusWatch: --watch refreshes until interrupted, and dates a holder
// it saw arrive.
func TestStatusWatch(t *testing.T) {
	addrs := startMasters(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &watchWriter{cancelAfter: 3, cancel: cancel, onRefresh: map[int]func(){}}
	var lease *redlock.Lease
	w.onRefresh[1] = func() { // after the first reading: take the lock
		c := libClient(t, "watched", addrs)
		m, err := c.NewMutex("jobs:watched")
		if err != nil {
			t.Error(err)
			return
		}
		if lease, err = m.TryLock(context.Background()); err != nil {
			t.Error(err)
		}
	}
	var stderr bytes.Buffer
	code := run(ctx, []string{"status", "--nodes", strings.Join(addrs, ","), "--watch", "50ms", "jobs:watched"}, w, &stderr)
	if lease != nil {
		unlockAtEnd(t, lease)
	}
	out := w.String()
	if code != exitOK || strings.Count(out, "\n-- ") < 2 || !strings.Contains(out, `lock "jobs:watched": not held by any quorum`) ||
		lease == nil || !regexp.MustCompile(`lock "jobs:watched": held by `+lease.Token()+` on a quorum \([23] of 3\), held since [^\n]* ago\), first seen by this watch at \d\d:\d\d:\d\d\n`).MatchString(out) {
		t.Errorf("--watch: exit %d\n%s%s", code, out, stderr.String())
	}
}

// watchWriter counts status's refreshes (the summary lines), runs a
// function after some of them, and cancels after cancelAfter.
type watchWriter struct {
	mu          sync.Mutex
	b           bytes.Buffer
	n           int
	cancelAfter int
	cancel      context.CancelFunc
	onRefresh   map[int]func()
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, _ := w.b.Write(p)
	var f func()
	if strings.HasPrefix(string(p), `lock "jobs:watched": `) {
		w.n++
		f = w.onRefresh[w.n]
		if w.n == w.cancelAfter {
			w.cancel()
		}
	}
	w.mu.Unlock()
	if f != nil {
		f()
	}
	return n, nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestStatusCooldown: a lock that run keeps for --cooldown after its
// command exited is shown as such, not as held by a pid that is gone: on
// this host by the pid (it no longer runs), for a holder on another host by
// its keys' TTL (not renewed for half a TTL). A cooldown run still renewing
// is said to be one.
func TestStatusCooldown(t *testing.T) {
	addrs := startMasters(t, 3)
	nodes := strings.Join(addrs, ",")
	a := startProc(t, "A", []string{nodesEnv(addrs)}, "run", "--cooldown", "1m", "--ttl", "2s", "jobs:cooldown", "--", "true")
	if code := a.wait(procLimit); code != 0 {
		t.Fatalf("run: exit %d; stderr:\n%s", code, a.stderr.String())
	}
	pid := a.cmd.Process.Pid
	code, out, stderr := runMain(t, "status", "--nodes", nodes, "jobs:cooldown")
	want := fmt.Sprintf(`(?m)^  in its cooldown: pid %d has exited; run --cooldown 1m0s keeps the lock held until its keys expire \([0-9.hms]+ left\), then it is free$`, pid)
	if code != exitOK || !regexp.MustCompile(want).MatchString(out) ||
		!strings.Contains(out, fmt.Sprintf(`pid %d, label "quorumlock run", --cooldown 1m0s)`, pid)) {
		t.Errorf("after run --cooldown exited: exit %d, want a line matching %s\n%s%s", code, want, out, stderr)
	}
	code, out, _ = runMain(t, "status", "--json", "--nodes", nodes, "jobs:cooldown")
	var snap statusSnap
	if err := json.Unmarshal([]byte(out), &snap); err != nil || code != exitOK || len(snap.Locks) != 1 || len(snap.Locks[0].Holders) != 1 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	if h := snap.Locks[0].Holders[0]; h.Label != "quorumlock run" || h.Cooldown == nil || !h.Cooldown.Ended || h.Cooldown.ForS != 60 || h.Cooldown.TTLS != 2 {
		t.Errorf("--json holder %+v, cooldown %+v", h, h.Cooldown)
	}

	// Holders on another host, written as run writes them: one renewed just
	// now (TTL + cooldown left), one not renewed for longer than half a TTL.
	ctx := context.Background()
	value := func(tok string) string {
		q := url.Values{"host": {"elsewhere"}, "pid": {"4242"}, "label": {cooldownLabel("nightly", time.Minute, 2*time.Second)}}
		return tok + "?" + q.Encode()
	}
	for _, a := range addrs {
		c := admin(t, &redis.Options{Addr: a})
		for _, kv := range []struct {
			key, val string
			ttl      time.Duration
		}{{"jobs:renewed", value("tokrenewed"), 62 * time.Second}, {"jobs:gone", value("tokgone"), 30 * time.Second}} {
			if err := c.Set(ctx, kv.key, kv.val, kv.ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, out, _ = runMain(t, "status", "--nodes", nodes, "jobs:renewed")
	if !strings.Contains(out, "  run with --cooldown 1m0s: renewed while its command runs; after the command exits 0 the lock stays held 1m0s more, with no process\n") ||
		!strings.Contains(out, `(host "elsewhere", pid 4242, label "nightly", --cooldown 1m0s)`) {
		t.Errorf("a cooldown run still renewing:\n%s", out)
	}
	_, out, _ = runMain(t, "status", "--nodes", nodes, "jobs:gone")
	if !strings.Contains(out, "  in its cooldown: its keys have not been renewed for more than half its TTL (2s); run --cooldown 1m0s keeps the lock held until its keys expire") {
		t.Errorf("a cooldown run gone, on another host:\n%s", out)
	}
}
