package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/fence"
	"github.com/quorumlock/quorumlock/fence/redisguard"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// fenceChildEnv, when set, makes the test binary the command of
// TestRunFencingReachesAGuard instead of running tests (see TestMain).
const fenceChildEnv = "QUORUMLOCK_TEST_FENCE_CHILD"

// fenceChild is that command: it reads its token with fence.FromEnv and
// writes $VALUE to the key reports:daily of the redis-server at $RESOURCE
// through redisguard.Set, then prints the token. Exit 3: no token; 4: a
// malformed one; 5: the write failed.
func fenceChild() int {
	token, err := fence.FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, fence.ErrNoToken) {
			return 3
		}
		return 4
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("RESOURCE"), Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redisguard.Set(ctx, rdb, "reports:daily", token, os.Getenv("VALUE")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	fmt.Println(token)
	return 0
}

// TestRunFencingReachesAGuard: end to end, the token of "quorumlock run
// --fencing" reaches a guarded resource. Two runs one after the other each
// start a Go command that reads QUORUMLOCK_FENCE with fence.FromEnv and
// writes a redis-server (the resource, not one of the masters) through
// redisguard.Set; the second token is higher, and a late write with the
// first is refused, naming both. Without --fencing the command finds no
// token.
func TestRunFencingReachesAGuard(t *testing.T) {
	addrs := startMasters(t, 3)
	resource := redisproc.StartT(t, redisproc.Config{})
	child, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	runChild := func(value string, fencing bool) (int, string, string) {
		t.Helper()
		args := []string{"run", "jobs:fenced", "--", child}
		if fencing {
			args = []string{"run", "--fencing", "jobs:fenced", "--", child}
		}
		p := startProc(t, value, []string{nodesEnv(addrs), fenceChildEnv + "=1", "RESOURCE=" + resource.Addr(), "VALUE=" + value}, args...)
		code := p.wait(procLimit)
		return code, strings.TrimSpace(p.stdout.String()), p.stderr.String()
	}
	var tokens []fence.Token
	for _, value := range []string{"first", "second"} {
		code, out, stderr := runChild(value, true)
		tok, err := fence.Parse(out)
		if code != 0 || err != nil {
			t.Fatalf("%s run: exit %d, token %q (%v); stderr:\n%s", value, code, out, err, stderr)
		}
		tokens = append(tokens, tok)
	}
	if tokens[1] <= tokens[0] {
		t.Fatalf("tokens %v: the second is not higher", tokens)
	}
	rdb := redis.NewClient(&redis.Options{Addr: resource.Addr(), Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	err = redisguard.Set(t.Context(), rdb, "reports:daily", tokens[0], "late")
	var stale *fence.StaleError
	if !errors.As(err, &stale) || stale.Token != tokens[0] || stale.Highest != tokens[1] {
		t.Errorf("a late write with the first token: %v", err)
	}
	if v := rdb.Get(t.Context(), "reports:daily").Val(); v != "second" {
		t.Errorf("the resource holds %q, want second", v)
	}
	code, _, stderr := runChild("unfenced", false)
	if code != 3 || !strings.Contains(stderr, "QUORUMLOCK_FENCE is not set") {
		t.Errorf("without --fencing: exit %d; stderr:\n%s", code, stderr)
	}
}
