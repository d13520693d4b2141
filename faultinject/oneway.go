package faultinject

import (
	"context"
	"fmt"
)

// OneWayPartition drops the masters' TCP traffic in one Direction at the
// IP level, for every client: nftables rules in each master's network
// namespace (Config.Netns) drop the packets it receives (Upstream:
// requests, and the SYNs of new connections, whose dials then time out),
// those it sends (Downstream: replies, and the SYN-ACKs: commands on open
// connections are applied and their replies lost, retransmitted by TCP
// once healed), or both. Unlike Hang (a Toxiproxy toxic on the proxy),
// the kernel's TCP sees the loss: retransmissions, and replies that arrive
// long after the heal. Undo removes the rules. Needs: root, the process
// backend, Config.Netns, ip and nft.
type OneWayPartition struct {
	Nodes     []int
	Direction Direction
}

// dropper is a server whose traffic can be dropped (the process backend's
// in a network namespace).
type dropper interface {
	Drop(ctx context.Context, dir Direction) error
	Pass(ctx context.Context) error
}

func (f OneWayPartition) Name() string {
	return name("one-way-partition", f.Nodes, fmt.Sprintf("(%s)", direction(f.Direction)), "")
}
func (f OneWayPartition) String() string        { return f.Name() }
func (f OneWayPartition) On(nodes ...int) Fault { f.Nodes = nodes; return f }

// Needs says what the fault needs: root, the process backend, Config.Netns,
// ip and nft.
func (f OneWayPartition) Needs() Needs {
	return Needs{Root: true, Process: true, Netns: true, Tools: netnsTools}
}

func (f OneWayPartition) Inject(ctx context.Context, c *Cluster) error {
	if _, err := direction(f.Direction).streams(); err != nil {
		return named(f, "injecting", err)
	}
	return named(f, "injecting", c.onMasters(f.Nodes, func(m *member) error {
		d, ok := m.srv.(dropper)
		if !ok {
			return fmt.Errorf("faultinject: master %d: a one-way partition needs the process backend, not %s", m.index, c.kind)
		}
		if err := d.Drop(ctx, direction(f.Direction)); err != nil {
			return fmt.Errorf("faultinject: master %d: %w", m.index, err)
		}
		m.dropping = true
		return nil
	}))
}

func (f OneWayPartition) Undo(ctx context.Context, c *Cluster) error {
	return named(f, "undoing", c.onMasters(f.Nodes, func(m *member) error { return m.pass(ctx) }))
}

// pass removes m's drops. m.mu must be held.
func (m *member) pass(ctx context.Context) error {
	if !m.dropping {
		return nil
	}
	if err := m.srv.(dropper).Pass(ctx); err != nil {
		return fmt.Errorf("faultinject: master %d: %w", m.index, err)
	}
	m.dropping = false
	return nil
}
