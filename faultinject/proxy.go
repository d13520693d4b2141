package faultinject

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/quorumlock/quorumlock/redlock"
)

// Direction says which way a network fault acts on a connection.
type Direction string

const (
	// Downstream is master to client: replies. The empty Direction means
	// Downstream.
	Downstream Direction = "downstream"
	// Upstream is client to master: requests.
	Upstream Direction = "upstream"
	// Both is both directions, each getting the full fault.
	Both Direction = "both"
)

// streams returns the Toxiproxy stream names of d.
func (d Direction) streams() ([]string, error) {
	switch d {
	case Downstream, "":
		return []string{"downstream"}, nil
	case Upstream:
		return []string{"upstream"}, nil
	case Both:
		return []string{"upstream", "downstream"}, nil
	}
	return nil, fmt.Errorf("faultinject: unknown direction %q (want downstream, upstream or both)", string(d))
}

// hop is one in-process Toxiproxy proxy in front of a master. Its methods
// are safe for concurrent use; after close they fail and change nothing (so
// that a heal racing with Close cannot start a proxy nobody will stop).
type hop struct {
	p    *toxiproxy.Proxy
	addr string // listen address, fixed at creation (p.Listen is written on every start)
	port int    // addr's port, reserved in hopPorts until close

	mu     sync.Mutex
	closed bool
}

// do runs f unless the hop is closed.
func (h *hop) do(f func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("proxy %s is closed", h.p.Name)
	}
	return f()
}

// newHop starts a proxy on a free 127.0.0.1 port forwarding to upstream.
// The port is below Linux's ephemeral range (32768-60999 by default): a
// partition closes the listener and heal binds the same port again, and in
// between an outgoing connection could take an ephemeral port as its own
// local port and make the rebind fail (seen: "bind: address already in
// use" healing a partition in chaos --quick). For the same reason the port
// stays reserved (hopPorts) until the hop is closed: another hop drawn
// while this one's listener is down must not take it (seen in CI: a link's
// proxy took the port of another link's stopped proxy, whose heal then
// failed, and a client's connection to master 2 reached master 1).
func (c *Cluster) newHop(name, upstream string) (*hop, error) {
	var err error
	for range 50 { // bounded: another process may hold a port we draw
		port := drawHopPort()
		if !hopPorts.reserve(port) {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p := toxiproxy.NewProxy(c.tp, name, addr, upstream)
		if err = c.tp.Collection.Add(p, true); err == nil {
			return &hop{p: p, addr: addr, port: port}, nil
		}
		hopPorts.free(port)
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return nil, fmt.Errorf("faultinject: starting proxy %s to %s: %w", name, upstream, cmp.Or(err, errors.New("no free port drawn")))
}

// The ports newHop draws from: below the kernel's ephemeral range.
const hopPortLow, hopPortHigh = 20000, 32768

// drawHopPort draws a port for newHop (a variable: a test draws a taken one).
var drawHopPort = func() int { return hopPortLow + rand.IntN(hopPortHigh-hopPortLow) }

// hopPorts holds the ports of this process's hops from their creation to
// their close, listening or not.
var hopPorts = portSet{used: map[int]bool{}}

type portSet struct {
	mu   sync.Mutex
	used map[int]bool
}

// reserve marks port used; false if it already was.
func (s *portSet) reserve(port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used[port] {
		return false
	}
	s.used[port] = true
	return true
}

func (s *portSet) free(port int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.used, port)
}

// setToxic replaces (or adds) the toxic of the given name.
func (h *hop) setToxic(ctx context.Context, name, typ, stream, attrs string) error {
	if err := h.p.Toxics.RemoveToxic(ctx, name); err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
		return fmt.Errorf("removing toxic %s from proxy %s: %w", name, h.p.Name, err)
	}
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := h.p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		return fmt.Errorf("adding toxic %s to proxy %s: %w", js, h.p.Name, err)
	}
	return nil
}

func checkLatency(latency, jitter time.Duration) error {
	if latency < time.Millisecond || latency%time.Millisecond != 0 {
		return fmt.Errorf("faultinject: latency %v must be whole milliseconds, at least 1ms", latency)
	}
	if jitter < 0 || jitter > latency || jitter%time.Millisecond != 0 {
		return fmt.Errorf("faultinject: jitter %v must be whole milliseconds in [0, latency %v]", jitter, latency)
	}
	return nil
}

func (h *hop) latency(ctx context.Context, latency, jitter time.Duration, dir Direction) error {
	if err := checkLatency(latency, jitter); err != nil {
		return err
	}
	streams, err := dir.streams()
	if err != nil {
		return err
	}
	return h.do(func() error {
		for _, s := range streams {
			attrs := fmt.Sprintf(`{"latency":%d,"jitter":%d}`, latency.Milliseconds(), jitter.Milliseconds())
			if err := h.setToxic(ctx, "quorumlock-latency-"+s, "latency", s, attrs); err != nil {
				return err
			}
		}
		return nil
	})
}

func (h *hop) hang(ctx context.Context, dir Direction) error {
	streams, err := dir.streams()
	if err != nil {
		return err
	}
	return h.do(func() error {
		for _, s := range streams {
			// The timeout toxic with timeout 0 drops every byte and never closes.
			if err := h.setToxic(ctx, "quorumlock-hang-"+s, "timeout", s, `{"timeout":0}`); err != nil {
				return err
			}
		}
		return nil
	})
}

// partition stops the proxy: its listener closes and its connections too.
func (h *hop) partition() error {
	return h.do(func() error { h.p.Stop(); return nil })
}

// heal removes every toxic and starts the proxy again on the same address.
func (h *hop) heal(ctx context.Context) error {
	return h.do(func() error {
		h.p.Toxics.ResetToxics(ctx)
		if err := h.p.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return fmt.Errorf("restarting proxy %s on %s: %w", h.p.Name, h.addr, err)
		}
		return nil
	})
}

// retarget points the proxy at another upstream. Its connections are
// closed; it listens on the same address again, with its toxics kept.
func (h *hop) retarget(upstream string) error {
	return h.do(func() error {
		h.p.Lock()
		enabled := h.p.Enabled
		h.p.Unlock()
		in := &toxiproxy.Proxy{Name: h.p.Name, Listen: h.addr, Upstream: upstream, Enabled: enabled}
		if err := h.p.Update(in); err != nil {
			return fmt.Errorf("pointing proxy %s at %s: %w", h.p.Name, upstream, err)
		}
		return nil
	})
}

// close stops the proxy for good; it is idempotent.
func (h *hop) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	h.p.Stop()
	h.p.Toxics.ResetToxics(context.Background())
	hopPorts.free(h.port)
}

// Link is one harness client's own set of proxies, one per master, so that
// network faults can hit one client-master link only: client A cut off from
// masters 3 and 4 while client B is cut off from 0 and 1. A Link's proxies
// forward to the masters' shared proxies, so faults on the Cluster (for
// everyone) apply to Link clients as well. Its methods are safe for
// concurrent use by multiple goroutines.
type Link struct {
	c     *Cluster
	name  string
	hops  []*hop
	nodes []*Node

	once sync.Once
	err  error
}

// NewLink gives a new set of proxies, one per master, for the client called
// name (letters, digits, '-', '_', '.'; unique within the cluster). The
// cluster closes it on Close; Link.Close releases it earlier.
func (c *Cluster) NewLink(name string) (*Link, error) {
	if err := checkName("link name", name); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("faultinject: cluster is closed")
	}
	if _, ok := c.links[name]; ok {
		return nil, fmt.Errorf("faultinject: link %q already exists", name)
	}
	l := &Link{c: c, name: name}
	for _, m := range c.members {
		h, err := c.newHop(fmt.Sprintf("%s.link.%s.node%d", c.cfg.Label, name, m.index), m.hop.addr)
		if err == nil {
			l.hops = append(l.hops, h)
			var n *Node
			n, err = dialNode(h.addr, m.srv.Addr(), c.kind == Memory)
			if err == nil {
				l.nodes = append(l.nodes, n)
			}
		}
		if err != nil {
			_ = l.release()
			return nil, err
		}
	}
	c.links[name] = l
	return l, nil
}

// Link returns the link called name, or nil.
func (c *Cluster) Link(name string) *Link {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.links[name]
}

// Name returns the link's name.
func (l *Link) Name() string { return l.name }

// Node returns the Node of master i through this link (its Addr is the
// master's ServerAddr, as for Cluster.Node). Node panics when i is out of
// range.
func (l *Link) Node(i int) *Node { return l.nodes[i] }

// Nodes returns this link's nodes of all masters, in index order, ready for
// redlock.New. Each is a *Node.
func (l *Link) Nodes() []redlock.Node { return redlockNodes(l.nodes) }

// Addr returns the address of this link's proxy for master i. Addr panics
// when i is out of range.
func (l *Link) Addr(i int) string { return l.hops[i].addr }

func (l *Link) pick(nodes []int) ([]*hop, error) {
	ms, err := l.c.pick(nodes)
	if err != nil {
		return nil, err
	}
	out := make([]*hop, len(ms))
	for k, m := range ms {
		out[k] = l.hops[m.index]
	}
	return out, nil
}

func (l *Link) netFault(nodes []int, f func(h *hop) error) error {
	hs, err := l.pick(nodes)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		if err := f(h); err != nil {
			errs = append(errs, fmt.Errorf("faultinject: link %s: %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}

// latency is Cluster.latency on this link only.
func (l *Link) latency(ctx context.Context, latency, jitter time.Duration, dir Direction, nodes ...int) error {
	return l.netFault(nodes, func(h *hop) error { return h.latency(ctx, latency, jitter, dir) })
}

// hang is Cluster.hang on this link only.
func (l *Link) hang(ctx context.Context, dir Direction, nodes ...int) error {
	return l.netFault(nodes, func(h *hop) error { return h.hang(ctx, dir) })
}

// partition is Cluster.partition on this link only: connections from this
// link's client to the given masters are refused.
func (l *Link) partition(ctx context.Context, nodes ...int) error {
	return l.netFault(nodes, func(h *hop) error { return h.partition() })
}

// heal undoes this link's network faults on the given masters.
func (l *Link) heal(ctx context.Context, nodes ...int) error {
	return l.netFault(nodes, func(h *hop) error { return h.heal(ctx) })
}

// Close closes the link's nodes and proxies. It is idempotent.
func (l *Link) Close() error {
	l.once.Do(func() {
		l.c.mu.Lock()
		if l.c.links[l.name] == l {
			delete(l.c.links, l.name)
		}
		l.c.mu.Unlock()
		l.err = l.release()
	})
	return l.err
}

func (l *Link) release() error {
	var errs []error
	for _, n := range l.nodes {
		errs = append(errs, n.close())
	}
	for _, h := range l.hops {
		h.close()
		_ = l.c.tp.Collection.Remove(h.p.Name)
	}
	return errors.Join(errs...)
}
