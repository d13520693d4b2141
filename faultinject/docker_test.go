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
	if pttl, err := c.PTTL(ctx, "k").Result(); err != nil || pttl <= 50*time.Second || pttl > 60*time.Second {
		t.Errorf("after kill + AOF restart: PTTL k = %v, %v; want the TTL kept (50-60s)", pttl, err)
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
	begin := time.Now()
	err := c.Ping(dockerCtx(t, 50*time.Millisecond)).Err()
	took := time.Since(begin)
	if !errors.Is(err, context.DeadlineExceeded) && !dockerIsTimeout(err) {
		t.Errorf("PING on a paused container: %v after %v, want a timeout", err, took)
	}
	if took > time.Second { // a hang without the deadline would never return
		t.Errorf("PING on a paused container took %v, want ~50ms (its ctx deadline)", took)
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

// dockerSkew returns the server's wall clock minus the real time.
func dockerSkew(t *testing.T, c *redis.Client) time.Duration {
	t.Helper()
	t1 := time.Now()
	tm, err := c.Time(dockerCtx(t, 5*time.Second)).Result()
	t2 := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	return tm.Sub(t1.Add(t2.Sub(t1) / 2))
}

func TestDockerClockJumpOnOneContainerOnly(t *testing.T) {
	t.Parallel()
	be, srvs := dockerStart(t, NoPersistence, NoPersistence)
	dockerRequireSkew(t, be)
	ctx := dockerCtx(t, 30*time.Second)
	c0, c1 := dockerClient(t, srvs[0]), dockerClient(t, srvs[1])
	for _, c := range []*redis.Client{c0, c1} {
		if d := dockerSkew(t, c); d < -200*time.Millisecond || d > 200*time.Millisecond {
			t.Errorf("skew at start: %v, want ~0", d)
		}
		if err := c.Set(ctx, "k", "v", 20*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := srvs[0].SetClock(ctx, 30*time.Second, 1); err != nil {
		t.Fatal(err)
	}
	if d := dockerSkew(t, c0); d < 29800*time.Millisecond || d > 30200*time.Millisecond {
		t.Errorf("skew after +30s: %v", d)
	}
	if n, err := c0.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("container at +30s: EXISTS k = %d, %v; want 0 (expired at once)", n, err)
	}
	if pttl, err := c1.PTTL(ctx, "k").Result(); err != nil || pttl < 19*time.Second {
		t.Errorf("other container: PTTL k = %v, %v; want ~20s", pttl, err)
	}
	// The skew survives a restart.
	if err := srvs[0].Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srvs[0].Start(ctx, NoPersistence); err != nil {
		t.Fatal(err)
	}
	if d := dockerSkew(t, c0); d < 29800*time.Millisecond || d > 30200*time.Millisecond {
		t.Errorf("skew after restart: %v, want +30s kept", d)
	}
	if err := srvs[0].SetClock(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	if d := dockerSkew(t, c0); d < -200*time.Millisecond || d > 200*time.Millisecond {
		t.Errorf("skew after SetClock(0, 1): %v, want ~0", d)
	}
}

func TestDockerClockRateTenfold(t *testing.T) {
	t.Parallel()
	be, srvs := dockerStart(t, NoPersistence)
	dockerRequireSkew(t, be)
	ctx := dockerCtx(t, 30*time.Second)
	c := dockerClient(t, srvs[0])
	time.Sleep(time.Second) // age the process: a raw rate change would jump by 9x its age (~9s)
	if err := srvs[0].SetClock(ctx, 0, 10); err != nil {
		t.Fatal(err)
	}
	// At x10 each millisecond before the reading adds 9ms: allow for load.
	if d := dockerSkew(t, c); d < -1500*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("skew right after rate x10: %v, want ~0 (no jump)", d)
	}
	if err := c.Set(ctx, "k", "v", 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	took, err := redisproc.WaitGone(ctx, c, "k", 3*time.Second)
	if err != nil {
		t.Fatalf("rate x10: %v", err)
	}
	t.Logf("PX 5000 key expired after %v real at rate x10 (libfaketime start lag after docker's StartedAt: %v)", took, srvs[0].(*dockerServer).startLag)
	if took < 400*time.Millisecond || took > 1200*time.Millisecond { // 5 s real would mean no skew
		t.Errorf("PX 5000 at x10 expired after %v real, want ~0.5s", took)
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
