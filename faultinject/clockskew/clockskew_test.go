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
	"github.com/quorumlock/quorumlock/faultinject/internal/keywatch"
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
	return clockskew.PrepareT(t)
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

// clockRes covers the resolution of what the tests compare: PTTL answers
// in milliseconds, TIME and a libfaketime spec in microseconds.
const clockRes = time.Millisecond

// reading is one TIME call: the server read its wall clock (server) at some
// real moment between sent and got.
type reading struct{ server, sent, got time.Time }

func readTime(t *testing.T, rdb *redis.Client) reading {
	t.Helper()
	sent := time.Now()
	tm, err := rdb.Time(context.Background()).Result()
	got := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	return reading{server: tm, sent: sent, got: got}
}

// skew returns the server's wall clock minus the real time at the call's
// midpoint.
func (r reading) skew() time.Duration { return r.server.Sub(r.sent.Add(r.got.Sub(r.sent) / 2)) }

// slack is how far skew can be from the server's true skew while its clock
// runs at real speed: half the measured round trip, plus clockRes.
func (r reading) slack() time.Duration { return r.got.Sub(r.sent)/2 + clockRes }

func near(got, want, tol time.Duration) bool { return got >= want-tol && got <= want+tol }

func TestRedisJumpForwardExpiresOnlySkewedServer(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	ctx := context.Background()
	s := startSkewed(t, kit)
	plain := redisproc.StartT(t, redisproc.Config{})
	prdb := newClient(t, plain.Addr())

	if r := readTime(t, s.rdb); !near(r.skew(), 0, r.slack()) {
		t.Fatalf("skew at +0: %v, want 0±%v", r.skew(), r.slack())
	}
	setAt := time.Now()
	for _, c := range []*redis.Client{s.rdb, prdb} {
		if err := c.Set(ctx, "k", "v", 20*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.clock.Set(30*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if r := readTime(t, s.rdb); !near(r.skew(), 30*time.Second, r.slack()) {
		t.Errorf("skew after +30s: %v, want 30s±%v", r.skew(), r.slack())
	}
	if n, err := s.rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("skewed server: EXISTS k = %d, %v; want 0 (expired at once)", n, err)
	}
	// The key was set after setAt: its TTL is 20s less at most the time since.
	pttl, err := prdb.PTTL(ctx, "k").Result()
	if lo := 20*time.Second - time.Since(setAt) - clockRes; err != nil || pttl < lo || pttl > 20*time.Second {
		t.Errorf("server without skew: PTTL k = %v, %v; want [%v, 20s] (key kept)", pttl, err, lo)
	}
}

func TestRedisJumpBackwardExtendsTTL(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	ctx := context.Background()
	s := startSkewed(t, kit)
	const jump = -30 * time.Second
	setAt := time.Now()
	if err := s.rdb.Set(ctx, "k", "v", 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.clock.Set(jump, 1); err != nil {
		t.Fatal(err)
	}
	// Measured: PTTL grows by the jump, 30 s (from +30 to -30 it grows by
	// 60 s): 20s + 30s, less the time since the key was set.
	pttl, err := s.rdb.PTTL(ctx, "k").Result()
	if lo, hi := 50*time.Second-time.Since(setAt)-clockRes, 50*time.Second+clockRes; err != nil || pttl < lo || pttl > hi {
		t.Errorf("PTTL after -30s = %v, %v; want [%v, %v]", pttl, err, lo, hi)
	}
	// Redis's timers run on the real monotonic clock, so it still stops on
	// SIGTERM after a backward jump. Without FAKETIME_DONT_FAKE_MONOTONIC its
	// timers wait out the jump (SIGTERM took ~30 s): wait for the exit for
	// at most half of that.
	begin := time.Now()
	if err := syscall.Kill(s.srv.PID(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for s.srv.Running() {
		if time.Since(begin) > -jump/2 {
			t.Fatalf("redis-server under %v skew still running %v after SIGTERM: its timers wait out the jump", jump, time.Since(begin))
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
	calBegin := time.Now()
	if err := s.clock.Calibrate(ctx, func(ctx context.Context) (time.Time, error) { return s.rdb.Time(ctx).Result() }); err != nil {
		t.Fatal(err)
	}
	// The start time Calibrate found is off by at most one of its TIME
	// calls, so by at most the whole call.
	calErr := time.Since(calBegin)
	t.Logf("libfaketime start: %v after the time taken before exec (calibrated within %v)", s.clock.Start().Sub(assumed), calErr)
	time.Sleep(time.Second) // the experiment: age the process, so an uncompensated rate change would jump by ~9s

	setAt := time.Now()
	if err := s.clock.Set(0, 10); err != nil {
		t.Fatal(err)
	}
	setDone := time.Now()
	// From Set on the clock gains 9ms per real ms; an error e in the start
	// time shifts it by 9e. A jump would add 9 times the process's age.
	r := readTime(t, s.rdb)
	lo := -r.slack() - 9*calErr
	hi := 9*r.got.Sub(setAt) + r.slack() + 9*calErr
	if d := r.skew(); d < lo || d > hi {
		t.Errorf("skew right after rate x10: %v, want [%v, %v] (no jump)", d, lo, hi)
	}
	if jump := 9 * setAt.Sub(s.clock.Start()); hi >= jump {
		t.Errorf("the bound %v cannot tell a jump of %v from no jump (Set and TIME took %v, calibration %v)", hi, jump, r.got.Sub(setAt), calErr)
	}
	sent := time.Now()
	if err := s.rdb.Set(ctx, "k", "v", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	// At x10 (an exact rate) the 5 s TTL lasts 0.5 s real from the moment
	// the server ran the SET; 5 s real would mean no skew.
	const realTTL = 500 * time.Millisecond
	lastSeen, goneBy := keywatch.Expiry(ctx, t, s.rdb, "k", 10*realTTL)
	t.Logf("PX 5000 key expired after %v-%v real at rate x10", lastSeen.Sub(done), goneBy.Sub(sent))
	if lastSeen.After(done.Add(realTTL+clockRes)) || goneBy.Before(sent.Add(realTTL-clockRes)) {
		t.Errorf("PX 5000 at x10: seen %v after the SET returned, gone %v after it was sent; want it to expire %v after the SET ran", lastSeen.Sub(done), goneBy.Sub(sent), realTTL)
	}

	// Back to rate 1 without a jump: the offset gained so far stays. At
	// rate 1 the offset no longer depends on the start time: the reading is
	// exact within its slack.
	if err := s.clock.SetRate(1); err != nil {
		t.Fatal(err)
	}
	want := s.clock.Offset(time.Now())
	if r := readTime(t, s.rdb); !near(r.skew(), want, r.slack()) || want < 9*goneBy.Sub(setDone) {
		t.Errorf("skew after SetRate(1): %v, want %v±%v (at least 9 x %v gained at x10)", r.skew(), want, r.slack(), goneBy.Sub(setDone))
	}
	if err := s.clock.Set(0, 1); err != nil {
		t.Fatal(err)
	}
	if r := readTime(t, s.rdb); !near(r.skew(), 0, r.slack()) {
		t.Errorf("skew after Set(0, 1): %v, want 0±%v", r.skew(), r.slack())
	}
}

// TestRawRateChangeJumps pins down libfaketime's own semantics, which Clock
// compensates for: a raw spec "+0 x10" applies the rate to the whole time
// since the process started, so the clock jumps by 9 * age.
func TestRawRateChangeJumps(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	s := startSkewed(t, kit)
	time.Sleep(500 * time.Millisecond) // the experiment: age the process, so that the jump is ~9 x 0.5s
	if err := clockskew.WriteFile(s.clock.Path(), 0, 10); err != nil {
		t.Fatal(err)
	}
	r := readTime(t, s.rdb)
	start := s.clock.Start()
	t.Logf("raw \"+0 x10\" at process age %v: clock jumped %v", r.sent.Sub(start), r.skew())
	// The clock now reads S + 10(t - S): a skew of 9(t - S), where S is
	// libfaketime's start inside the process, between clock.Start and the
	// first PONG (s.ready later; on a loaded machine exec and start-up take
	// a while), and t is when the server read it, between sent and got.
	lo := 9*(r.sent.Sub(start)-s.ready) - r.slack()
	hi := 9*r.got.Sub(start) + r.slack()
	if d := r.skew(); d < lo || d > hi {
		t.Errorf("jump %v, want [%v, %v] (~9 x the process's age)", d, lo, hi)
	}
	if lo <= r.slack() {
		t.Errorf("the bound %v cannot tell a jump from no jump (start-up took %v)", lo, s.ready)
	}
}

func TestRedisSkewSurvivesRestart(t *testing.T) {
	t.Parallel()
	kit := requireKit(t)
	s := startSkewed(t, kit)
	const offset = 30 * time.Second
	if err := s.clock.Set(offset, 2); err != nil {
		t.Fatal(err)
	}
	// At x2 the clock gains 1s per real second. Wait until the server's
	// clock shows a gain beyond the reading's slack and the start-up time,
	// so that a restart that dropped the gain would show.
	var before reading
	limit := time.Now().Add(time.Minute)
	for {
		before = readTime(t, s.rdb)
		if before.skew()-before.slack()-offset > s.ready {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("skew %v a minute after Set(+30s, x2): the clock does not gain", before.skew())
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	restartAt := time.Now()
	if err := s.clock.Restarted(restartAt); err != nil {
		t.Fatal(err)
	}
	if err := s.srv.Restart(); err != nil {
		t.Fatal(err)
	}
	// Restarted assumed libfaketime starts at restartAt; it started later,
	// before the server answered, which at x2 puts the clock behind by as
	// much.
	lag := time.Since(restartAt)
	want := s.clock.Offset(time.Now())
	r := readTime(t, s.rdb)
	if d := r.skew(); d < want-lag-r.slack() || d > want+r.slack() {
		t.Errorf("skew after restart: %v, want [%v, %v] (+30s, then 1s gained per real second at x2; restart took %v)", d, want-lag-r.slack(), want+r.slack(), lag)
	}
	// The restart's lag never exceeds the gain since the reading before the
	// kill, so the clock cannot read less than then: the gain survived.
	if r.skew()+r.slack() < before.skew()-before.slack() {
		t.Errorf("skew after restart %v, below the %v read before the kill: the gain at x2 was lost", r.skew(), before.skew())
	}
}
