// Package faultinject starts a cluster of N independent Redis masters and
// breaks them on purpose: kill and restart (with or without persistence),
// pause, clock skew, latency, hangs and partitions, each with its undo. It is
// the harness of quorumlock's chaos tests, and users run it in their own CI
// against their own lock usage.
//
// Every master is reached through an in-process Toxiproxy v2 proxy on
// 127.0.0.1, so network faults behave the same on every backend. A client of
// the harness can get its own proxy per master (a Link), so that partitions can
// be asymmetric.
//
// The masters run in one of three backends (see BackendKind): docker
// containers, redis-server processes, or in-process miniredis servers. See
// docs/faultinject.md for the fault list and the limits of each backend.
package faultinject

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/redlock"
)

// DefaultN is the number of masters of a cluster when Config.N is zero.
const DefaultN = 5

// Config describes a cluster. The zero value is a valid configuration: five
// masters without persistence on the Auto backend, free ports, a random label
// and no log.
type Config struct {
	// N is the number of masters. Default (0): DefaultN. Must not be
	// negative.
	N int
	// Backend chooses where the masters run. Default (""): Auto.
	Backend BackendKind
	// Persistence is the persistence of each master at start, and of the
	// restarts HealAll and Fault.Undo do. Empty: NoPersistence for every
	// master; one element: that value for every master; otherwise it must
	// have exactly N elements.
	Persistence []Persistence
	// BasePort, when not zero, makes master i listen on BasePort+i (on
	// 127.0.0.1). Default (0): free ports. Proxies always use free ports.
	BasePort int
	// Label tags every resource of the cluster (temp dirs, containers, proxy
	// names). Default: "quorumlock-" followed by 8 random hex digits. Only
	// letters, digits, '-', '_' and '.' are allowed.
	Label string
	// Logf receives progress messages, among them which backend Auto chose
	// and why. Default: no logging; StartT uses t.Logf.
	Logf func(format string, args ...any)
	// Tmpfs gives each master's directory a tmpfs of its own, which
	// DiskFull fills. It needs the process backend (Auto then chooses it)
	// and root.
	Tmpfs bool
	// Netns runs each master in a network namespace of its own, reached
	// over a veth pair (its ServerAddr is then in 10.213.0.0/16, not on
	// 127.0.0.1), whose nftables rules OneWayPartition sets. It needs the
	// process backend (Auto then chooses it), root, ip and nft.
	Netns bool
}

// persistence returns the start persistence of master i.
func (c Config) persistence(i int) Persistence {
	switch len(c.Persistence) {
	case 0:
		return NoPersistence
	case 1:
		return c.Persistence[0]
	}
	return c.Persistence[i]
}

func (c Config) withDefaults() (Config, error) {
	if c.N == 0 {
		c.N = DefaultN
	}
	if c.N < 0 {
		return c, fmt.Errorf("faultinject: Config.N %d is negative", c.N)
	}
	if c.Backend == "" {
		c.Backend = Auto
	}
	switch c.Backend {
	case Auto, Docker, Process, Memory:
	default:
		return c, fmt.Errorf("faultinject: unknown Config.Backend %q (want auto, docker, process or memory)", c.Backend)
	}
	if c.Tmpfs || c.Netns {
		if c.Backend == Auto {
			c.Backend = Process
		}
		if c.Backend != Process {
			return c, fmt.Errorf("faultinject: Config.Tmpfs and Config.Netns need the process backend, not %s", c.Backend)
		}
		if err := c.isolationAvailable(); err != nil {
			return c, err
		}
	}
	if n := len(c.Persistence); n > 1 && n != c.N {
		return c, fmt.Errorf("faultinject: Config.Persistence has %d elements; want 0, 1 or N=%d", n, c.N)
	}
	for i, p := range c.Persistence {
		if !p.known() {
			return c, fmt.Errorf("faultinject: Config.Persistence[%d] is %d, not a known Persistence", i, int(p))
		}
	}
	if c.BasePort < 0 || c.BasePort+c.N-1 > 65535 {
		return c, fmt.Errorf("faultinject: Config.BasePort %d leaves no room for %d ports", c.BasePort, c.N)
	}
	if c.Label == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Label = "quorumlock-" + hex.EncodeToString(b[:])
	}
	if err := checkName("Config.Label", c.Label); err != nil {
		return c, err
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c, nil
}

func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("faultinject: %s is empty", what)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("faultinject: %s %q has character %q; use letters, digits, '-', '_' and '.'", what, s, r)
		}
	}
	return nil
}

// Cluster is a set of N Redis masters, each behind a Toxiproxy proxy, with
// the faults of this package. Its methods are safe for concurrent use by
// multiple goroutines; faults on the same master are applied one at a time.
//
// Node indexes run from 0 to N-1. Fault methods take the indexes of the
// masters they act on; they return an error naming the index when one is out
// of range or when none is given, and act on no master in that case.
type Cluster struct {
	cfg     Config
	kind    BackendKind
	be      backend
	tp      *toxiproxy.ApiServer
	members []*member

	mu       sync.Mutex // guards links, closed, closeErr
	links    map[string]*Link
	closed   bool
	closeErr error
}

// member is one master with its shared proxy and node.
type member struct {
	index   int
	srv     server
	standby server // the next Failover's new master; nil until the first
	hop     *hop
	client  *Node

	mu          sync.Mutex // serialises faults on this master; guards the fields below
	persistence Persistence
	killed      bool
	paused      bool
	skewed      bool
	stepped     bool    // its clock was stepped forward at boot: set back by a reboot only
	strobe      *strobe // ClockStrobe's goroutine, or nil
	diskFull    bool    // DiskFull in force
	dropping    bool    // OneWayPartition in force
}

// Start starts a cluster described by cfg: N masters on the chosen backend
// and one Toxiproxy proxy per master. On error nothing is left running.
// The caller must Close the cluster.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	be, err := chooseBackend(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		cfg:   cfg,
		kind:  be.Kind(),
		be:    be,
		tp:    toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop()),
		links: map[string]*Link{},
	}
	c.members = make([]*member, cfg.N)
	errs := make([]error, cfg.N)
	var wg sync.WaitGroup
	for i := range cfg.N {
		wg.Go(func() {
			spec := ServerSpec{Index: i, Persistence: cfg.persistence(i), Label: cfg.Label}
			if cfg.BasePort != 0 {
				spec.Port = cfg.BasePort + i
			}
			srv, err := be.StartServer(ctx, spec)
			if err != nil {
				errs[i] = fmt.Errorf("faultinject: starting master %d on the %s backend: %w", i, be.Kind(), err)
				return
			}
			c.members[i] = &member{index: i, srv: srv, persistence: spec.Persistence}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(err, c.closeAll(context.WithoutCancel(ctx)))
	}
	for _, m := range c.members {
		m.hop, err = c.newHop(fmt.Sprintf("%s.node%d", cfg.Label, m.index), m.srv.Addr())
		if err == nil {
			m.client, err = dialNode(m.hop.addr, m.srv.Addr(), c.kind == Memory)
		}
		if err != nil {
			return nil, errors.Join(err, c.closeAll(context.WithoutCancel(ctx)))
		}
	}
	cfg.Logf("faultinject: cluster %s: %d masters on the %s backend at %s", cfg.Label, cfg.N, c.kind, strings.Join(c.serverAddrs(), " "))
	return c, nil
}

// StartT starts a cluster for a test and closes it in t.Cleanup. It logs with
// t.Logf unless cfg.Logf is set. A start failure fails the test, except that
// when the chosen backend cannot run here (for example the process backend
// without redis-server) the test is skipped with a message, or fails when the
// CI environment variable is "true".
func StartT(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	RequireBackend(t, cfg.Backend)
	c, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("faultinject: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("faultinject: closing cluster %s: %v", c.cfg.Label, err)
		}
	})
	return c
}

// RequireBackend skips the test when the backend kind cannot run on this
// machine (docker without an engine, process without redis-server), or fails
// it when the CI environment variable is "true". Auto and Memory always run.
func RequireBackend(t testing.TB, kind BackendKind) {
	t.Helper()
	if err := BackendAvailable(context.Background(), kind); err != nil {
		redisproc.RequireOrSkip(t, fmt.Errorf("faultinject: %s backend unavailable: %w", kind, err))
	}
}

// BackendAvailable reports why a backend kind cannot run here, or nil when it
// can. Auto and Memory always can. Docker needs an engine that answers and
// the host's redis-server, from which it builds its image.
func BackendAvailable(ctx context.Context, kind BackendKind) error {
	switch kind {
	case Docker:
		if err := dockerAvailable(ctx); err != nil {
			return err
		}
		if _, err := redisproc.LookPath(); err != nil {
			return fmt.Errorf("faultinject: the docker backend builds its image from the host's redis-server: %w", err)
		}
		return nil
	case Process:
		_, err := redisproc.LookPath()
		return err
	case Auto, Memory, "":
		return nil
	}
	return fmt.Errorf("faultinject: unknown backend %q", kind)
}

// Resolve returns the backend kind that Start would use for kind: Auto
// becomes the best backend that can run here (docker, else process, else
// memory), with a sentence saying why the better ones were passed over; any
// other kind is returned as it is, with an error when it cannot run here.
// Call it once before starting many clusters, and pass its result on.
func Resolve(ctx context.Context, kind BackendKind) (BackendKind, string, error) {
	if kind != Auto && kind != "" {
		return kind, "", BackendAvailable(ctx, kind)
	}
	derr := BackendAvailable(ctx, Docker)
	if derr == nil {
		return Docker, "auto backend: docker (a Docker engine answered; the image is built from the host's redis-server)", nil
	}
	perr := BackendAvailable(ctx, Process)
	if perr == nil {
		bin, _ := redisproc.LookPath()
		return Process, fmt.Sprintf("auto backend: process (redis-server at %s; docker unavailable: %v)", bin, derr), nil
	}
	return Memory, fmt.Sprintf("auto backend: memory (docker unavailable: %v; process unavailable: %v); miniredis is no evidence for safety claims", derr, perr), nil
}

// chooseBackend resolves Auto and builds the backend.
func chooseBackend(ctx context.Context, cfg Config) (backend, error) {
	kind := cfg.Backend
	if kind == Auto {
		var why string
		kind, why, _ = Resolve(ctx, Auto)
		cfg.Logf("faultinject: %s", why)
	}
	switch kind {
	case Docker:
		return newDockerBackend(ctx, cfg)
	case Process:
		return newProcessBackend(ctx, cfg)
	case Memory:
		return newMemoryBackend(cfg), nil
	}
	return nil, fmt.Errorf("faultinject: unknown backend %q", kind)
}

func (c *Cluster) serverAddrs() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.srv.Addr()
	}
	return out
}

// N returns the number of masters.
func (c *Cluster) N() int { return len(c.members) }

// Kind returns the backend the masters run on (never Auto).
func (c *Cluster) Kind() BackendKind { return c.kind }

// Label returns the label of the cluster's resources.
func (c *Cluster) Label() string { return c.cfg.Label }

// Node returns the Node of master i, reached through the master's shared
// proxy (see Node: its Addr is the master's ServerAddr, the same across
// restarts and links). The cluster owns it: Close closes it. Node panics when
// i is out of range.
func (c *Cluster) Node(i int) *Node { return c.members[i].client }

// Nodes returns the nodes of all masters, in index order, ready for
// redlock.New. Each is a *Node.
func (c *Cluster) Nodes() []redlock.Node {
	out := make([]*Node, len(c.members))
	for i, m := range c.members {
		out[i] = m.client
	}
	return redlockNodes(out)
}

// Addr returns the address (127.0.0.1:port) of master i's shared proxy, the
// address clients should dial. Addr panics when i is out of range.
func (c *Cluster) Addr(i int) string { return c.members[i].hop.addr }

// ServerAddr returns the address of master i itself, bypassing the proxy (no
// network fault applies there). It stays the same across restarts. ServerAddr
// panics when i is out of range.
func (c *Cluster) ServerAddr(i int) string { return c.members[i].srv.Addr() }

// pick validates indexes and returns their members, without duplicates.
func (c *Cluster) pick(nodes []int) ([]*member, error) {
	if len(nodes) == 0 {
		return nil, errors.New("faultinject: no node index given")
	}
	seen := map[int]bool{}
	var out []*member
	for _, i := range nodes {
		if i < 0 || i >= len(c.members) {
			return nil, fmt.Errorf("faultinject: node index %d out of range [0,%d)", i, len(c.members))
		}
		if !seen[i] {
			seen[i] = true
			out = append(out, c.members[i])
		}
	}
	return out, nil
}

// onMasters checks the indexes and that the cluster is open, then runs f on
// each chosen master while holding that master's lock.
func (c *Cluster) onMasters(nodes []int, f func(m *member) error) error {
	ms, err := c.pick(nodes)
	if err != nil {
		return err
	}
	if err := c.checkOpen(); err != nil {
		return err
	}
	return each(ms, func(m *member) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		return f(m)
	})
}

// each runs f on every member in parallel and joins the errors.
func each(ms []*member, f func(m *member) error) error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for k, m := range ms {
		wg.Go(func() { errs[k] = f(m) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) checkOpen() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("faultinject: cluster is closed")
	}
	return nil
}

// kill stops the given masters at once (SIGKILL, container kill, or closing
// the miniredis server). Clients get errors until a Restart. Killing a killed
// master does nothing. Data survives only where the run kept an append-only
// file and the restart asks for one again.
func (c *Cluster) kill(ctx context.Context, nodes ...int) error {
	return c.onMasters(nodes, func(m *member) error { return m.kill(ctx) })
}

func (m *member) kill(ctx context.Context) error {
	if m.killed {
		return nil
	}
	if err := m.srv.Kill(ctx); err != nil {
		return fmt.Errorf("faultinject: killing master %d: %w", m.index, err)
	}
	m.killed, m.paused = true, false
	return nil
}

func (m *member) start(ctx context.Context, p Persistence) error {
	if err := m.srv.Start(ctx, p); err != nil {
		return fmt.Errorf("faultinject: starting master %d (persistence %s): %w", m.index, p, err)
	}
	m.killed, m.persistence = false, p
	return nil
}

// restartOptions says how restart brings masters back.
type restartOptions struct {
	// Delay is the time between the kill and the new start. Default: 0. Must
	// not be negative.
	Delay time.Duration
	// Persistence of the new run. Keys and TTLs survive only when both the
	// previous run and this one keep an append-only file. The zero value is
	// NoPersistence: the master comes back empty.
	Persistence Persistence
}

// restart kills the given masters (those still running), waits opt.Delay and
// starts them again on the same ports with opt.Persistence. A master that was
// paused comes back running. It returns early with ctx's error if ctx ends
// during the delay, leaving the masters killed.
func (c *Cluster) restart(ctx context.Context, opt restartOptions, nodes ...int) error {
	if opt.Delay < 0 {
		return fmt.Errorf("faultinject: restart delay %v is negative", opt.Delay)
	}
	if !opt.Persistence.known() {
		return fmt.Errorf("faultinject: restart persistence %d is not a known Persistence", int(opt.Persistence))
	}
	ms, err := c.pick(nodes)
	if err != nil {
		return err
	}
	if err := c.checkOpen(); err != nil {
		return err
	}
	if err := c.kill(ctx, nodes...); err != nil {
		return err
	}
	if opt.Delay > 0 {
		t := time.NewTimer(opt.Delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("faultinject: restart delay of %v interrupted: %w", opt.Delay, ctx.Err())
		}
	}
	return each(ms, func(m *member) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.killed {
			return nil // someone else started it during the delay
		}
		return m.start(ctx, opt.Persistence)
	})
}

// pause freezes the given masters (SIGSTOP, docker pause, or holding every
// command on the memory backend): connections are accepted, nothing answers,
// and wall time keeps running, so keys expire meanwhile. Commands sent during
// the pause execute after Resume. Pausing a paused master does nothing; a
// killed master gives an error.
func (c *Cluster) pause(ctx context.Context, nodes ...int) error {
	return c.onMasters(nodes, func(m *member) error {
		if m.paused {
			return nil
		}
		if m.killed {
			return fmt.Errorf("faultinject: cannot pause master %d: it is killed", m.index)
		}
		if err := m.srv.Pause(ctx); err != nil {
			return fmt.Errorf("faultinject: pausing master %d: %w", m.index, err)
		}
		m.paused = true
		return nil
	})
}

// resume undoes Pause. Resuming a master that is not paused does nothing.
func (c *Cluster) resume(ctx context.Context, nodes ...int) error {
	return c.onMasters(nodes, func(m *member) error { return m.resume(ctx) })
}

func (m *member) resume(ctx context.Context) error {
	if !m.paused {
		return nil
	}
	if err := m.srv.Resume(ctx); err != nil {
		return fmt.Errorf("faultinject: resuming master %d: %w", m.index, err)
	}
	m.paused = false
	return nil
}

// setClock makes the wall clock of the given masters read real time plus
// offset, running at rate times real speed from now on. Redis key expiry
// follows it: a forward jump past a key's TTL expires the key at once; a
// backward jump lengthens every TTL. rate must be positive. It replaces any
// earlier setting; SetClock(ctx, 0, 1, ...) and ResetClock undo it. The
// skew survives a restart of the master.
//
// On the process and docker backends this needs libfaketime (see package
// clockskew); without it SetClock returns an error saying what is missing.
func (c *Cluster) setClock(ctx context.Context, offset time.Duration, rate float64, nodes ...int) error {
	if !(rate > 0) || rate > 1e6 {
		return fmt.Errorf("faultinject: clock rate %v must be positive (and sane)", rate)
	}
	return c.onMasters(nodes, func(m *member) error { return m.setClock(ctx, offset, rate) })
}

func (m *member) setClock(ctx context.Context, offset time.Duration, rate float64) error {
	if err := m.srv.SetClock(ctx, offset, rate); err != nil {
		return fmt.Errorf("faultinject: clock of master %d to %+v x%v: %w", m.index, offset, rate, err)
	}
	m.skewed = offset != 0 || rate != 1
	return nil
}

// resetClock sets the clock of the given masters back to real time at real
// speed. Note that a master whose clock ran ahead jumps back, which lengthens
// its TTLs; keys it already expired stay gone.
func (c *Cluster) resetClock(ctx context.Context, nodes ...int) error {
	return c.setClock(ctx, 0, 1, nodes...)
}

// latency adds latency (plus or minus a uniformly random jitter) to the given
// masters' shared proxies in direction dir, for every client. Each selected
// direction gets the full latency, so Both doubles the round trip. Latency
// is whole milliseconds, at least 1 ms; jitter must be in [0, latency]. It
// replaces an earlier latency in the same direction.
func (c *Cluster) latency(ctx context.Context, latency, jitter time.Duration, dir Direction, nodes ...int) error {
	return c.netFault(nodes, func(h *hop) error { return h.latency(ctx, latency, jitter, dir) })
}

// hang makes the given masters' shared proxies drop every byte in direction
// dir while keeping connections open: with Downstream requests reach the
// master and are applied but no reply comes back; with Upstream requests
// never reach it. New connections are accepted and hang too.
func (c *Cluster) hang(ctx context.Context, dir Direction, nodes ...int) error {
	return c.netFault(nodes, func(h *hop) error { return h.hang(ctx, dir) })
}

// partition cuts the given masters off from every client: their shared
// proxies stop listening (connections refused) and close the open
// connections (clients see a reset or EOF). Clients of a Link get EOF right
// after connecting.
func (c *Cluster) partition(ctx context.Context, nodes ...int) error {
	return c.netFault(nodes, func(h *hop) error { return h.partition() })
}

// heal undoes the network faults (latency, hang, partition) on the given
// masters' shared proxies. Connections that a hang held are closed. Faults on
// Links and on the masters themselves are left alone.
func (c *Cluster) heal(ctx context.Context, nodes ...int) error {
	return c.netFault(nodes, func(h *hop) error { return h.heal(ctx) })
}

func (c *Cluster) netFault(nodes []int, f func(h *hop) error) error {
	ms, err := c.pick(nodes)
	if err != nil {
		return err
	}
	if err := c.checkOpen(); err != nil {
		return err
	}
	var errs []error
	for _, m := range ms {
		if err := f(m.hop); err != nil {
			errs = append(errs, fmt.Errorf("faultinject: master %d: %w", m.index, err))
		}
	}
	return errors.Join(errs...)
}

// HealAll undoes every fault: it stops clock strobes, frees full disks,
// removes one-way drops, restarts killed masters (with the persistence of
// their last run), resumes paused ones, resets skewed clocks (a master
// whose clock ClockStepAfterRestart stepped is rebooted instead), and heals the
// network on every shared proxy and every Link. It tries
// everything and joins the errors.
func (c *Cluster) HealAll(ctx context.Context) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	err := each(c.members, func(m *member) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		var errs []error
		m.stopStrobe()
		errs = append(errs, m.freeDisk(ctx), m.pass(ctx))
		if m.stepped {
			// Setting a running master's clock back would keep the keys it
			// wrote on the stepped clock Step past their TTL.
			errs = append(errs, m.reboot(ctx, m.persistence, 0))
		}
		if m.killed {
			errs = append(errs, m.start(ctx, m.persistence))
		}
		errs = append(errs, m.resume(ctx))
		if m.skewed {
			errs = append(errs, m.setClock(ctx, 0, 1))
		}
		if err := m.hop.heal(ctx); err != nil {
			errs = append(errs, fmt.Errorf("faultinject: master %d: %w", m.index, err))
		}
		return errors.Join(errs...)
	})
	errs := []error{err}
	for _, l := range c.linkList() {
		for i, h := range l.hops {
			if err := h.heal(ctx); err != nil {
				errs = append(errs, fmt.Errorf("faultinject: link %s, master %d: %w", l.name, i, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) linkList() []*Link {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Link, 0, len(c.links))
	for _, l := range c.links {
		out = append(out, l)
	}
	return out
}

// Close stops every master and proxy, closes every node and Link, and removes
// what the backend made (processes, containers, temp dirs). It is idempotent:
// later calls return the first call's error.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.closeErr
	}
	c.closed = true
	c.mu.Unlock()
	err := c.closeAll(ctx)
	c.mu.Lock()
	c.closeErr = err
	c.mu.Unlock()
	return err
}

// closeAll releases everything made so far; members may be partly built.
func (c *Cluster) closeAll(ctx context.Context) error {
	var errs []error
	for _, l := range c.linkList() {
		errs = append(errs, l.Close())
	}
	var live []*member
	for _, m := range c.members {
		if m == nil {
			continue
		}
		live = append(live, m)
		if m.client != nil {
			errs = append(errs, m.client.close())
		}
		if m.hop != nil {
			m.hop.close()
		}
	}
	errs = append(errs, each(live, func(m *member) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.stopStrobe()
		if err := m.srv.Close(ctx); err != nil {
			return fmt.Errorf("faultinject: closing master %d: %w", m.index, err)
		}
		if m.standby != nil {
			if err := m.standby.Close(ctx); err != nil {
				return fmt.Errorf("faultinject: closing master %d's standby: %w", m.index, err)
			}
		}
		return nil
	}))
	errs = append(errs, c.be.Close(ctx))
	_ = c.tp.Collection.Clear()
	return errors.Join(errs...)
}
