package faultinject

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultKind names a kind of fault.
type FaultKind string

// The kinds of fault. Each Fault has an Inject and an Undo.
const (
	// FaultKill kills the masters. Undo starts them again with the
	// persistence of their last run, after Fault.Delay.
	FaultKill FaultKind = "kill"
	// FaultRestart kills the masters, waits Fault.Delay and starts them with
	// Fault.Persistence. Undo does nothing.
	FaultRestart FaultKind = "restart"
	// FaultPause pauses the masters; Undo resumes them.
	FaultPause FaultKind = "pause"
	// FaultClock sets the masters' clocks to Fault.Offset and Fault.Rate;
	// Undo resets them to real time.
	FaultClock FaultKind = "clock"
	// FaultLatency adds Fault.Latency ± Fault.Jitter in Fault.Direction on
	// the proxies; Undo heals them.
	FaultLatency FaultKind = "latency"
	// FaultHang makes the proxies drop every byte in Fault.Direction; Undo
	// heals them.
	FaultHang FaultKind = "hang"
	// FaultPartition disables the proxies (connections refused); Undo heals
	// them.
	FaultPartition FaultKind = "partition"
)

// Fault is one fault as data, so that a schedule of faults can be written,
// logged and replayed. Fields that do not apply to Kind are ignored (and left
// out of Name). The zero value is not a valid fault.
//
// Undo of a network fault heals every network fault on the same proxies, not
// only this one; Undo of a master fault (kill, pause, clock) undoes that
// fault kind on the masters.
type Fault struct {
	Kind FaultKind
	// Nodes are the indexes of the masters. At least one is required.
	Nodes []int
	// Link, for network faults only, names the Link whose proxies get the
	// fault (one client's links to Nodes). Empty: the shared proxies, for
	// every client.
	Link string
	// Delay is the restart delay of FaultRestart, and the delay of
	// FaultKill's Undo before the start.
	Delay time.Duration
	// Persistence is the persistence of FaultRestart's new run.
	Persistence Persistence
	// Offset and Rate are FaultClock's clock setting. Rate 0 means 1.
	Offset time.Duration
	Rate   float64
	// Latency and Jitter are FaultLatency's delay (whole milliseconds).
	Latency, Jitter time.Duration
	// Direction is the direction of FaultLatency and FaultHang. Empty:
	// Downstream.
	Direction Direction
}

// Name is a stable, human-readable name of the fault built from its kind and
// the fields that apply, for example "kill[0,2]", "clock[3](+30s,x1)",
// "latency[1](20ms±5ms,downstream)@clientA", "restart[4](delay=2s,aof-always)".
func (f Fault) Name() string {
	var b strings.Builder
	b.WriteString(string(f.Kind))
	b.WriteByte('[')
	for k, n := range f.Nodes {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(n))
	}
	b.WriteByte(']')
	switch f.Kind {
	case FaultRestart:
		fmt.Fprintf(&b, "(delay=%v,%s)", f.Delay, f.Persistence)
	case FaultKill:
		if f.Delay > 0 {
			fmt.Fprintf(&b, "(delay=%v)", f.Delay)
		}
	case FaultClock:
		sign := "+"
		if f.Offset < 0 {
			sign = ""
		}
		fmt.Fprintf(&b, "(%s%v,x%s)", sign, f.Offset, strconv.FormatFloat(f.rate(), 'g', -1, 64))
	case FaultLatency:
		fmt.Fprintf(&b, "(%v±%v,%s)", f.Latency, f.Jitter, f.direction())
	case FaultHang:
		fmt.Fprintf(&b, "(%s)", f.direction())
	}
	if f.Link != "" {
		b.WriteString("@" + f.Link)
	}
	return b.String()
}

// String returns Name.
func (f Fault) String() string { return f.Name() }

func (f Fault) rate() float64 {
	if f.Rate == 0 {
		return 1
	}
	return f.Rate
}

func (f Fault) direction() Direction {
	if f.Direction == "" {
		return Downstream
	}
	return f.Direction
}

func (f Fault) network() bool {
	return f.Kind == FaultLatency || f.Kind == FaultHang || f.Kind == FaultPartition
}

// net returns what network faults act on: the cluster's shared proxies or a
// link's.
func (f Fault) net(c *Cluster) (netTarget, error) {
	if !f.network() && f.Link != "" {
		return nil, fmt.Errorf("faultinject: fault %s: Link applies to network faults only", f.Name())
	}
	if f.Link == "" {
		return c, nil
	}
	l := c.Link(f.Link)
	if l == nil {
		return nil, fmt.Errorf("faultinject: fault %s: no link %q", f.Name(), f.Link)
	}
	return l, nil
}

// netTarget is implemented by *Cluster and *Link.
type netTarget interface {
	Latency(ctx context.Context, latency, jitter time.Duration, dir Direction, nodes ...int) error
	Hang(ctx context.Context, dir Direction, nodes ...int) error
	Partition(ctx context.Context, nodes ...int) error
	Heal(ctx context.Context, nodes ...int) error
}

// Inject applies f to the cluster. Errors name the fault.
func (c *Cluster) Inject(ctx context.Context, f Fault) error {
	t, err := f.net(c)
	if err != nil {
		return err
	}
	switch f.Kind {
	case FaultKill:
		err = c.Kill(ctx, f.Nodes...)
	case FaultRestart:
		err = c.Restart(ctx, RestartOptions{Delay: f.Delay, Persistence: f.Persistence}, f.Nodes...)
	case FaultPause:
		err = c.Pause(ctx, f.Nodes...)
	case FaultClock:
		err = c.SetClock(ctx, f.Offset, f.rate(), f.Nodes...)
	case FaultLatency:
		err = t.Latency(ctx, f.Latency, f.Jitter, f.direction(), f.Nodes...)
	case FaultHang:
		err = t.Hang(ctx, f.direction(), f.Nodes...)
	case FaultPartition:
		err = t.Partition(ctx, f.Nodes...)
	default:
		return fmt.Errorf("faultinject: unknown fault kind %q", f.Kind)
	}
	if err != nil {
		return fmt.Errorf("injecting %s: %w", f.Name(), err)
	}
	return nil
}

// Undo undoes f on the cluster (see Fault for what each kind's Undo does).
// Undoing a fault that is not in force does nothing. Errors name the fault.
func (c *Cluster) Undo(ctx context.Context, f Fault) error {
	t, err := f.net(c)
	if err != nil {
		return err
	}
	switch f.Kind {
	case FaultKill:
		err = c.revive(ctx, f.Delay, f.Nodes)
	case FaultRestart:
		_, err = c.pick(f.Nodes)
	case FaultPause:
		err = c.Resume(ctx, f.Nodes...)
	case FaultClock:
		err = c.ResetClock(ctx, f.Nodes...)
	case FaultLatency, FaultHang, FaultPartition:
		err = t.Heal(ctx, f.Nodes...)
	default:
		return fmt.Errorf("faultinject: unknown fault kind %q", f.Kind)
	}
	if err != nil {
		return fmt.Errorf("undoing %s: %w", f.Name(), err)
	}
	return nil
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
