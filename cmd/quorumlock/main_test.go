package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

func TestMain(m *testing.M) {
	if os.Getenv(fenceChildEnv) != "" { // the command of a run, not the tests
		os.Exit(fenceChild())
	}
	lockkey.DiscardClientLog()
	dir, err := os.MkdirTemp("", "quorumlock-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		// go-redis's redial probe (a pool whose dials to a stopped master
		// failed) sleeps a second before it sees its pool closed, and
		// then ends: bounded, not a leak.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "usage: quorumlock"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"frobnicate"}, "(commands: run, status, doctor, reconfig, bench)"},
		{[]string{"chaos", "--quick"}, "cd faultinject && go run ./cmd/chaos --quick"},
		{[]string{"status", "--nodes", "127.0.0.1:7000"}, "want exactly one lock name or pattern, got 0"},
		{[]string{"status", "--nodes", "127.0.0.1:7000", "{x}"}, `lock name "{x}" is a hash tag and nothing else, which no lock is named (its derived keys are those of the lock "x"): ask for "x"`},
		{[]string{"status", "--nodes", "127.0.0.1:7000", "{x"}, `lock name "{x" has '{' or '}' but no valid hash tag`},
		{[]string{"status", "--nodes", "127.0.0.1", "lockname"}, `master 1 of --nodes: redisnode: address "127.0.0.1" is neither host:port nor a redis:// or rediss:// URL`},
		{[]string{"status", "--nodes", "127.0.0.1:7000,127.0.0.1:0", "lockname"}, `master 2 of --nodes: redisnode: bad port "0"`},
		{[]string{"status", "--nodes", "127.0.0.1:7000, 127.0.0.1:7000", "lockname"}, "masters 1 and 2 of --nodes are both 127.0.0.1:7000"},
		{[]string{"status", "--addrs", "127.0.0.1:7000", "lockname"}, "flag provided but not defined: -addrs"},
		{[]string{"doctor", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"doctor", "--nodes", "redis://u:s3cr3t@127.0.0.1:0"}, `master 1 of --nodes: redisnode: bad port "0"`},
	}
	// 64 (EX_USAGE) for every command, as run gives (TestRunUsageErrors):
	// a script tells a usage error from a failure the same way whichever
	// command it called.
	const usage = 64
	for _, c := range cases {
		code, _, stderr := runMain(t, c.args...)
		if code != usage || !strings.Contains(stderr, c.want) {
			t.Errorf("quorumlock %q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, usage, c.want)
		}
	}
}

// TestUsageNamesOnlyCommandsThatExist: no command is listed before it exists.
func TestUsageNamesOnlyCommandsThatExist(t *testing.T) {
	code, out, _ := runMain(t, "help")
	for _, c := range []string{"\n  run ", "\n  status ", "\n  doctor ", "\n  bench "} {
		if code != exitOK || !strings.Contains(out, c) {
			t.Fatalf("help: exit %d, output %q lacks %q", code, out, c)
		}
	}
	for _, gone := range []string{"not yet available", "\n  chaos "} {
		if strings.Contains(out, gone) {
			t.Errorf("usage names %q:\n%s", gone, out)
		}
	}
}

func TestStatus(t *testing.T) {
	var (
		srvs  []*redisproc.Server
		rns   []*redisnode.Node
		nodes []redlock.Node
	)
	for range 3 {
		srv := redisproc.StartT(t, redisproc.Config{})
		n, err := redisnode.Dial(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		srvs, rns, nodes = append(srvs, srv), append(rns, n), append(nodes, n)
	}
	addrs := srvs[0].Addr() + "," + srvs[1].Addr() + "," + srvs[2].Addr()
	code, out, stderr := runMain(t, "status", "--nodes", addrs, "mylock")
	if code != exitOK || !strings.Contains(out, `lock "mylock": not held by any quorum`) || strings.Count(out, "free") != 3 {
		t.Fatalf("status of a free lock: exit %d\n%s%s", code, out, stderr)
	}
	for i := range 2 {
		if _, err := rns[i].Acquire(context.Background(), "mylock", "tok?label=me", 10e9); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr = runMain(t, "status", "--nodes", addrs, "mylock")
	if code != exitOK || !strings.Contains(out, `lock "mylock": held by tok on a quorum (2 of 3)`) || !strings.Contains(out, `label "me"`) {
		t.Fatalf("status of a held lock: exit %d\n%s%s", code, out, stderr)
	}

	// A lock taken by the library: its value parses to the lease's token,
	// this process's pid and the owner label.
	rc, err := redlock.New(nodes, redlock.WithOwnerLabel("status-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(context.Background())
	mu, err := rc.NewMutex("reallock")
	if err != nil {
		t.Fatal(err)
	}
	lease, err := mu.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runMain(t, "status", "--nodes", addrs, "reallock")
	want := fmt.Sprintf(`held by %s (host %q, pid %d, label "status-test")`, lease.Token(), hostname(t), os.Getpid())
	if code != exitOK || !strings.Contains(out, `lock "reallock": held by `+lease.Token()+" on a quorum") || !strings.Contains(out, want) {
		t.Fatalf("status of a library lock: exit %d, want %s\n%s%s", code, want, out, stderr)
	}
	if err := lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runMain(t, "status", "--nodes", addrs, "reallock")
	if code != exitOK || !strings.Contains(out, `lock "reallock": not held by any quorum`) {
		t.Fatalf("status after Unlock: exit %d\n%s%s", code, out, stderr)
	}

	for _, srv := range srvs[:2] {
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ = runMain(t, "status", "--nodes", addrs, "mylock")
	if code != exitFail || !strings.Contains(out, "unknown (2 of 3 masters did not answer)") {
		t.Fatalf("status with 2 of 3 masters down: exit %d\n%s", code, out)
	}
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestBenchIsDispatched: "quorumlock bench" reaches the bench command's
// entry (its help is answered without building quorumlock-bench; the bench
// module's own tests run quorumlock-bench itself).
func TestBenchIsDispatched(t *testing.T) {
	code, out, errOut := runMain(t, "bench", "-h")
	if code != exitOK || !strings.Contains(out+errOut, "usage: quorumlock bench") || !strings.Contains(out+errOut, "--quick") {
		t.Fatalf("quorumlock bench -h: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
