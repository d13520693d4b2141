package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// TestSideBySideSmoke runs every contender for a few interleaved rounds
// with N=1 and N=3, healthy and with 1ms added in the client, on real
// redis-server processes: every contender completes every cycle, the rows
// are well-formed, and no contender leaves a lock key behind, except
// redsync-failfast, whose calls left behind at the quorum can land after
// its release (an orphan key until the TTL, on which its next Lock can
// fail): it must complete at least one cycle.
func TestSideBySideSmoke(t *testing.T) {
	redisproc.Require(t)
	const cycles = 6
	conds := []bench.Condition{bench.Healthy, bench.Delayed(time.Millisecond)}
	var cases []bench.Case
	for _, c := range conds {
		cases = append(cases, bench.Case{Condition: c})
	}
	rows, err := bench.Run(t.Context(), bench.Config{
		Ns:         []int{1, 3},
		Conditions: cases,
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
		if r.Contender == bench.RedsyncFailFast().Name {
			if r.Cycles == 0 {
				t.Errorf("%s: no cycle completed (%d errors: %q)", id, r.Errors, r.Err)
			}
		} else {
			if r.Cycles != cycles || r.Errors != 0 || r.Err != "" {
				t.Errorf("%s: %d cycles, %d errors (%q), want %d cycles and none", id, r.Cycles, r.Errors, r.Err, cycles)
			}
			// Release guards are not counted: quorumlock leaves one for
			// an acquire its node did not answer within the node timeout
			// (a loaded machine), so that the acquire, if it lands late,
			// is refused; it expires with the TTL.
			if r.OrphanKeys != 0 {
				t.Errorf("%s: %d orphan keys", id, r.OrphanKeys)
			}
		}
		if !(0 < r.P50Ms && r.P50Ms <= r.P90Ms && r.P90Ms <= r.P99Ms && r.P99Ms <= r.MaxMs) {
			t.Errorf("%s: latencies not 0 < p50 <= p90 <= p99 <= max: %v %v %v %v", id, r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs)
		}
		if r.CyclesPerSec <= 0 || r.AllocsPerCycle <= 0 || r.BytesPerCycle <= 0 {
			t.Errorf("%s: cycles/s %v, allocs/cycle %v, B/cycle %v: want all positive", id, r.CyclesPerSec, r.AllocsPerCycle, r.BytesPerCycle)
		}
		if r.GoroutinesAfterClose != 0 {
			t.Errorf("%s: %d goroutines left after Close", id, r.GoroutinesAfterClose)
		}
		// Every contender makes its masters work, and releases (at least)
		// with a script. (The scripts' time is the server's clock time in
		// them: on a loaded machine it can exceed the CPU time.)
		if r.ServerCPUPerCycleUs <= 0 || r.ScriptUsPerCycle <= 0 {
			t.Errorf("%s: server CPU %v µs/cycle, scripts %v µs/cycle: want both positive", id, r.ServerCPUPerCycleUs, r.ScriptUsPerCycle)
		}
	}
	for id := range want {
		t.Errorf("no row for %s", id)
	}

	var md bytes.Buffer
	if err := bench.WriteMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	checkTables(t, md.String(), len(rows))
	t.Logf("\n%s", md.String())

	var js bytes.Buffer
	if err := bench.WriteJSON(&js, rows); err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"contender", "n", "condition", "cycles", "errors", "p50_ms", "p90_ms", "p99_ms", "max_ms",
		"cycles_per_sec", "allocs_per_cycle", "bytes_per_cycle", "cpu_us_per_cycle", "server_cpu_us_per_cycle", "server_script_us_per_cycle", "goroutines_after_loop",
		"goroutines_after_close", "orphan_keys", "guard_keys", "first_lock_after_death_ms", "clients",
		"acquisitions_per_sec", "same_client_share", "handoff_p50_ms", "handoff_p99_ms", "longest_wait_ms", "mean_period_ms", "overlaps"} {
		if _, ok := back[0][field]; !ok {
			t.Errorf("JSON row lacks %q: %s", field, js.Bytes()[:min(js.Len(), 400)])
		}
	}
}

// checkTables checks that md holds markdown tables with as many data rows
// as rows in all and that every line of a table has its header's columns.
func checkTables(t *testing.T, md string, rows int) {
	t.Helper()
	data, cols := 0, 0
	for _, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "|") {
			cols = 0
			continue
		}
		switch {
		case cols == 0:
			cols = strings.Count(l, "|")
		case strings.Count(l, "|") != cols:
			t.Errorf("markdown line has %d '|', its header %d: %q", strings.Count(l, "|"), cols, l)
		case !strings.HasPrefix(l, "|---"):
			data++
		}
	}
	if data != rows {
		t.Errorf("markdown has %d data lines, want %d:\n%s", data, rows, md)
	}
}

// TestOrphanKeysCounted shows that the orphan count is not vacuous: a
// contender that never deletes its key (SET with a TTL on every master) is
// reported with one key per master, and a healthy one beside it with none.
func TestOrphanKeysCounted(t *testing.T) {
	redisproc.Require(t)
	rows, err := bench.Run(t.Context(), bench.Config{
		Ns:         []int{1, 3},
		Contenders: []bench.Contender{leaky(false), bench.Quorumlock()},
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

// leaky sets its key with a TTL on every master, one after another, and
// never deletes it; with pingFirst its first Lock (the warm-up) only pings
// every master, so that only the measured cycles write the key.
func leaky(pingFirst bool) bench.Contender {
	return bench.Contender{
		Name: "leaky",
		Open: func(tg bench.Target) (bench.Locker, error) {
			l := &leakyLocker{key: tg.Key, ttl: tg.TTL, pingFirst: pingFirst}
			for i, m := range tg.Masters {
				var d bench.DialFunc
				if tg.Dial != nil {
					d = tg.Dial[i]
				}
				l.clients = append(l.clients, redis.NewClient(m.GoRedisOptions(d)))
			}
			return l, nil
		},
	}
}

type leakyLocker struct {
	clients   []*redis.Client
	key       string
	ttl       time.Duration
	pingFirst bool
}

// Lock sets the key on every master; it fails when fewer than a majority
// took it.
func (l *leakyLocker) Lock(ctx context.Context) error {
	if l.pingFirst {
		l.pingFirst = false
		for _, c := range l.clients {
			if err := c.Ping(ctx).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	ok := 0
	var first error
	for _, c := range l.clients {
		if err := c.Set(ctx, l.key, "x", l.ttl).Err(); err != nil {
			first = errors.Join(first, err)
			continue
		}
		ok++
	}
	if ok <= len(l.clients)/2 {
		return first
	}
	return nil
}

func (l *leakyLocker) Unlock(context.Context) error { return nil }

func (l *leakyLocker) Close() error {
	for _, c := range l.clients {
		c.Close()
	}
	return nil
}

// TestHungMasterRunsWhatItWasSent: under OneHung the first master answers
// nothing during the measurement (every SET to it times out, and go-redis
// closes the connection it was sent on), and when it returns it runs the
// writes it was sent: the key the leaky contender writes only in its
// measured cycles is then on all three masters, as on a SIGSTOPped server
// that is continued. Without the replay it would be on two.
func TestHungMasterRunsWhatItWasSent(t *testing.T) {
	redisproc.Require(t)
	rows, err := bench.Run(t.Context(), bench.Config{
		Ns:         []int{3},
		Conditions: []bench.Case{{Condition: bench.OneHung}},
		Contenders: []bench.Contender{leaky(true), probe(bench.Hung)},
		Cycles:     2,
		Warmup:     1,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		switch r.Contender {
		case "leaky":
			if r.OrphanKeys != 3 {
				t.Errorf("leaky under one-hung: %d keys left, want 3 (the hung master runs the SETs it was sent when it returns)", r.OrphanKeys)
			}
		case "probe":
			if r.Cycles != 2 || r.Errors != 0 {
				t.Errorf("probe under one-hung: %d cycles, %d errors (%s); want 2 and 0", r.Cycles, r.Errors, r.Err)
			}
		}
	}
}

// TestDeadMaster: under OneDead the first master refuses connections and
// resets the open ones from the first measured cycle on (the probe fails
// any cycle where it answers); quorumlock still locks on the other two,
// and the first cycle after the death is reported.
func TestDeadMaster(t *testing.T) {
	redisproc.Require(t)
	rows, err := bench.Run(t.Context(), bench.Config{
		Ns:         []int{3},
		Conditions: []bench.Case{{Condition: bench.OneDead}},
		Contenders: []bench.Contender{probe(bench.Dead), bench.Quorumlock()},
		Cycles:     4,
		Warmup:     1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	for _, r := range rows {
		if r.Cycles != 4 || r.Errors != 0 || r.FirstLockMs <= 0 || r.OrphanKeys != 0 {
			t.Errorf("%s under one-dead: %d cycles, %d errors (%s), first lock %v ms, %d orphans; want 4, 0, > 0, 0",
				r.Contender, r.Cycles, r.Errors, r.Err, r.FirstLockMs, r.OrphanKeys)
		}
	}
}

// probe checks the fault on the first master: its Lock pings the master
// on the client it kept from Open (whose pooled connection predates the
// fault) and on a fresh client, and fails unless both fail the way the
// fault says: a hung master's replies never come (the call ends at its
// deadline), a dead master's connection is reset (end of file) and a new
// one refused.
func probe(f bench.Fault) bench.Contender {
	return bench.Contender{
		Name: "probe",
		Open: func(tg bench.Target) (bench.Locker, error) {
			p := &probeLocker{f: f, m: tg.Masters[0], dial: tg.Dial[0]}
			p.old = redis.NewClient(tg.Masters[0].GoRedisOptions(p.dial))
			return p, nil
		},
	}
}

type probeLocker struct {
	f    bench.Fault
	m    bench.Master
	dial bench.DialFunc
	old  *redis.Client
	warm bool
}

func (p *probeLocker) Lock(ctx context.Context) error {
	if !p.warm { // the warm-up cycle: healthy, the pooled connection opens
		p.warm = true
		return p.old.Ping(ctx).Err()
	}
	fresh := redis.NewClient(p.m.GoRedisOptions(p.dial))
	defer fresh.Close()
	for _, c := range []*redis.Client{p.old, fresh} {
		pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			return errors.New("probe: the faulted master answered")
		case p.f == bench.Hung && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err):
			return fmt.Errorf("probe: hung master: %w, want a timeout", err)
		case p.f == bench.Dead && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("probe: dead master: %w, want end of file, reset or refused", err)
		}
	}
	return nil
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func (p *probeLocker) Unlock(context.Context) error { return nil }
func (p *probeLocker) Close() error                 { return p.old.Close() }

// TestGoroutinesCounted: a contender that starts two goroutines when it
// opens, ends one on Close and leaves the other running is reported with 2
// goroutines after the loop and 1 after Close; quorumlock beside it with
// none after Close.
func TestGoroutinesCounted(t *testing.T) {
	redisproc.Require(t)
	release := make(chan struct{})
	defer close(release)
	spawner := bench.Contender{
		Name: "spawner",
		Open: func(bench.Target) (bench.Locker, error) {
			s := &spawnLocker{stop: make(chan struct{})}
			go func() { <-s.stop }()
			go func() { <-release }() // outlives Close
			return s, nil
		},
	}
	rows, err := bench.Run(t.Context(), bench.Config{
		Ns:         []int{1},
		Contenders: []bench.Contender{spawner, bench.Quorumlock()},
		Cycles:     2,
		Warmup:     1,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		want := [2]int{2, 1}
		if r.Contender == "quorumlock" {
			want = [2]int{r.GoroutinesAfterLoop, 0}
		}
		if got := [2]int{r.GoroutinesAfterLoop, r.GoroutinesAfterClose}; got != want {
			t.Errorf("%s: goroutines after the loop and after Close %v, want %v", r.Contender, got, want)
		}
	}
}

type spawnLocker struct{ stop chan struct{} }

func (s *spawnLocker) Lock(context.Context) error   { return nil }
func (s *spawnLocker) Unlock(context.Context) error { return nil }
func (s *spawnLocker) Close() error                 { close(s.stop); return nil }

// TestContentionSmoke runs the contention measurement with 3 clients on
// 3 masters for quorumlock and redsync: both make acquisitions with no two
// holders at once, the shares and handoffs are consistent, and no key is
// left behind.
func TestContentionSmoke(t *testing.T) {
	redisproc.Require(t)
	rows, err := bench.Run(t.Context(), bench.Config{
		Ns:         []int{3},
		Contenders: []bench.Contender{bench.Quorumlock(), bench.Redsync()},
		Cycles:     1,
		Warmup:     1,
		Contention: bench.Contention{Clients: 3, Ns: []int{3}, Duration: 600 * time.Millisecond, Rounds: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, r := range rows {
		if r.Clients == 0 {
			continue
		}
		seen++
		if r.Condition != "contention-3" || r.N != 3 || r.Cycles < 2 || r.Overlaps != 0 || r.OrphanKeys != 0 {
			t.Errorf("%s: condition %q N=%d, %d acquisitions, %d overlaps, %d orphans; want contention-3, N=3, >= 2, 0, 0",
				r.Contender, r.Condition, r.N, r.Cycles, r.Overlaps, r.OrphanKeys)
		}
		if r.SameClientShare < 0 || r.SameClientShare > 1 || r.AcquisitionsPerSec <= 0 || r.LongestWaitMs < r.MaxMs || r.MeanPeriodMs <= 0 {
			t.Errorf("%s: same-client share %v, acq/s %v, longest wait %v < max completed wait %v, period %v",
				r.Contender, r.SameClientShare, r.AcquisitionsPerSec, r.LongestWaitMs, r.MaxMs, r.MeanPeriodMs)
		}
		if r.SameClientShare < 1 && r.HandoffP50Ms <= 0 {
			t.Errorf("%s: handoffs to another client but handoff p50 %v", r.Contender, r.HandoffP50Ms)
		}
		// Only quorumlock's Observer counts failed retries.
		if counted := r.FailedRetriesPerAcq >= 0; counted != (r.Contender == "quorumlock") {
			t.Errorf("%s: failed retries per acquisition %v: counted %v", r.Contender, r.FailedRetriesPerAcq, counted)
		}
	}
	if seen != 2 {
		t.Errorf("%d contention rows, want 2", seen)
	}
}

// TestParseMastersHidesPasswords: a master given as a URL with a password
// prints as host:port, and a URL redisnode.Dial refuses is refused with
// its error, without the password.
func TestParseMastersHidesPasswords(t *testing.T) {
	const secret = "s3cr3t-Pw"
	ms, err := bench.ParseMasters([]string{"redis://u:" + secret + "@127.0.0.1:6390/2", "127.0.0.1:6391"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%v %+v %#v %s", ms, ms, ms, ms[0]); strings.Contains(got, secret) || !strings.Contains(got, "127.0.0.1:6390") {
		t.Errorf("masters print as %q: want host:port, no password", got)
	}
	if o := ms[0].GoRedisOptions(nil); o.Password != secret || o.Username != "u" || o.DB != 2 {
		t.Errorf("go-redis options user %q db %d, password set %v; want u, 2, true", o.Username, o.DB, o.Password == secret)
	}
	for _, bad := range []string{"redis://u:" + secret + "@h:99999", "rediss://:" + secret + "@h:1?x=y", "redis://:" + secret + "@"} {
		_, err := bench.ParseMasters([]string{bad})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("ParseMasters(%q) = %v: want an error without the password", strings.ReplaceAll(bad, secret, "***"), err)
		}
	}
}

// TestWriteSVG: the chart is well-formed XML with one line per contender
// measured at several N and one bar per contention row.
func TestWriteSVG(t *testing.T) {
	rows := []bench.Row{
		{Contender: "a", N: 1, Condition: "healthy", Cycles: 1, P50Ms: 0.1},
		{Contender: "a", N: 3, Condition: "healthy", Cycles: 1, P50Ms: 0.3},
		{Contender: "b", N: 1, Condition: "healthy", Cycles: 1, P50Ms: 0.2},
		{Contender: "a", N: 3, Condition: "contention-8", Clients: 8, Cycles: 9, SameClientShare: 0.25},
		{Contender: "c<&>", N: 3, Condition: "contention-8", Clients: 8, Cycles: 9, SameClientShare: 0.5},
	}
	var b bytes.Buffer
	if err := bench.WriteSVG(&b, rows); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Polylines []struct{} `xml:"polyline"`
		Rects     []struct {
			Width string `xml:"width,attr"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b.String())
	}
	if len(doc.Polylines) != 1 || len(doc.Rects) != 3 { // the background and two bars
		t.Errorf("%d lines and %d rects, want 1 and 3:\n%s", len(doc.Polylines), len(doc.Rects), b.String())
	}
	if doc.Rects[1].Width != "195.0" || doc.Rects[2].Width != "130.0" {
		t.Errorf("bar widths %q, %q: want 75%% and 50%% of 260", doc.Rects[1].Width, doc.Rects[2].Width)
	}
}
