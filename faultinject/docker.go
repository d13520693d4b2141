package faultinject

// The docker backend: each master is a container of an image built locally,
// FROM scratch, from the host's redis-server (see docker_image.go), so no
// registry is needed.
//
// Containers carry the labels quorumlock=1, quorumlock.cluster=<Label> and
// quorumlock.node=<Index>, are named <Label>-node<Index>, and publish Redis's
// port on 127.0.0.1 only. Data lives in the container's /data (its writable
// layer, no volume).
//
// Kill is a container kill (SIGKILL). Start after a kill starts the SAME
// container again ("docker start") when the persistence is unchanged: with
// AOFAlways its /data, and so every key and TTL, survives; without
// persistence nothing was ever written there, so it comes back empty. When
// the persistence changes the container is removed and a new one created
// with the new arguments (empty /data), so stale AOF files can never come
// back. Pause and Resume are "docker pause" and "docker unpause" (cgroup
// freezer: the kernel still accepts connections, nothing answers).
//
// Clock skew: containers share the host kernel's clock, so the skew is per
// process, with libfaketime preloaded into redis-server (package clockskew).
// The timestamp file lives in a host temporary directory bind-mounted
// read-only at /faketime; the host rewrites it (atomically, so the directory
// is mounted, not the file). A skew survives a restart.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/faultinject/clockskew"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// Docker labels of the backend's containers.
const (
	dockerLabel        = "quorumlock"         // value "1" on every container of ours
	dockerLabelCluster = "quorumlock.cluster" // Config.Label
	dockerLabelNode    = "quorumlock.node"    // ServerSpec.Index
)

// dockerPingTimeout bounds dockerAvailable's ping when ctx has no earlier
// deadline.
const dockerPingTimeout = 2 * time.Second

// dockerAvailable reports whether a Docker engine answers a ping within 2s
// (or ctx's deadline, if earlier): nil when it does, else an error saying
// which endpoint was tried and why it failed. The endpoint comes from
// DOCKER_HOST (or DOCKER_URL), default unix:///var/run/docker.sock.
var dockerAvailable = func(ctx context.Context) error {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return fmt.Errorf("faultinject: no Docker client: %w", err)
	}
	defer closeIdle(pool)
	ctx, cancel := context.WithTimeout(ctx, dockerPingTimeout)
	defer cancel()
	if err := pool.Client.PingWithContext(ctx); err != nil {
		// The client's error names its internal URL (Get
		// "http://unix.sock/_ping"): the dial error under it is the reason.
		var dial *net.OpError
		if errors.As(err, &dial) {
			err = dial
		}
		return fmt.Errorf("faultinject: no Docker engine answers at %s: %w (start dockerd, or set DOCKER_HOST)", pool.Client.Endpoint(), err)
	}
	return nil
}

func closeIdle(pool *dockertest.Pool) {
	if pool.Client.HTTPClient != nil {
		pool.Client.HTTPClient.CloseIdleConnections()
	}
}

// dockerBackend starts masters as containers. Safe for concurrent use.
type dockerBackend struct {
	pool  *dockertest.Pool
	image *redisImage
	logf  func(string, ...any)
}

// newDockerBackend connects to the Docker engine and makes sure the image
// exists (building it takes a few seconds the first time on a machine, then
// nothing). Errors say whether the engine, the host's redis-server or the
// build failed.
func newDockerBackend(ctx context.Context, cfg Config) (backend, error) {
	if err := dockerAvailable(ctx); err != nil {
		return nil, err
	}
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("faultinject: docker client: %w", err)
	}
	img, err := ensureRedisImage(ctx, pool.Client)
	if err != nil {
		closeIdle(pool)
		return nil, err
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if img.build > 0 {
		logf("faultinject: docker: built image %s (%.1f MB of host files) in %v", img.tag, float64(img.size)/1e6, img.build.Round(time.Millisecond))
	}
	if !img.faketime {
		logf("faultinject: docker: image %s has no clock skew support: %v", img.tag, img.noSkew)
	}
	return &dockerBackend{pool: pool, image: img, logf: logf}, nil
}

func (b *dockerBackend) Kind() BackendKind { return Docker }

// Close releases the engine connection; containers are closed by their
// servers.
func (b *dockerBackend) Close(context.Context) error {
	closeIdle(b.pool)
	return nil
}

// dockerName returns the container name of a master.
func dockerName(label string, index int) string {
	name := fmt.Sprintf("%s-node%d", label, index)
	if c := name[0]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
		name = "q" + name // docker names start with a letter or digit
	}
	return name
}

// StartServer creates and starts the container of one master and waits
// until it answers PING (at most 30s or ctx). A leftover container of ours
// with the same name (a crashed run of the same label) is removed first. On
// error nothing of this master is left.
func (b *dockerBackend) StartServer(ctx context.Context, spec ServerSpec) (server, error) {
	if spec.Label == "" {
		return nil, errors.New("faultinject: docker: ServerSpec.Label is empty")
	}
	if !spec.Persistence.known() {
		return nil, fmt.Errorf("faultinject: docker: persistence %d is not a known Persistence", int(spec.Persistence))
	}
	s := &dockerServer{b: b, spec: spec, name: dockerName(spec.Label, spec.Index), persistence: spec.Persistence}
	if err := b.removeByName(ctx, s.name); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "quorumlock-docker-"+spec.Label+"-node"+strconv.Itoa(spec.Index)+"-")
	if err != nil {
		return nil, fmt.Errorf("faultinject: docker: temp dir: %w", err)
	}
	s.dir = dir
	fail := func(err error) (server, error) {
		return nil, errors.Join(err, s.Close(context.WithoutCancel(ctx)))
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(fmt.Errorf("faultinject: docker: %w", err))
	}
	if b.image.faketime {
		if s.clock, err = clockskew.NewClock(filepath.Join(dir, filepath.Base(imageTimestampFile)), time.Now()); err != nil {
			return fail(err)
		}
	}
	for attempt := 0; ; attempt++ {
		port := spec.Port
		if port == 0 {
			if port, err = redisproc.FreePort(); err != nil {
				return fail(fmt.Errorf("faultinject: docker: free port: %w", err))
			}
		}
		s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		err = s.create(ctx)
		if err == nil {
			break
		}
		// A free port taken by someone else in between: try another one.
		if spec.Port != 0 || attempt >= 4 || !strings.Contains(err.Error(), "already") {
			return fail(err)
		}
	}
	if s.clock != nil {
		// The server is empty: measure libfaketime's start time exactly.
		if err := s.clock.Calibrate(ctx, s.serverTime); err != nil {
			return fail(err)
		}
		if st, err := s.startedAt(ctx); err == nil {
			s.startLag = s.clock.Start().Sub(st)
		}
	}
	return s, nil
}

// removeByName removes a container of ours (labelled quorumlock=1) named
// name, if any. A container with that name that is not ours is an error.
func (b *dockerBackend) removeByName(ctx context.Context, name string) error {
	cs, err := b.pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"name": {"^/" + name + "$"}}, Context: ctx})
	if err != nil {
		return fmt.Errorf("faultinject: docker: listing containers named %s: %w", name, err)
	}
	for _, c := range cs {
		if c.Labels[dockerLabel] != "1" {
			return fmt.Errorf("faultinject: docker: a container named %s (%.12s) exists and is not ours (no label %s=1); remove it or use another Config.Label", name, c.ID, dockerLabel)
		}
		b.logf("faultinject: docker: removing leftover container %s (%.12s)", name, c.ID)
		if err := b.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true, Context: ctx}); err != nil && !isNoSuchContainer(err) {
			return fmt.Errorf("faultinject: docker: removing leftover container %s: %w", name, err)
		}
	}
	return nil
}

func isNoSuchContainer(err error) bool {
	var e *dc.NoSuchContainer
	return errors.As(err, &e)
}

// RemoveDockerLeftovers removes what a crashed run of the docker backend left
// behind: every container labelled quorumlock.cluster=label (with label "",
// every container labelled quorumlock=1, from any cluster, running or not)
// and the host temporary directories of those clusters
// ($TMPDIR/quorumlock-docker-<label>-node*). Do not call it for a label
// whose cluster is still running. It returns how many containers it removed.
// Only containers carrying our labels are touched; images are kept (they are
// a cache; remove them with "docker image rm quorumlock/redis-scratch:<tag>").
func RemoveDockerLeftovers(ctx context.Context, label string) (int, error) {
	if label != "" {
		if err := checkName("label", label); err != nil {
			return 0, err
		}
	}
	pool, err := dockertest.NewPool("")
	if err != nil {
		return 0, fmt.Errorf("faultinject: docker client: %w", err)
	}
	defer closeIdle(pool)
	filter := dockerLabel + "=1"
	if label != "" {
		filter = dockerLabelCluster + "=" + label
	}
	cs, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true, Filters: map[string][]string{"label": {dockerLabel + "=1", filter}}, Context: ctx})
	if err != nil {
		return 0, fmt.Errorf("faultinject: docker: listing containers with label %s: %w", filter, err)
	}
	var errs []error
	n := 0
	for _, c := range cs {
		err := pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true, Context: ctx})
		if err != nil && !isNoSuchContainer(err) {
			errs = append(errs, fmt.Errorf("faultinject: docker: removing container %.12s: %w", c.ID, err))
			continue
		}
		n++
	}
	// os.MkdirTemp names: quorumlock-docker-<label>-node<index>-<random digits>.
	re := regexp.MustCompile(`^quorumlock-docker-.+-node[0-9]+-[0-9]+$`)
	if label != "" {
		re = regexp.MustCompile(`^quorumlock-docker-` + regexp.QuoteMeta(label) + `-node[0-9]+-[0-9]+$`)
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "quorumlock-docker-*"))
	for _, d := range dirs {
		if !re.MatchString(filepath.Base(d)) {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("faultinject: docker: removing %s: %w", d, err))
		}
	}
	return n, errors.Join(errs...)
}

// dockerServer is one master in a container. Its methods are safe for
// concurrent use; they are serialised.
type dockerServer struct {
	b     *dockerBackend
	spec  ServerSpec
	name  string
	addr  string
	dir   string           // host dir mounted at /faketime
	clock *clockskew.Clock // nil without clock skew support

	mu          sync.Mutex
	id          string      // container id; "" when there is none
	persistence Persistence // of the container's current arguments
	killed      bool
	paused      bool
	closed      bool
	startLag    time.Duration // libfaketime start minus docker's StartedAt, measured at first start
}

func (s *dockerServer) Addr() string { return s.addr }

func (s *dockerServer) port() string {
	_, p, _ := net.SplitHostPort(s.addr)
	return p
}

// create creates and starts a new container with s.persistence and waits
// for PING. On error the container is removed. The caller holds s.mu (or
// has not shared s yet), as for startContainer.
func (s *dockerServer) create(ctx context.Context) error {
	args := []string{
		"--port", "6379", "--bind", "0.0.0.0", "--protected-mode", "no",
		"--dir", "/data", "--save", "", "--daemonize", "no",
	}
	if s.persistence.aof() {
		args = append(args, "--appendonly", "yes", "--appendfsync", s.persistence.fsync())
		if s.persistence == AOFEverySec {
			args = append(args, "--aof-timestamp-enabled", "yes")
		}
	} else {
		args = append(args, "--appendonly", "no")
	}
	var env []string
	if s.clock != nil {
		env = clockskew.PreloadEnv(imageShim, imageLibfaketime, imageTimestampFile)
	}
	c, err := s.b.pool.Client.CreateContainer(dc.CreateContainerOptions{
		Name: s.name,
		Config: &dc.Config{
			Image:        s.b.image.tag,
			Cmd:          args,
			Env:          env,
			ExposedPorts: map[dc.Port]struct{}{"6379/tcp": {}},
			Labels: map[string]string{
				dockerLabel:        "1",
				dockerLabelCluster: s.spec.Label,
				dockerLabelNode:    strconv.Itoa(s.spec.Index),
			},
		},
		HostConfig: &dc.HostConfig{
			PortBindings: map[dc.Port][]dc.PortBinding{"6379/tcp": {{HostIP: "127.0.0.1", HostPort: s.port()}}},
			Binds:        []string{s.dir + ":" + imageFaketimeDir + ":ro"},
		},
		Context: ctx,
	})
	if err != nil {
		return fmt.Errorf("faultinject: docker: creating container %s: %w", s.name, err)
	}
	s.id = c.ID
	if err := s.startContainer(ctx); err != nil {
		rerr := s.b.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true, Context: context.WithoutCancel(ctx)})
		if rerr != nil && !isNoSuchContainer(rerr) {
			err = errors.Join(err, rerr)
		}
		s.id = ""
		return err
	}
	return nil
}

// startContainer starts the existing container s.id and waits for PING.
func (s *dockerServer) startContainer(ctx context.Context) error {
	if s.clock != nil {
		// A new process: libfaketime starts anew in it. Keep the skew.
		if err := s.clock.Restarted(time.Now().Add(s.startLag)); err != nil {
			return err
		}
	}
	if err := s.b.pool.Client.StartContainerWithContext(s.id, nil, ctx); err != nil {
		return fmt.Errorf("faultinject: docker: starting container %s on %s: %w", s.name, s.addr, err)
	}
	if err := s.waitReady(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("faultinject: docker: container %s on %s not ready: %w\n%s", s.name, s.addr, err, s.logs(context.WithoutCancel(ctx)))
	}
	if s.clock != nil && s.startLag != 0 {
		if st, err := s.startedAt(ctx); err == nil {
			if err := s.clock.Restarted(st.Add(s.startLag)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *dockerServer) startedAt(ctx context.Context) (time.Time, error) {
	c, err := s.b.pool.Client.InspectContainerWithContext(s.id, ctx)
	if err != nil {
		return time.Time{}, err
	}
	return c.State.StartedAt, nil
}

// client returns a short-lived client for the server itself.
func (s *dockerServer) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialerRetries: 1, DisableIdentity: true, Protocol: 2,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		ContextTimeoutEnabled: true, PoolSize: 1})
}

// waitReady polls PING until it answers. Docker's port proxy accepts
// connections before redis-server listens (and closes them), so a refused or
// reset connection is retried.
func (s *dockerServer) waitReady(ctx context.Context, limit time.Duration) error {
	c := s.client()
	defer c.Close()
	deadline := time.Now().Add(limit)
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG after %v: %w", limit, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serverTime reads the server's own wall clock (TIME).
func (s *dockerServer) serverTime(ctx context.Context) (time.Time, error) {
	c := s.client()
	defer c.Close()
	return c.Time(ctx).Result()
}

func (s *dockerServer) logs(ctx context.Context) string {
	id := s.id
	if id == "" {
		return ""
	}
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = s.b.pool.Client.Logs(dc.LogsOptions{Context: ctx, Container: id, OutputStream: &buf, ErrorStream: &buf, Stdout: true, Stderr: true, Tail: "30"})
	return "container log:\n" + buf.String()
}

// Kill kills the container (SIGKILL) and waits until it has stopped. A paused
// container is killed too. Killing a killed server does nothing.
func (s *dockerServer) Kill(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if s.killed {
		return nil
	}
	err := s.b.pool.Client.KillContainer(dc.KillContainerOptions{ID: s.id, Signal: dc.SIGKILL, Context: ctx})
	var notRunning *dc.ContainerNotRunning
	if err != nil && !errors.As(err, &notRunning) {
		return fmt.Errorf("faultinject: docker: killing container %s: %w", s.name, err)
	}
	for {
		c, err := s.b.pool.Client.InspectContainerWithContext(s.id, ctx)
		if err != nil {
			return fmt.Errorf("faultinject: docker: inspecting killed container %s: %w", s.name, err)
		}
		if !c.State.Running {
			break
		}
		if c.State.Paused {
			// The kill is delivered when the freezer lets go.
			_ = s.b.pool.Client.UnpauseContainer(s.id)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("faultinject: docker: container %s still running after kill: %w", s.name, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	s.killed, s.paused = true, false
	return nil
}

// Start starts a killed server again on the same port. With the persistence
// of the previous run it starts the same container (AOFAlways: data kept;
// NoPersistence: empty); with another one it replaces the container (empty).
func (s *dockerServer) Start(ctx context.Context, p Persistence) error {
	if !p.known() {
		return fmt.Errorf("faultinject: docker: persistence %d is not a known Persistence", int(p))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if !s.killed {
		return fmt.Errorf("faultinject: docker: container %s is running; Kill it before Start", s.name)
	}
	if p == s.persistence {
		if err := s.startContainer(ctx); err != nil {
			return err
		}
		s.killed = false
		return nil
	}
	// Replace: the new container gets the new arguments and an empty /data.
	if err := s.b.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: s.id, Force: true, RemoveVolumes: true, Context: ctx}); err != nil && !isNoSuchContainer(err) {
		return fmt.Errorf("faultinject: docker: removing container %s to change persistence: %w", s.name, err)
	}
	s.id, s.persistence = "", p
	if err := s.create(ctx); err != nil {
		return err
	}
	s.killed = false
	return nil
}

// usable returns an error when the server is closed or has no container.
// Called with s.mu held.
func (s *dockerServer) usable() error {
	if s.closed {
		return fmt.Errorf("faultinject: docker: server %s is closed", s.name)
	}
	if s.id == "" {
		return fmt.Errorf("faultinject: docker: server %s has no container (a failed Start?)", s.name)
	}
	return nil
}

// Pause freezes the container (docker pause). The call is bounded by ctx;
// if ctx ends first the pause may still happen, and the server counts as
// paused so that Resume undoes it.
func (s *dockerServer) Pause(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if s.killed {
		return fmt.Errorf("faultinject: docker: container %s is killed; cannot pause it", s.name)
	}
	if s.paused {
		return nil
	}
	if err := withContext(ctx, func() error { return s.b.pool.Client.PauseContainer(s.id) }); err != nil {
		if ctx.Err() != nil {
			// The pause may still happen: let Resume undo it either way.
			s.paused = true
		}
		return fmt.Errorf("faultinject: docker: pausing container %s: %w", s.name, err)
	}
	s.paused = true
	return nil
}

// Resume unfreezes the container (docker unpause). Resuming a server that is
// not paused does nothing, nor does unpausing a container docker reports as
// not paused (after a Pause whose ctx ended first).
func (s *dockerServer) Resume(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	if !s.paused {
		return nil
	}
	if err := withContext(ctx, func() error { return s.b.pool.Client.UnpauseContainer(s.id) }); err != nil &&
		!strings.Contains(err.Error(), "is not paused") {
		return fmt.Errorf("faultinject: docker: resuming container %s: %w", s.name, err)
	}
	s.paused = false
	return nil
}

// withContext runs f (a docker call without a context parameter) and returns
// early with ctx's error; f then finishes in the background.
func withContext(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SetClock rewrites the timestamp file the container's redis-server reads
// through the bind mount; it applies at the server's next clock read, also
// while the server is killed (it then applies from its next start).
func (s *dockerServer) SetClock(_ context.Context, offset time.Duration, rate float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("faultinject: docker: server %s is closed", s.name)
	}
	if s.clock == nil {
		return fmt.Errorf("faultinject: docker: clock skew unavailable in image %s: %w", s.b.image.tag, s.b.image.noSkew)
	}
	return s.clock.Set(offset, rate)
}

// Close removes the container (force, with its volumes) and the host temp
// dir. It is idempotent.
func (s *dockerServer) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.id != "" {
		err := s.b.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: s.id, Force: true, RemoveVolumes: true, Context: ctx})
		if err != nil && !isNoSuchContainer(err) {
			errs = append(errs, fmt.Errorf("faultinject: docker: removing container %s: %w", s.name, err))
		} else {
			s.id = ""
		}
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("faultinject: docker: %w", err))
		} else {
			s.dir = ""
		}
	}
	s.closed = true
	return errors.Join(errs...)
}
