package faultinject

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Fault is one fault as a value: a stable name for logs and replay, and how
// to inject and undo it on a cluster. Each kind is its own small comparable
// type (Kill, Restart, Pause, ClockJump, ClockRate, Latency, Hang,
// Partition, Failover, and the host faults AOFTailLoss,
// ClockStepAfterRestart, ClockStrobe, DiskFull, OneWayPartition) holding
// only its parameters: the state of the
// masters and proxies stays with the Cluster. Errors of Inject and Undo name
// the fault. Undoing a fault that is not in force does nothing; Undo of a
// network fault heals every network fault on the same proxies.
type Fault interface {
	// Name is built from the kind and the parameters, for example
	// "kill[0,2]", "clock-jump[3](+30s)", "latency[1](20ms±5ms,downstream)@clientA",
	// "restart[4](delay=2s,aof-always)".
	Name() string
	Inject(ctx context.Context, c *Cluster) error
	Undo(ctx context.Context, c *Cluster) error
	// On returns the same fault acting on nodes instead (a schedule fills in
	// its targets at run time).
	On(nodes ...int) Fault
}

// Kill kills the masters. Undo starts them again, Delay later, with the
// persistence of their last run.
type Kill struct {
	Nodes []int
	Delay time.Duration
}

// Restart kills the masters, waits Delay and starts them with Persistence
// (NoPersistence: empty). Undo does nothing.
type Restart struct {
	Nodes       []int
	Delay       time.Duration
	Persistence Persistence
}

// Pause freezes the masters (SIGSTOP, docker pause); Undo resumes them.
type Pause struct{ Nodes []int }

// ClockJump sets the masters' wall clocks Offset ahead (behind when
// negative) of real time; Undo resets them.
type ClockJump struct {
	Nodes  []int
	Offset time.Duration
}

// ClockRate makes the masters' wall clocks run at Rate times real speed
// from now on; Undo resets them.
type ClockRate struct {
	Nodes []int
	Rate  float64
}

// Latency adds Latency ± Jitter (whole milliseconds) in Direction (empty:
// Downstream) on the proxies of Link (empty: the shared proxies, for every
// client); Undo heals them.
type Latency struct {
	Nodes           []int
	Link            string
	Latency, Jitter time.Duration
	Direction       Direction
}

// Hang makes the proxies of Link drop every byte in Direction (empty:
// Downstream); Undo heals them.
type Hang struct {
	Nodes     []int
	Link      string
	Direction Direction
}

// Partition disables the proxies of Link (connections refused): with Link
// set it is an asymmetric cut of one client from the masters. Undo heals
// them.
type Partition struct {
	Nodes []int
	Link  string
}

// Failover replaces the masters as a Sentinel failover to a replica that
// lacked the keys does (see failover.go). Undo does nothing.
type Failover struct{ Nodes []int }

func (f Kill) Name() string {
	if f.Delay > 0 {
		return name("kill", f.Nodes, fmt.Sprintf("(delay=%v)", f.Delay), "")
	}
	return name("kill", f.Nodes, "", "")
}
func (f Restart) Name() string {
	return name("restart", f.Nodes, fmt.Sprintf("(delay=%v,%s)", f.Delay, f.Persistence), "")
}
func (f Pause) Name() string { return name("pause", f.Nodes, "", "") }
func (f ClockJump) Name() string {
	return name("clock-jump", f.Nodes, fmt.Sprintf("(%s)", signed(f.Offset)), "")
}
func (f ClockRate) Name() string {
	return name("clock-rate", f.Nodes, "(x"+strconv.FormatFloat(f.Rate, 'g', -1, 64)+")", "")
}
func (f Latency) Name() string {
	return name("latency", f.Nodes, fmt.Sprintf("(%v±%v,%s)", f.Latency, f.Jitter, direction(f.Direction)), f.Link)
}
func (f Hang) Name() string {
	return name("hang", f.Nodes, fmt.Sprintf("(%s)", direction(f.Direction)), f.Link)
}
func (f Partition) Name() string { return name("partition", f.Nodes, "", f.Link) }
func (f Failover) Name() string  { return name("failover", f.Nodes, "", "") }

func (f Kill) String() string      { return f.Name() }
func (f Restart) String() string   { return f.Name() }
func (f Pause) String() string     { return f.Name() }
func (f ClockJump) String() string { return f.Name() }
func (f ClockRate) String() string { return f.Name() }
func (f Latency) String() string   { return f.Name() }
func (f Hang) String() string      { return f.Name() }
func (f Partition) String() string { return f.Name() }
func (f Failover) String() string  { return f.Name() }

// Needs says what the fault needs: libfaketime (on the process and docker
// backends).
func (f ClockJump) Needs() Needs { return Needs{Libfaketime: true} }

// Needs says what the fault needs: libfaketime (on the process and docker
// backends).
func (f ClockRate) Needs() Needs { return Needs{Libfaketime: true} }

func (f Kill) On(nodes ...int) Fault      { f.Nodes = nodes; return f }
func (f Restart) On(nodes ...int) Fault   { f.Nodes = nodes; return f }
func (f Pause) On(nodes ...int) Fault     { f.Nodes = nodes; return f }
func (f ClockJump) On(nodes ...int) Fault { f.Nodes = nodes; return f }
func (f ClockRate) On(nodes ...int) Fault { f.Nodes = nodes; return f }
func (f Latency) On(nodes ...int) Fault   { f.Nodes = nodes; return f }
func (f Hang) On(nodes ...int) Fault      { f.Nodes = nodes; return f }
func (f Partition) On(nodes ...int) Fault { f.Nodes = nodes; return f }
func (f Failover) On(nodes ...int) Fault  { f.Nodes = nodes; return f }

func (f Kill) Inject(ctx context.Context, c *Cluster) error {
	return named(f, "injecting", c.kill(ctx, f.Nodes...))
}
func (f Kill) Undo(ctx context.Context, c *Cluster) error {
	return named(f, "undoing", c.revive(ctx, f.Delay, f.Nodes))
}
func (f Restart) Inject(ctx context.Context, c *Cluster) error {
	return named(f, "injecting", c.restart(ctx, restartOptions{Delay: f.Delay, Persistence: f.Persistence}, f.Nodes...))
}
func (f Restart) Undo(context.Context, *Cluster) error { return nil }
func (f Pause) Inject(ctx context.Context, c *Cluster) error {
	return named(f, "injecting", c.pause(ctx, f.Nodes...))
}
func (f Pause) Undo(ctx context.Context, c *Cluster) error {
	return named(f, "undoing", c.resume(ctx, f.Nodes...))
}
func (f ClockJump) Inject(ctx context.Context, c *Cluster) error {
	return named(f, "injecting", c.setClock(ctx, f.Offset, 1, f.Nodes...))
}
func (f ClockJump) Undo(ctx context.Context, c *Cluster) error {
	return named(f, "undoing", c.resetClock(ctx, f.Nodes...))
}
func (f ClockRate) Inject(ctx context.Context, c *Cluster) error {
	return named(f, "injecting", c.setClock(ctx, 0, f.Rate, f.Nodes...))
}
func (f ClockRate) Undo(ctx context.Context, c *Cluster) error {
	return named(f, "undoing", c.resetClock(ctx, f.Nodes...))
}
func (f Latency) Inject(ctx context.Context, c *Cluster) error {
	t, err := c.netTarget(f.Link)
	if err == nil {
		err = t.latency(ctx, f.Latency, f.Jitter, direction(f.Direction), f.Nodes...)
	}
	return named(f, "injecting", err)
}
func (f Latency) Undo(ctx context.Context, c *Cluster) error { return heal(ctx, c, f, f.Link, f.Nodes) }
func (f Hang) Inject(ctx context.Context, c *Cluster) error {
	t, err := c.netTarget(f.Link)
	if err == nil {
		err = t.hang(ctx, direction(f.Direction), f.Nodes...)
	}
	return named(f, "injecting", err)
}
func (f Hang) Undo(ctx context.Context, c *Cluster) error { return heal(ctx, c, f, f.Link, f.Nodes) }
func (f Partition) Inject(ctx context.Context, c *Cluster) error {
	t, err := c.netTarget(f.Link)
	if err == nil {
		err = t.partition(ctx, f.Nodes...)
	}
	return named(f, "injecting", err)
}
func (f Partition) Undo(ctx context.Context, c *Cluster) error {
	return heal(ctx, c, f, f.Link, f.Nodes)
}
func (f Failover) Inject(ctx context.Context, c *Cluster) error {
	return named(f, "injecting", c.failover(ctx, f.Nodes...))
}
func (f Failover) Undo(context.Context, *Cluster) error { return nil }

// name builds a fault's name: kind[nodes]params@link.
func name(kind string, nodes []int, params, link string) string {
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte('[')
	for k, n := range nodes {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(n))
	}
	b.WriteByte(']')
	b.WriteString(params)
	if link != "" {
		b.WriteString("@" + link)
	}
	return b.String()
}

func signed(d time.Duration) string {
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

func direction(d Direction) Direction {
	if d == "" {
		return Downstream
	}
	return d
}

// named wraps err, when there is one, with what was done to which fault.
func named(f Fault, doing string, err error) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", doing, f.Name(), err)
	}
	return nil
}

// heal undoes a network fault on the proxies of link.
func heal(ctx context.Context, c *Cluster, f Fault, link string, nodes []int) error {
	t, err := c.netTarget(link)
	if err == nil {
		err = t.heal(ctx, nodes...)
	}
	return named(f, "undoing", err)
}

// netTarget is what network faults act on: the cluster's shared proxies
// (link empty) or a Link's. *Cluster and *Link implement it.
type netTarget interface {
	latency(ctx context.Context, latency, jitter time.Duration, dir Direction, nodes ...int) error
	hang(ctx context.Context, dir Direction, nodes ...int) error
	partition(ctx context.Context, nodes ...int) error
	heal(ctx context.Context, nodes ...int) error
}

func (c *Cluster) netTarget(link string) (netTarget, error) {
	if link == "" {
		return c, nil
	}
	l := c.Link(link)
	if l == nil {
		return nil, fmt.Errorf("faultinject: no link %q", link)
	}
	return l, nil
}

// revive starts the killed masters among nodes, after delay, with the
// persistence of their last run.
func (c *Cluster) revive(ctx context.Context, delay time.Duration, nodes []int) error {
	ms, err := c.pick(nodes)
	if err != nil {
		return err
	}
	if err := c.checkOpen(); err != nil {
		return err
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("faultinject: restart delay of %v interrupted: %w", delay, ctx.Err())
		}
	}
	return each(ms, func(m *member) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.killed {
			return nil
		}
		return m.start(ctx, m.persistence)
	})
}
