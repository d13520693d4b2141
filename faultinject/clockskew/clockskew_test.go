package clockskew_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/faultinject/clockskew"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSpec(t *testing.T) {
	for _, tc := range []struct {
		offset time.Duration
		rate   float64
		want   string
	}{
		{0, 1, "+0.000000 x1"},
		{30 * time.Second, 1, "+30.000000 x1"},
		{-30 * time.Second, 1, "-30.000000 x1"},
		{-1500 * time.Millisecond, 10, "-1.500000 x10"},
		{1234567 * time.Microsecond, 1.05, "+1.234567 x1.05"},
		{0, 0.000001, "+0.000000 x0.000001"},
	} {
		got, err := clockskew.Spec(tc.offset, tc.rate)
		if err != nil || got != tc.want {
			t.Errorf("Spec(%v, %v) = %q, %v; want %q", tc.offset, tc.rate, got, err, tc.want)
		}
	}
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		_, err := clockskew.Spec(0, rate)
		if err == nil || !strings.Contains(err.Error(), "rate") {
			t.Errorf("Spec(0, %v): err = %v, want an error naming the rate", rate, err)
		}
		if err := clockskew.WriteFile(filepath.Join(t.TempDir(), "ts"), 0, rate); err == nil {
			t.Errorf("WriteFile(rate %v): no error", rate)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "faketime")
	for _, off := range []time.Duration{time.Second, -2 * time.Second} {
		if err := clockskew.WriteFile(path, off, 2); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "-2.000000 x2\n" {
		t.Fatalf("file = %q, %v", b, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (readable by a process of another user)", st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if err := clockskew.WriteFile(filepath.Join(dir, "no", "such", "dir"), 0, 1); err == nil ||
		!strings.Contains(err.Error(), "no/such/dir") {
		t.Errorf("WriteFile in a missing dir: err = %v, want one naming the path", err)
	}
}

// requireKit fails under CI=true, and skips otherwise, when clock skew or
// redis-server is not available here.
func requireKit(t *testing.T) *clockskew.Kit {
	t.Helper()
	redisproc.Require(t)
	redisproc.RequireOrSkip(t, clockskew.Available())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kit, err := clockskew.Prepare(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return kit
}

func TestPrepareCached(t *testing.T) {
	requireKit(t)
	dir := t.TempDir()
	ctx := context.Background()
	k1, err := clockskew.Prepare(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(k1.ShimPath())
	begin := time.Now()
	k2, err := clockskew.Prepare(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if k2.ShimPath() != k1.ShimPath() {
		t.Errorf("second Prepare: %q, want cached %q", k2.ShimPath(), k1.ShimPath())
	}
	st2, _ := os.Stat(k2.ShimPath())
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Error("second Prepare rebuilt the shim")
	}
	t.Logf("cached Prepare: %v", time.Since(begin))
	env := strings.Join(k1.Env("/x/ts"), " ")
	want := "LD_PRELOAD=" + k1.ShimPath() + ":" + k1.LibfaketimePath()
	if !strings.HasPrefix(env, want+" ") || !strings.Contains(env, "FAKETIME_TIMESTAMP_FILE=/x/ts") {
		t.Errorf("Env = %q, want %q first (shim before libfaketime) and the file", env, want)
	}
}

type skewed struct {
	srv   *redisproc.Server
	clock *clockskew.Clock
	rdb   *redis.Client
	ready time.Duration // from clock.Start to the first PONG
}

// startSkewed starts a redis-server under a Clock at real time.
func startSkewed(t *testing.T, kit *clockskew.Kit) *skewed {
	t.Helper()
	ts := filepath.Join(t.TempDir(), "faketime")
	begin := time.Now()
	clock, err := clockskew.NewClock(ts, begin)
	if err != nil {
		t.Fatal(err)
	}
	// A deadlock at start-up (the jemalloc + libfaketime trap) shows up as
	// no PONG within StartTimeout.
	srv, err := redisproc.Start(redisproc.Config{Env: kit.Env(ts), StartTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("redis-server under libfaketime did not start (deadlock?): %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ready := time.Since(begin)
	t.Logf("redis-server under libfaketime answered PING after %v", ready)
	rdb := newClient(t, srv.Addr())
	return &skewed{srv: srv, clock: clock, rdb: rdb, ready: ready}
}

func newClient(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true, Protocol: 2})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// skewOf returns the server's wall clock minus the real time.
func skewOf(t *testing.T, rdb *redis.Client) time.Duration {
	t.Helper()
	t1 := time.Now()
	tm, err := rdb.Time(context.Background()).Result()
	t2 := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	return tm.Sub(t1.Add(t2.Sub(t1) / 2))
}

func near(got, want, tol time.Duration) bool { return got >= want-tol && got <= want+tol }

func TestRedisJumpForwardExpiresOnlySkewedServer(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	ctx := context.Background()
	s := startSkewed(t, kit)
	plain := redisproc.StartT(t, redisproc.Config{})
	prdb := newClient(t, plain.Addr())

	if d := skewOf(t, s.rdb); !near(d, 0, 200*time.Millisecond) {
		t.Fatalf("skew at +0: %v, want ~0", d)
	}
	for _, c := range []*redis.Client{s.rdb, prdb} {
		if err := c.Set(ctx, "k", "v", 20*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.clock.Set(30*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if d := skewOf(t, s.rdb); !near(d, 30*time.Second, 50*time.Millisecond) {
		t.Errorf("skew after +30s: %v", d)
	}
	if n, err := s.rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("skewed server: EXISTS k = %d, %v; want 0 (expired at once)", n, err)
	}
	if pttl, err := prdb.PTTL(ctx, "k").Result(); err != nil || pttl < 19*time.Second {
		t.Errorf("server without skew: PTTL k = %v, %v; want ~20s (key kept)", pttl, err)
	}
}

func TestRedisJumpBackwardExtendsTTL(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	ctx := context.Background()
	s := startSkewed(t, kit)
	if err := s.rdb.Set(ctx, "k", "v", 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.clock.Set(-30*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	// Measured: PTTL grows by the jump, 30 s (from +30 to -30 it grows by 60 s).
	pttl, err := s.rdb.PTTL(ctx, "k").Result()
	if err != nil || !near(pttl, 50*time.Second, 200*time.Millisecond) {
		t.Errorf("PTTL after -30s = %v, %v; want ~50s", pttl, err)
	}
	// Redis's timers run on the real monotonic clock, so it still stops at once
	// on SIGTERM after a backward jump (without FAKETIME_DONT_FAKE_MONOTONIC
	// this took ~30 s).
	begin := time.Now()
	if err := syscall.Kill(s.srv.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for s.srv.Running() {
		if time.Since(begin) > 5*time.Second {
			t.Fatalf("redis-server under -30s skew still running %v after SIGTERM", time.Since(begin))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("SIGTERM to exit under -30s skew: %v", time.Since(begin))
}

func TestRedisRateTenfold(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	ctx := context.Background()
	s := startSkewed(t, kit)
	assumed := s.clock.Start()
	if err := s.clock.Calibrate(ctx, func(ctx context.Context) (time.Time, error) { return s.rdb.Time(ctx).Result() }); err != nil {
		t.Fatal(err)
	}
	t.Logf("libfaketime start: %v after the time taken before exec", s.clock.Start().Sub(assumed))
	time.Sleep(time.Second) // let the process age, so an uncompensated rate change would jump by ~9s

	if err := s.clock.Set(0, 10); err != nil {
		t.Fatal(err)
	}
	// At x10 every millisecond between Set and the reading adds 9ms of skew,
	// so the tolerance allows for a loaded machine; a jump would be ~9s.
	if d := skewOf(t, s.rdb); !near(d, 0, 1500*time.Millisecond) {
		t.Errorf("skew right after rate x10: %v, want ~0 (no jump)", d)
	}
	if err := s.rdb.Set(ctx, "k", "v", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	took, err := redisproc.WaitGone(ctx, s.rdb, "k", 3*time.Second)
	if err != nil {
		t.Fatalf("rate x10: %v", err)
	}
	t.Logf("PX 5000 key expired after %v real at rate x10", took)
	if took < 400*time.Millisecond || took > 1200*time.Millisecond { // 5 s real would mean no skew
		t.Errorf("PX 5000 at x10 expired after %v real, want ~0.5s", took)
	}

	// Back to rate 1 without a jump: the offset gained so far stays.
	if err := s.clock.SetRate(1); err != nil {
		t.Fatal(err)
	}
	want := s.clock.Offset(time.Now())
	if d := skewOf(t, s.rdb); !near(d, want, 150*time.Millisecond) || want < 4*time.Second {
		t.Errorf("skew after SetRate(1): %v, want %v (>= 4.5s gained at x10)", d, want)
	}
	if err := s.clock.Set(0, 1); err != nil {
		t.Fatal(err)
	}
	if d := skewOf(t, s.rdb); !near(d, 0, 200*time.Millisecond) {
		t.Errorf("skew after Set(0, 1): %v, want ~0", d)
	}
}

// TestRawRateChangeJumps pins down libfaketime's own semantics, which Clock
// compensates for: a raw spec "+0 x10" applies the rate to the whole time
// since the process started, so the clock jumps by 9 * age.
func TestRawRateChangeJumps(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	s := startSkewed(t, kit)
	time.Sleep(500 * time.Millisecond)
	if err := clockskew.WriteFile(s.clock.Path(), 0, 10); err != nil {
		t.Fatal(err)
	}
	age := time.Since(s.clock.Start())
	d := skewOf(t, s.rdb)
	after := time.Since(s.clock.Start()) // each ms spent reading adds ~10ms
	t.Logf("raw \"+0 x10\" at process age %v: clock jumped %v", age, d)
	// libfaketime counts the age from its own start inside the process,
	// somewhere between clock.Start and the first PONG (s.ready later): on a
	// loaded machine exec and start-up take a while.
	if d > 10*after+100*time.Millisecond || d < 9*(age-s.ready-100*time.Millisecond) {
		t.Errorf("jump %v, want ~9 * %v", d, age)
	}
}

func TestRedisSkewSurvivesRestart(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	s := startSkewed(t, kit)
	if err := s.clock.Set(30*time.Second, 2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := s.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.clock.Restarted(time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	want := s.clock.Offset(time.Now())
	if d := skewOf(t, s.rdb); !near(d, want, 300*time.Millisecond) || want < 30200*time.Millisecond {
		t.Errorf("skew after restart: %v, want %v (+30s, then 1s gained per real second at x2)", d, want)
	}
}
