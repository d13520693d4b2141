// Command scriptcost measures what the masters' scripts cost on a
// redis-server it starts (from PATH, on a free loopback port, no
// persistence): the server's own time per call (INFO commandstats,
// usec_per_call), one client calling it in a loop, so that the two cores
// are not shared by the contenders of a contention run. It prints
//
//   - an EVALSHA of `return 1` (what any script costs);
//
//   - 15 calls of one command inside a script, per command (what each
//     redis.call costs, the script's own cost taken off);
//
//   - the two scripts of a contended acquisition, as a line of 8 waiters
//     runs them: acquire_queued.lua entering a new waiter in the line while
//     another value holds the key, and release.lua handing the key to the
//     line's first waiter (the holder's value handed to it before, as
//     under contention), one of each per acquisition (docs/benchmarks.md,
//     "Where a contended acquisition's CPU goes").
//
//     cd bench && go run ./cmd/scriptcost [-n 20000]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/bench"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/redis/go-redis/v9"
)

func main() {
	n := flag.Int("n", 20000, "calls per measurement")
	flag.Parse()
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "scriptcost:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	addrs, stop, err := bench.StartServers(1)
	if err != nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer rc.Close()
	if err := rc.Set(ctx, "x{a}", "v", 0).Err(); err != nil {
		return err
	}
	if err := rc.ZAdd(ctx, "z{a}", redis.Z{Score: 1, Member: "m"}).Err(); err != nil {
		return err
	}
	keys := []string{"x{a}", "z{a}"}
	base, err := perCall(ctx, rc, n, "return 1", keys)
	if err != nil {
		return err
	}
	fmt.Printf("| call | µs per call (server) |\n|---|--:|\n| EVALSHA of `return 1` | %.2f |\n", base)
	for _, c := range []string{
		"redis.call('GET', KEYS[1])",
		"redis.call('EXISTS', KEYS[1])",
		"redis.call('SET', KEYS[1], 'v')",
		"redis.call('SET', KEYS[1], 'v', 'PX', '100000')",
		"redis.call('PEXPIRE', KEYS[1], '100000')",
		"redis.call('ZADD', KEYS[2], '12345678901234', 'm')",
		"redis.call('ZADD', KEYS[2], 12345678901234, 'm')",
		"redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')",
		"redis.call('TIME')",
	} {
		us, err := perCall(ctx, rc, n, strings.Repeat(c+"\n", 15)+"return 1", keys)
		if err != nil {
			return err
		}
		fmt.Printf("| `%s` in a script | %.2f |\n", c, (us-base)/15)
	}
	acq, rel, err := contended(ctx, rc, n)
	if err != nil {
		return err
	}
	fmt.Printf("| acquire_queued.lua, a new waiter enters the line | %.2f |\n| release.lua, hands the key to the line's first waiter | %.2f |\n", acq, rel)
	return nil
}

// perCall runs src n times and returns the server's µs per EVALSHA.
func perCall(ctx context.Context, rc *redis.Client, n int, src string, keys []string) (float64, error) {
	s := redis.NewScript(src)
	if err := s.Load(ctx, rc).Err(); err != nil {
		return 0, err
	}
	before, err := evalshaUsec(ctx, rc)
	if err != nil {
		return 0, err
	}
	for range n {
		if err := s.EvalSha(ctx, rc, keys).Err(); err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
	}
	after, err := evalshaUsec(ctx, rc)
	return float64(after-before) / float64(n), err
}

// evalshaUsec reads the server's total µs in EVALSHA from INFO
// commandstats (0 before the first).
func evalshaUsec(ctx context.Context, rc *redis.Client) (int64, error) {
	info, err := rc.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		if !strings.HasPrefix(l, "cmdstat_evalsha:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(l), ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return 0, nil
}

// contended runs, n times, a new waiter's acquire_queued.lua on a held key
// with 7 waiters in line, then the holder's release.lua, which hands the
// key to the line's first waiter, the next holder. It returns the server's
// µs per call of each, read around each call.
func contended(ctx context.Context, rc *redis.Client, n int) (acq, rel float64, err error) {
	read := func(name string) (*redis.Script, error) {
		src, err := redisnode.Scripts.ReadFile("scripts/" + name)
		if err != nil {
			return nil, err
		}
		s := redis.NewScript(string(src))
		return s, s.Load(ctx, rc).Err()
	}
	aq, err := read("acquire_queued.lua")
	if err != nil {
		return 0, 0, err
	}
	rs, err := read("release.lua")
	if err != nil {
		return 0, 0, err
	}
	line := []string{"l{q}", "", "f{q}", "q{q}", "e{q}", "v{q}", "g{q}"}
	enter := func(i int) error {
		k := append([]string(nil), line...)
		k[1] = fmt.Sprintf("r{q}:v%d", i)
		r, err := aq.EvalSha(ctx, rc, k, fmt.Sprintf("v%d", i), 10000, fmt.Sprintf("w%09d", i), time.Now().UnixMilli(), 20000, "fair", "", 0).Slice()
		if err == nil && i > 0 && r[0].(int64) != 0 {
			err = fmt.Errorf("waiter %d took a held key", i)
		}
		return err
	}
	release := func(v string) error {
		k := []string{"l{q}", "r{q}:" + v, "q{q}", "e{q}", "v{q}", "g{q}"}
		ok, err := rs.EvalSha(ctx, rc, k, v, 100, "ch").Int64()
		if err == nil && ok != 1 {
			err = fmt.Errorf("the release of %s found the key at another value", v)
		}
		return err
	}
	for i := range 8 { // the holder, then 7 waiters
		if err := enter(i); err != nil {
			return 0, 0, err
		}
	}
	holder := "v0"
	var acqUs, relUs int64
	for i := 8; i < 8+n; i++ {
		u0, err := evalshaUsec(ctx, rc)
		if err == nil {
			err = enter(i)
		}
		var u1, u2 int64
		if err == nil {
			u1, err = evalshaUsec(ctx, rc)
		}
		if err == nil {
			err = release(holder)
		}
		if err == nil {
			u2, err = evalshaUsec(ctx, rc)
		}
		if err == nil {
			holder, err = rc.Get(ctx, "l{q}").Result()
		}
		if err != nil {
			return 0, 0, err
		}
		acqUs, relUs = acqUs+u1-u0, relUs+u2-u1
	}
	return float64(acqUs) / float64(n), float64(relUs) / float64(n), nil
}
