package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// TestSideBySideSmoke runs every contender for a few interleaved rounds
// with N=1 and N=3, healthy and with 1ms added in the client, on real
// redis-server processes: every contender completes every cycle, the rows
// are well-formed, and no contender leaves a key behind.
func TestSideBySideSmoke(t *testing.T) {
	redisproc.Require(t)
	const cycles = 6
	conds := []bench.Condition{bench.Healthy, bench.Delayed(time.Millisecond)}
	rows, err := bench.Run(t.Context(), bench.Config{
		Ns:         []int{1, 3},
		Conditions: conds,
		Cycles:     cycles,
		Slice:      2,
		Warmup:     1,
	})
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]bool{}
	for _, cond := range conds {
		for _, n := range []int{1, 3} {
			for _, c := range bench.Contenders() {
				if !c.OneNode || n == 1 {
					want[fmt.Sprintf("%s/n=%d/%s", c.Name, n, cond.Name)] = true
				}
			}
		}
	}
	if len(rows) != len(want) {
		t.Errorf("%d rows, want %d", len(rows), len(want))
	}
	for _, r := range rows {
		id := fmt.Sprintf("%s/n=%d/%s", r.Contender, r.N, r.Condition)
		if !want[id] {
			t.Errorf("unexpected or repeated row %s", id)
		}
		delete(want, id)
		if r.Cycles != cycles || r.Errors != 0 || r.Err != "" {
			t.Errorf("%s: %d cycles, %d errors (%q), want %d cycles and none", id, r.Cycles, r.Errors, r.Err, cycles)
		}
		if r.OrphanKeys != 0 {
			t.Errorf("%s: %d orphan keys", id, r.OrphanKeys)
		}
		if !(0 < r.P50Ms && r.P50Ms <= r.P90Ms && r.P90Ms <= r.P99Ms && r.P99Ms <= r.MaxMs) {
			t.Errorf("%s: latencies not 0 < p50 <= p90 <= p99 <= max: %v %v %v %v", id, r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs)
		}
		if r.CyclesPerSec <= 0 || r.AllocsPerCycle <= 0 || r.BytesPerCycle <= 0 {
			t.Errorf("%s: cycles/s %v, allocs/cycle %v, B/cycle %v: want all positive", id, r.CyclesPerSec, r.AllocsPerCycle, r.BytesPerCycle)
		}
	}
	for id := range want {
		t.Errorf("no row for %s", id)
	}

	var md bytes.Buffer
	if err := bench.WriteMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(md.String(), "\n"), "\n")
	if len(lines) != 2+len(rows) {
		t.Errorf("markdown has %d lines, want a header, a rule and %d rows:\n%s", len(lines), len(rows), md.String())
	}
	cols := strings.Count(lines[0], "|")
	for i, l := range lines {
		if strings.Count(l, "|") != cols {
			t.Errorf("markdown line %d has %d '|', the header %d: %q", i, strings.Count(l, "|"), cols, l)
		}
	}
	t.Logf("\n%s", md.String())

	var js bytes.Buffer
	if err := bench.WriteJSON(&js, rows); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"contender", "n", "condition", "cycles", "errors", "p50_ms", "p90_ms", "p99_ms", "max_ms", "cycles_per_sec", "allocs_per_cycle", "bytes_per_cycle", "orphan_keys"} {
		if _, ok := back[0][field]; !ok {
			t.Errorf("JSON row lacks %q: %s", field, js.Bytes()[:min(js.Len(), 400)])
		}
	}
}

// TestOrphanKeysCounted shows that the orphan count is not vacuous: a
// contender that never deletes its key (SET with a TTL on every master) is
// reported with one key per master, and a healthy one beside it with none.
func TestOrphanKeysCounted(t *testing.T) {
	redisproc.Require(t)
	leaky := bench.Contender{
		Name: "leaky",
		Open: func(tg bench.Target) (bench.Locker, error) {
			l := &leakyLocker{key: tg.Key, ttl: tg.TTL}
			for _, a := range tg.Addrs {
				l.clients = append(l.clients, redis.NewClient(bench.GoRedisOptions(a, tg.Dial)))
			}
			return l, nil
		},
	}
	rows, err := bench.Run(t.Context(), bench.Config{
		Ns:         []int{1, 3},
		Contenders: []bench.Contender{leaky, bench.Quorumlock()},
		Cycles:     2,
		Warmup:     1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4: %+v", len(rows), rows)
	}
	for _, r := range rows {
		want := 0
		if r.Contender == "leaky" {
			want = r.N
		}
		if r.OrphanKeys != want || r.Cycles != 2 {
			t.Errorf("%s n=%d: %d orphan keys, %d cycles; want %d and 2", r.Contender, r.N, r.OrphanKeys, r.Cycles, want)
		}
	}
}

type leakyLocker struct {
	clients []*redis.Client
	key     string
	ttl     time.Duration
}

func (l *leakyLocker) Cycle(ctx context.Context) error {
	for _, c := range l.clients {
		if err := c.Set(ctx, l.key, "x", l.ttl).Err(); err != nil {
			return err
		}
	}
	return nil
}

func (l *leakyLocker) Close() error {
	for _, c := range l.clients {
		c.Close()
	}
	return nil
}
