package faultinject

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
	"github.com/quorumlock/quorumlock/faultinject/internal/keywatch"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dockerRequire fails the test under CI=true, and skips it otherwise, when no
// Docker engine answers.
func dockerRequire(t *testing.T) {
	t.Helper()
	if err := dockerAvailable(context.Background()); err != nil {
		redisproc.RequireOrSkip(t, fmt.Errorf("docker backend tests need a Docker engine: %w", err))
	}
}

// dockerStart starts one docker backend with a fresh label and a server per
// persistence given, all removed at cleanup; cleanup also checks that no
// container of the label is left.
func dockerStart(t *testing.T, ps ...Persistence) (*dockerBackend, []server) {
	t.Helper()
	dockerRequire(t)
	var b [3]byte
	_, _ = rand.Read(b[:])
	label := "qltest-" + hex.EncodeToString(b[:]) + "-" + strings.ToLower(strings.TrimPrefix(t.Name(), "TestDocker"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	be, err := newDockerBackend(ctx, Config{Label: label, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	db := be.(*dockerBackend)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := db.pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {dockerLabelCluster + "=" + label}}, Context: ctx})
		if err != nil {
			t.Errorf("listing containers: %v", err)
		} else if len(cs) != 0 {
			t.Errorf("%d containers with label %s=%s left after Close", len(cs), dockerLabelCluster, label)
		}
		if err := db.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	srvs := make([]server, len(ps))
	for i, p := range ps {
		s, err := db.StartServer(ctx, ServerSpec{Index: i, Persistence: p, Label: label})
		if err != nil {
			t.Fatal(err)
		}
		srvs[i] = s
		dir := s.(*dockerServer).dir
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				t.Error(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("temp dir %s left after Close (%v)", dir, err)
			}
		})
	}
	return db, srvs
}

// dockerClient returns a client of the server itself whose calls honour their ctx
// deadline (go-redis ignores it on socket I/O by default).
func dockerClient(t *testing.T, s server) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1, DisableIdentity: true,
		Protocol: 2, ContextTimeoutEnabled: true, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func dockerCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestDockerImageCached(t *testing.T) {
	dockerRequire(t)
	be, _ := dockerStart(t)
	begin := time.Now()
	img, err := ensureRedisImage(dockerCtx(t, 30*time.Second), be.pool.Client)
	if err != nil {
		t.Fatal(err)
	}
	if img != be.image || !strings.HasPrefix(img.tag, imageRepo+":") {
		t.Errorf("image %+v, want the cached %+v", img, be.image)
	}
	t.Logf("image %s: %.1f MB of host files, clock skew support %v, cached lookup %v", img.tag, float64(img.size)/1e6, img.faketime, time.Since(begin))
	if _, err := be.pool.Client.InspectImage(img.tag); err != nil {
		t.Errorf("inspecting %s: %v", img.tag, err)
	}
}

func TestDockerKillRestartWithoutPersistence(t *testing.T) {
	t.Parallel()
	_, srvs := dockerStart(t, NoPersistence)
	s, c := srvs[0], dockerClient(t, srvs[0])
	ctx := dockerCtx(t, 30*time.Second)
	if err := c.Set(ctx, "k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(ctx); err != nil {
		t.Errorf("second Kill: %v", err)
	}
	if err := c.Ping(dockerCtx(t, time.Second)).Err(); err == nil {
		t.Error("PING on a killed container succeeded")
	}
	begin := time.Now()
	if err := s.Start(ctx, NoPersistence); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart (docker start) took %v", time.Since(begin))
	if s.Addr() != srvs[0].Addr() {
		t.Errorf("address changed across restart")
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("after restart without persistence: EXISTS k = %d, %v; want 0", n, err)
	}
	if err := s.Start(ctx, NoPersistence); err == nil {
		t.Error("Start on a running server: no error")
	}
}

func TestDockerKillRestartAOFAlways(t *testing.T) {
	t.Parallel()
	_, srvs := dockerStart(t, AOFAlways)
	s, c := srvs[0], dockerClient(t, srvs[0])
	ctx := dockerCtx(t, 30*time.Second)
	setAt := time.Now()
	if err := c.Set(ctx, "k", "v", 60*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := s.Start(ctx, AOFAlways); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart with AOF (same container) took %v", time.Since(begin))
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after kill + AOF restart: GET k = %q, %v; want v", v, err)
	}
	// The AOF keeps the key's expiry time: 60s from the SET, which ran
	// after setAt.
	pttl, err := c.PTTL(ctx, "k").Result()
	if lo := 60*time.Second - time.Since(setAt) - dockerClockRes; err != nil || pttl < lo || pttl > 60*time.Second {
		t.Errorf("after kill + AOF restart: PTTL k = %v, %v; want the TTL kept ([%v, 60s])", pttl, err, lo)
	}
	// Changing the persistence replaces the container: the data goes.
	if err := s.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, NoPersistence); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("after restart AOF -> none: EXISTS k = %d, %v; want 0", n, err)
	}
	if err := s.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, AOFAlways); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("after restart none -> AOF: EXISTS k = %d, %v; want 0 (no stale AOF)", n, err)
	}
}

func TestDockerPauseResume(t *testing.T) {
	t.Parallel()
	_, srvs := dockerStart(t, NoPersistence)
	s, c := srvs[0], dockerClient(t, srvs[0])
	ctx := dockerCtx(t, 30*time.Second)
	if err := c.Ping(ctx).Err(); err != nil { // warm the pooled connection
		t.Fatal(err)
	}
	if err := s.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	// Without the deadline a PING on a paused container would never
	// return: it must return, with a timeout, and not before the deadline.
	const deadline = 50 * time.Millisecond
	begin := time.Now()
	pinged := make(chan error, 1)
	go func() { pinged <- c.Ping(dockerCtx(t, deadline)).Err() }()
	var err error
	select {
	case err = <-pinged:
	case <-ctx.Done():
		t.Fatalf("PING on a paused container with a %v deadline has not returned (%v)", deadline, time.Since(begin))
	}
	took := time.Since(begin)
	if !errors.Is(err, context.DeadlineExceeded) && !dockerIsTimeout(err) {
		t.Errorf("PING on a paused container: %v after %v, want a timeout", err, took)
	}
	if took < deadline {
		t.Errorf("PING on a paused container failed after %v, before its %v deadline: %v", took, deadline, err)
	}
	t.Logf("PING on a paused container: %v after %v", err, took)
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Resume: %v", err)
	}
	// A paused container can be killed, and started again.
	if err := s.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(ctx); err != nil {
		t.Fatalf("Kill of a paused container: %v", err)
	}
	if err := s.Start(ctx, NoPersistence); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after kill while paused + start: %v", err)
	}
}

func dockerIsTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

func dockerRequireSkew(t *testing.T, be *dockerBackend) {
	t.Helper()
	if !be.image.faketime {
		redisproc.RequireOrSkip(t, fmt.Errorf("no clock skew in the docker image: %v", be.image.noSkew))
	}
}

// dockerClockRes covers the resolution of what the tests compare: PTTL
// answers in milliseconds, TIME and a libfaketime spec in microseconds.
const dockerClockRes = time.Millisecond

// dockerReading is one TIME call: the server read its wall clock (server)
// at some real moment between sent and got.
type dockerReading struct{ server, sent, got time.Time }

func dockerTime(t *testing.T, c *redis.Client) dockerReading {
	t.Helper()
	sent := time.Now()
	tm, err := c.Time(dockerCtx(t, 5*time.Second)).Result()
	got := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	return dockerReading{server: tm, sent: sent, got: got}
}

// skew returns the server's wall clock minus the real time at the call's
// midpoint.
func (r dockerReading) skew() time.Duration { return r.server.Sub(r.sent.Add(r.got.Sub(r.sent) / 2)) }

// slack is how far skew can be from the server's true skew while its clock
// runs at real speed: half the measured round trip, plus dockerClockRes.
func (r dockerReading) slack() time.Duration { return r.got.Sub(r.sent)/2 + dockerClockRes }

// near reports whether the reading's skew is want within its slack.
func (r dockerReading) near(want time.Duration) bool {
	return r.skew() >= want-r.slack() && r.skew() <= want+r.slack()
}

func TestDockerClockJumpOnOneContainerOnly(t *testing.T) {
	t.Parallel()
	be, srvs := dockerStart(t, NoPersistence, NoPersistence)
	dockerRequireSkew(t, be)
	ctx := dockerCtx(t, 30*time.Second)
	c0, c1 := dockerClient(t, srvs[0]), dockerClient(t, srvs[1])
	var setAt time.Time
	for i, c := range []*redis.Client{c0, c1} {
		if r := dockerTime(t, c); !r.near(0) {
			t.Errorf("skew at start: %v, want 0±%v", r.skew(), r.slack())
		}
		if i == 1 {
			setAt = time.Now()
		}
		if err := c.Set(ctx, "k", "v", 20*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := srvs[0].SetClock(ctx, 30*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if r := dockerTime(t, c0); !r.near(30 * time.Second) {
		t.Errorf("skew after +30s: %v, want 30s±%v", r.skew(), r.slack())
	}
	if n, err := c0.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("container at +30s: EXISTS k = %d, %v; want 0 (expired at once)", n, err)
	}
	// The key was set after setAt: its TTL is 20s less at most the time since.
	pttl, err := c1.PTTL(ctx, "k").Result()
	if lo := 20*time.Second - time.Since(setAt) - dockerClockRes; err != nil || pttl < lo || pttl > 20*time.Second {
		t.Errorf("other container: PTTL k = %v, %v; want [%v, 20s]", pttl, err, lo)
	}
	// The skew survives a restart.
	if err := srvs[0].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srvs[0].Start(ctx, NoPersistence); err != nil {
		t.Fatal(err)
	}
	// At rate 1 the offset does not depend on when libfaketime started in
	// the new process: the reading is exact within its slack.
	if r := dockerTime(t, c0); !r.near(30 * time.Second) {
		t.Errorf("skew after restart: %v, want +30s±%v kept", r.skew(), r.slack())
	}
	if err := srvs[0].SetClock(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if r := dockerTime(t, c0); !r.near(0) {
		t.Errorf("skew after SetClock(0, 1): %v, want 0±%v", r.skew(), r.slack())
	}
}

func TestDockerClockRateTenfold(t *testing.T) {
	t.Parallel()
	be, srvs := dockerStart(t, NoPersistence)
	dockerRequireSkew(t, be)
	ctx := dockerCtx(t, 30*time.Second)
	c := dockerClient(t, srvs[0])
	time.Sleep(time.Second) // the experiment: age the process, so that a raw rate change would jump by 9x its age (~9s)
	setAt := time.Now()
	if err := srvs[0].SetClock(ctx, 0, 10); err != nil {
		t.Fatal(err)
	}
	// At x10 each millisecond between SetClock and the reading adds 9ms,
	// and the calibrated start time's error 9 times its own. An
	// uncompensated rate change would jump by 9 times the process's age: the
	// skew must stay below half of that.
	r := dockerTime(t, c)
	jump := 9 * setAt.Sub(srvs[0].(*dockerServer).clock.Start())
	if d := r.skew(); d <= -jump/2 || d >= jump/2 {
		t.Errorf("skew right after rate x10: %v, want well below the %v jump of an uncompensated rate change", d, jump)
	}
	t.Logf("skew %v after rate x10 (%v after SetClock began); a jump would be %v", r.skew(), r.got.Sub(setAt), jump)
	sent := time.Now()
	if err := c.Set(ctx, "k", "v", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	// At x10 (an exact rate) the 5 s TTL lasts 0.5 s real from the moment
	// the server ran the SET; 5 s real would mean no skew.
	const realTTL = 500 * time.Millisecond
	lastSeen, goneBy := keywatch.Expiry(ctx, t, c, "k", 10*realTTL)
	t.Logf("PX 5000 key expired after %v-%v real at rate x10 (libfaketime start lag after docker's StartedAt: %v)", lastSeen.Sub(done), goneBy.Sub(sent), srvs[0].(*dockerServer).startLag)
	if lastSeen.After(done.Add(realTTL+dockerClockRes)) || goneBy.Before(sent.Add(realTTL-dockerClockRes)) {
		t.Errorf("PX 5000 at x10: seen %v after the SET returned, gone %v after it was sent; want it to expire %v after the SET ran", lastSeen.Sub(done), goneBy.Sub(sent), realTTL)
	}
}

func TestDockerRemoveLeftovers(t *testing.T) {
	t.Parallel()
	be, srvs := dockerStart(t, NoPersistence, AOFAlways)
	label := srvs[0].(*dockerServer).spec.Label
	ctx := dockerCtx(t, 30*time.Second)
	// A dir of another label that starts with this one is not touched.
	other, err := os.MkdirTemp("", "quorumlock-docker-"+label+"x-node0-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(other)
	// Simulate a crashed run: the containers and dirs are still there.
	n, err := RemoveDockerLeftovers(ctx, label)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("RemoveDockerLeftovers removed %d containers, want 2", n)
	}
	if dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "quorumlock-docker-"+label+"-node*")); len(dirs) != 0 {
		t.Errorf("temp dirs left: %v", dirs)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("dir %s of label %sx removed by RemoveDockerLeftovers(%q): %v", other, label, label, err)
	}
	// A new run of the same label starts cleanly, replacing what is left.
	s, err := be.StartServer(ctx, ServerSpec{Index: 0, Label: label})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := RemoveDockerLeftovers(ctx, "bad label"); err == nil {
		t.Error("RemoveDockerLeftovers with a bad label: no error")
	}
}

// With no engine at DOCKER_HOST, the reason names the endpoint and the dial
// error under the client's, not the client's internal URL.
func TestDockerUnavailableSaysWhy(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/quorumlock.sock")
	err := dockerAvailable(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no Docker engine answers at unix:///nonexistent/quorumlock.sock")
	assert.Contains(t, err.Error(), "dial unix /nonexistent/quorumlock.sock")
	assert.NotContains(t, err.Error(), "unix.sock/_ping")
}
