package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// series is one scrape: each sample's value by name and label set.
type series []struct {
	name   string
	labels map[string]string
	value  float64
}

// sampleLine is one line of the Prometheus text format with labels that
// hold no quote or backslash (run's do not).
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)

func parseSeries(t *testing.T, text string) series {
	t.Helper()
	var s series
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a sample line: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		labels := map[string]string{}
		if m[2] != "" {
			for _, kv := range strings.Split(m[2], ",") {
				k, q, ok := strings.Cut(kv, "=")
				if !ok || len(q) < 2 {
					t.Fatalf("label %q in %q", kv, line)
				}
				labels[k] = q[1 : len(q)-1]
			}
		}
		s = append(s, struct {
			name   string
			labels map[string]string
			value  float64
		}{m[1], labels, v})
	}
	return s
}

// sum is the sum of the samples of name whose labels include want
// ("k=v" pairs), and how many there are.
func (s series) sum(name string, want ...string) (float64, int) {
	total, n := 0.0, 0
next:
	for _, x := range s {
		if x.name != name {
			continue
		}
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if x.labels[k] != v {
				continue next
			}
		}
		total += x.value
		n++
	}
	return total, n
}

// has reports whether any sample's name starts with prefix.
func (s series) has(prefix string) bool {
	for _, x := range s {
		if strings.HasPrefix(x.name, prefix) {
			return true
		}
	}
	return false
}

// scraper fetches a /metrics URL without keeping connections.
var scraper = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

func scrape(t *testing.T, url string) (series, error) {
	t.Helper()
	resp, err := scraper.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s\n%s", url, resp.Status, body)
	}
	return parseSeries(t, string(body)), nil
}

// waitBuffer waits until b contains re (at most limit) and returns the
// first match's submatches; it fails early when done closes first.
func waitBuffer(t *testing.T, b *syncBuffer, re *regexp.Regexp, done <-chan struct{}, limit time.Duration) []string {
	t.Helper()
	deadline := time.After(limit)
	for {
		b.mu.Lock()
		m, changed := re.FindStringSubmatch(b.b.String()), b.changed
		b.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-changed:
		case <-done:
			if m := re.FindStringSubmatch(b.String()); m != nil {
				return m
			}
			t.Fatalf("run returned without writing %q; stderr:\n%s", re, b.String())
		case <-deadline:
			t.Fatalf("run did not write %q within %v; stderr:\n%s", re, limit, b.String())
		}
	}
}

// TestRunServesMetrics: run --metrics-addr on a free port (run says which
// at --log-level info) serves the lock's instruments while it waits for a
// lock held elsewhere (contended attempts, not held) and while its command
// runs (one acquisition, renewals, held with validity left); after the
// command ends the lease's hold and release are recorded, and the server
// is gone when run returns.
func TestRunServesMetrics(t *testing.T) {
	addrs := startMasters(t, 3)
	const name = "jobs:metrics"
	holder := holdLock(t, addrs, name)

	var finals []string
	metricsAtExit = func(g prometheus.Gatherer) {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		finals = append(finals, rec.Body.String())
	}
	t.Cleanup(func() { metricsAtExit = nil })

	// The command waits for a line on its stdin: the test holds the run
	// open as long as it scrapes, without sleeping.
	stdin, release := io.Pipe()
	defer release.Close()
	stderr := newSyncBuffer()
	e := &env{stdin: stdin, stdout: io.Discard, stderr: stderr, getenv: func(string) string { return "" }}
	done := make(chan struct{})
	code := -1
	go func() {
		defer close(done)
		code = dispatch(context.Background(), []string{"run", "--nodes", strings.Join(addrs, ","), "--log-level", "info",
			"--metrics-addr", "127.0.0.1:0", "--wait", "-1", "--ttl", "900ms", name, "--", "sh", "-c", "read line"}, e)
	}()
	url := waitBuffer(t, stderr, regexp.MustCompile(`serving metrics on (http://127\.0\.0\.1:\d+/metrics)\n`), done, procLimit)[1]
	waitBuffer(t, stderr, regexp.MustCompile(`waiting for lock "jobs:metrics"`), done, procLimit)

	// Waiting: the attempts meet the holder's keys.
	var s series
	waitUntil(t, procLimit, "a contended attempt on /metrics", func() bool {
		var err error
		if s, err = scrape(t, url); err != nil {
			t.Fatal(err)
		}
		v, _ := s.sum("quorumlock_node_calls_total", "op=acquire", "vote=taken")
		return v >= 2
	})
	if v, n := s.sum("quorumlock_run_lock_held", "lock="+name); n != 1 || v != 0 {
		t.Errorf("while waiting: quorumlock_run_lock_held %v (%d series), want 0", v, n)
	}
	if v, _ := s.sum("quorumlock_node_calls_total", "op=acquire", "vote=taken"); v < 2 {
		t.Errorf("while waiting: %v acquire calls answered taken, want at least a quorum's 2", v)
	}
	if _, n := s.sum("quorumlock_lock_wait_seconds_count"); n != 0 {
		t.Errorf("while waiting: the wait is already recorded (%d series)", n)
	}
	if !s.has("go_goroutines") {
		t.Error("no Go runtime metrics (go_goroutines)")
	}

	// Held: the holder lets go, run takes the lock and starts the command.
	if err := holder.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitBuffer(t, stderr, regexp.MustCompile(`acquired lock "jobs:metrics"`), done, procLimit)
	waitUntil(t, procLimit, "a renewal on /metrics", func() bool {
		var err error
		if s, err = scrape(t, url); err != nil {
			t.Fatal(err)
		}
		n, _ := s.sum("quorumlock_lock_extend_seconds_count", "outcome=ok", "renewal=true", "shape=mutex")
		return n >= 1
	})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"quorumlock_run_lock_held", []string{"lock=" + name}, 1},
		{"quorumlock_lock_wait_seconds_count", []string{"outcome=ok", "shape=mutex"}, 1},
		{"quorumlock_lock_wait_seconds_count", nil, 1}, // and no other outcome
		{"quorumlock_lock_attempts_count", []string{"outcome=ok", "shape=mutex"}, 1},
	} {
		if v, _ := s.sum(c.name, c.labels...); v != c.want {
			t.Errorf("while held: %s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	// The lock came by an acquire round (a quorum's yes), or with the keys
	// the holder's release handed run's waiting call (no call at all:
	// docs/handoff.md, the hold on grants).
	if v, _ := s.sum("quorumlock_node_calls_total", "op=acquire", "vote=yes"); v != 0 && v < 2 {
		t.Errorf("while held: %v acquire calls answered yes, want at least a quorum's 2, or none (held with the hand-overs)", v)
	}
	if v, n := s.sum("quorumlock_run_validity_seconds", "lock="+name); n != 1 || v <= 0 || v > 0.9 {
		t.Errorf("while held: quorumlock_run_validity_seconds %v (%d series), want in (0, 0.9] (--ttl 900ms)", v, n)
	}
	if _, n := s.sum("quorumlock_lease_held_seconds_count"); n != 0 {
		t.Errorf("while held: a lease's hold is already recorded (%d series); it is recorded when the lease ends", n)
	}

	// The command ends: run releases the lock, and the registry records it.
	if _, err := release.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	release.Close()
	select {
	case <-done:
	case <-time.After(procLimit):
		t.Fatalf("run did not return after its command ended; stderr:\n%s", stderr.String())
	}
	if code != 0 {
		t.Fatalf("run: exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
	if len(finals) != 1 {
		t.Fatalf("the registry was gathered %d times at exit, want 1", len(finals))
	}
	f := parseSeries(t, finals[0])
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"quorumlock_lease_held_seconds_count", []string{"end=released", "shape=mutex"}, 1},
		{"quorumlock_lease_held_seconds_count", nil, 1},
		{"quorumlock_lock_release_seconds_count", []string{"outcome=ok", "shape=mutex"}, 1},
		{"quorumlock_run_lock_held", []string{"lock=" + name}, 0},
		{"quorumlock_run_validity_seconds", []string{"lock=" + name}, 0},
	} {
		if v, _ := f.sum(c.name, c.labels...); v != c.want {
			t.Errorf("at exit: %s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	if _, err := scrape(t, url); err == nil {
		t.Errorf("%s still answers after run returned", url)
	}
}

// TestRunMetricsAddrErrors: a --metrics-addr that cannot be listened on is
// a usage error (64), one line naming it, before the lock is tried (here
// no master answers, which would be 69); a bad --log-level too.
func TestRunMetricsAddrErrors(t *testing.T) {
	free, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", free, free+1, free+2)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-addr", "nonsense"}, `--metrics-addr "nonsense": listen tcp: address nonsense: missing port in address`},
		{[]string{"--metrics-addr", "127.0.0.1:99999"}, `--metrics-addr "127.0.0.1:99999": listen tcp: address 99999: invalid port`},
		{[]string{"--metrics-addr", taken.Addr().String()}, fmt.Sprintf("--metrics-addr %q: listen tcp %s: bind: address already in use", taken.Addr(), taken.Addr())},
		{[]string{"--log-level", "loud"}, `invalid value "loud" for flag -log-level: want debug, info, warn or error`},
	} {
		args := append(append([]string{"run", "--nodes", down}, tc.args...), "jobs:a", "--", "true")
		code, out, stderr := runMain(t, args...)
		if code != runUsage || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 || out != "" {
			t.Errorf("quorumlock %q: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", args, code, out, stderr, runUsage, tc.want)
		}
	}
}

// TestRunLogLevels: with one master of three down, run succeeds; at the
// default level it writes nothing (go-redis's failed dials are not shown),
// at debug its records include the library's failed node calls and
// go-redis's own lines, marked component=go-redis.
func TestRunLogLevels(t *testing.T) {
	addrs := startMasters(t, 2)
	free, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	nodes := strings.Join(append(addrs, fmt.Sprintf("127.0.0.1:%d", free)), ",")
	code, _, stderr := runMain(t, "run", "--nodes", nodes, "jobs:logs", "--", "true")
	if code != 0 || stderr != "" {
		t.Errorf("default level: exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	code, _, stderr = runMain(t, "run", "--nodes", nodes, "--log-level", "debug", "jobs:logs", "--", "true")
	if code != 0 {
		t.Fatalf("debug: exit %d; stderr:\n%s", code, stderr)
	}
	down := fmt.Sprintf("127.0.0.1:%d", free)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^quorumlock run: redis: .*` + regexp.QuoteMeta(down) + `.*connection refused component=go-redis$`),
		regexp.MustCompile(`(?m)^quorumlock run: redlock: node call failed lock=jobs:logs node=` + regexp.QuoteMeta(down) + ` op=acquire vote=refused `),
		regexp.MustCompile(`(?m)^quorumlock run: acquired lock "jobs:logs"`),
		regexp.MustCompile(`(?m)^quorumlock run: released lock "jobs:logs"$`),
	} {
		if !want.MatchString(stderr) {
			t.Errorf("debug: no line matching %s in:\n%s", want, stderr)
		}
	}
}

// TestLineHandler: one line per record, the prefix and message, then the
// attributes in slog's text form (quoted where needed, groups dotted);
// records below the level are dropped.
func TestLineHandler(t *testing.T) {
	var b bytes.Buffer
	l := slog.New(newLineHandler(&b, "p: ", slog.LevelInfo))
	l.Debug("hidden", "k", 1)
	l.Info("plain")
	l.With("lock", "jobs:a").WithGroup("g").Warn("redlock: renewal failed", "took", 1500*time.Millisecond, "err", fmt.Errorf("two words"))
	want := "p: plain\np: redlock: renewal failed lock=jobs:a g.took=1.5s g.err=\"two words\"\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
