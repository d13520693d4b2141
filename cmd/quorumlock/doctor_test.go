package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// TestDoctorFindsBadSettings: masters configured badly on purpose (an
// eviction policy that evicts keys with a TTL, no AOF with and without
// RDB snapshots, appendfsync everysec, a replica, a master with a replica)
// next to a good one: one line per finding, "bad" where the lock's
// assumptions fail, exit status 1.
func TestDoctorFindsBadSettings(t *testing.T) {
	evicting := redisproc.StartT(t, redisproc.Config{Args: []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}})
	_, port, _ := net.SplitHostPort(evicting.Addr())
	replica := redisproc.StartT(t, redisproc.Config{Args: []string{"--replicaof", "127.0.0.1", port}})
	rdb := redisproc.StartT(t, redisproc.Config{Args: []string{"--save", "900 1"}})
	everysec := redisproc.StartT(t, redisproc.Config{Args: []string{"--appendonly", "yes", "--appendfsync", "everysec"}})
	good := redisproc.StartT(t, redisproc.Config{AppendOnly: true})
	c := admin(t, &redis.Options{Addr: evicting.Addr()})
	waitUntil(t, procLimit, "the replica to connect", func() bool {
		info, err := c.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:1")
	})
	nodes := strings.Join([]string{evicting.Addr(), replica.Addr(), rdb.Addr(), everysec.Addr(), good.Addr()}, ",")
	code, out, stderr := runMain(t, "doctor", "--nodes", nodes)
	if code != exitFail {
		t.Errorf("exit %d, want %d; stderr: %s", code, exitFail, stderr)
	}
	for _, want := range []string{
		`^` + evicting.Addr() + ` +bad +maxmemory-policy +allkeys-lru with maxmemory 64.00M evicts keys with a TTL, lock keys among them: .* set maxmemory-policy noeviction$`,
		`^` + evicting.Addr() + ` +warn +persistence +appendonly no: a restarted master comes back without the lock keys it granted.*restart quarantine`,
		`^` + evicting.Addr() + ` +warn +role +a master with 1 replica: a failover .* may lack lock keys`,
		`^` + replica.Addr() + ` +bad +role +a replica of 127.0.0.1:` + port + `: it refuses writes \(READONLY\)`,
		`^` + rdb.Addr() + ` +bad +persistence +appendonly no with RDB snapshots \(save "900 1"\): .* lock keys taken since are lost`,
		`^` + everysec.Addr() + ` +warn +persistence +appendonly yes but appendfsync everysec: a crash loses the last writes`,
		`^` + good.Addr() + ` +ok +persistence +appendonly yes, appendfsync always`,
		`^` + good.Addr() + ` +ok +maxmemory-policy +noeviction: lock keys are never evicted`,
		`^` + good.Addr() + ` +ok +role +a master without replicas$`,
		`^` + good.Addr() + ` +ok +version +redis \d+\.\d+\.\d+$`,
		`^` + good.Addr() + ` +ok +commands +EVALSHA and EVAL present`,
		`^` + good.Addr() + ` +info +tcp-backlog +511: a paused server still accepts`,
		`^masters +ok +count +5 masters: a quorum of 3, 2 may fail$`,
	} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out) {
			t.Errorf("no line matches %s:\n%s", want, out)
		}
	}
	// Every finding is one line: node, level, check, text.
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !regexp.MustCompile(`^\S+ +(ok|info|warn|bad) +\S+ +\S`).MatchString(l) {
			t.Errorf("not a finding line: %q", l)
		}
	}

	// The good master alone, three times under different names: one server.
	_, gport, _ := net.SplitHostPort(good.Addr())
	code, out, _ = runMain(t, "doctor", "--json", "--nodes", good.Addr()+",localhost:"+gport)
	var fs []finding
	if err := json.Unmarshal([]byte(out), &fs); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	var identity, count *finding
	for i, f := range fs {
		switch f.Check {
		case "identity":
			identity = &fs[i]
		case "count":
			count = &fs[i]
		}
	}
	if code != exitFail || identity == nil || identity.Level != levelBad || !strings.Contains(identity.Text, "are one server") ||
		count == nil || count.Level != levelBad {
		t.Errorf("one server under two names: exit %d, findings %+v", code, fs)
	}

	code, out, _ = runMain(t, "doctor", "--nodes", "127.0.0.1:1,"+good.Addr()+","+everysec.Addr())
	if code != exitFail || !regexp.MustCompile(`(?m)^127.0.0.1:1 +bad +reachable +.*connection refused: this master cannot vote`).MatchString(out) {
		t.Errorf("an unreachable master: exit %d\n%s", code, out)
	}
}

// TestDoctorGoodMasters: masters with AOF always, noeviction and no
// replicas give no warning and exit status 0.
func TestDoctorGoodMasters(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, redisproc.StartT(t, redisproc.Config{AppendOnly: true}).Addr())
	}
	code, out, stderr := runMain(t, "doctor", "--nodes", strings.Join(addrs, ","))
	if code != exitOK || strings.Contains(out, " warn ") || strings.Contains(out, " bad ") {
		t.Errorf("exit %d\n%s%s", code, out, stderr)
	}
}

// minimalACL is docs/nodes.md's minimal ACL for user locker with password pw
// (read from the doc, so that the test follows it).
func minimalACL(t *testing.T, pw string) []any {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "nodes.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ACL SETUSER (locker on >PASSWORD .*)$`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/nodes.md has no line ACL SETUSER locker on >PASSWORD ...")
	}
	args := []any{"ACL", "SETUSER"}
	for _, f := range strings.Fields(strings.Replace(string(m[1]), "PASSWORD", pw, 1)) {
		args = append(args, f)
	}
	return args
}

// TestDoctorAsLimitedUser: doctor run as docs/nodes.md's minimal ACL user
// (no +config|get, no +command|info) on a master with RDB snapshots and no
// AOF, bad for the lock. It cannot read save, so it must not call the
// persistence a warn and exit 0: it says what it could not read and why
// that matters, reports "unknown" and exits 1. The commands it can ask
// directly (EVALSHA, EVAL) it reports as present.
func TestDoctorAsLimitedUser(t *testing.T) {
	const pw = "Locker-pw-5"
	rdb := redisproc.StartT(t, redisproc.Config{Args: []string{"--save", "900 1"}})
	aof := redisproc.StartT(t, redisproc.Config{AppendOnly: true})
	var urls []string
	for _, srv := range []*redisproc.Server{rdb, aof} {
		if err := admin(t, &redis.Options{Addr: srv.Addr()}).Do(context.Background(), minimalACL(t, pw)...).Err(); err != nil {
			t.Fatal(err)
		}
		urls = append(urls, "redis://locker:"+pw+"@"+srv.Addr())
	}
	// As an admin, the RDB master is bad: the judgement the limited user
	// must not turn into a warn.
	code, out, _ := runMain(t, "doctor", "--nodes", rdb.Addr())
	if code != exitFail || !regexp.MustCompile(`(?m)^`+rdb.Addr()+` +bad +persistence +appendonly no with RDB snapshots`).MatchString(out) {
		t.Fatalf("doctor as admin: exit %d\n%s", code, out)
	}
	code, out, stderr := runMain(t, "doctor", "--nodes", strings.Join(urls, ","))
	if code != exitFail {
		t.Errorf("doctor as the minimal ACL user: exit %d, want %d (a persistence it could not read may be bad)", code, exitFail)
	}
	for _, want := range []string{
		`^` + rdb.Addr() + ` +unknown +persistence +appendonly no, and whether RDB snapshots are on could not be read \(CONFIG GET save refused: NOPERM.*\): with snapshots this is bad .*grant \+config\|get to check$`,
		`^` + aof.Addr() + ` +unknown +persistence +appendonly yes, appendfsync could not be read \(CONFIG GET refused: NOPERM.*grant \+config\|get to check$`,
		`^` + rdb.Addr() + ` +ok +commands +EVALSHA and EVAL present \(the lock's scripts; asked directly, as COMMAND INFO was refused: NOPERM`,
	} {
		if !regexp.MustCompile(`(?m)` + want).MatchString(out) {
			t.Errorf("no line matches %s:\n%s%s", want, out, stderr)
		}
	}
	if regexp.MustCompile(`(?m)^\S+ +(warn|info|ok) +persistence `).MatchString(out) || strings.Contains(out+stderr, pw) {
		t.Errorf("a persistence it could not read judged milder than unknown, or the password shown:\n%s%s", out, stderr)
	}
}
