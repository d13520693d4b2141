package faultinject

import (
	"context"
	"fmt"
)

// failover replaces each of the given masters the way a Sentinel failover
// to a replica that lacked the keys does: the master's shared proxy (and so
// every Link) switches to a standby server, which has its own run_id and
// uptime and holds none of the master's keys, and connections through the
// proxy are closed, as a failover closes them. The old master is killed and
// started again empty, as the standby of the next failover: from the
// second failover of a master on, the new master has been up since the
// previous one, like a replica that was running all along.
//
// The first failover of a master starts its standby first. A killed,
// paused or clock-skewed master gives an error (undo those faults first),
// and so does a closed cluster. The new master has no persistence.
func (c *Cluster) failover(ctx context.Context, nodes ...int) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	return c.onMasters(nodes, func(m *member) error { return m.failover(ctx, c) })
}

// failover runs with m.mu held.
func (m *member) failover(ctx context.Context, c *Cluster) error {
	switch {
	case m.killed:
		return fmt.Errorf("faultinject: master %d is killed; start it before a failover", m.index)
	case m.paused:
		return fmt.Errorf("faultinject: master %d is paused; resume it before a failover", m.index)
	case m.skewed:
		return fmt.Errorf("faultinject: master %d's clock is skewed; reset it before a failover", m.index)
	}
	if m.standby == nil {
		sb, err := c.be.StartServer(ctx, ServerSpec{Index: c.N() + m.index, Persistence: NoPersistence, Label: c.cfg.Label})
		if err != nil {
			return fmt.Errorf("faultinject: starting master %d's standby: %w", m.index, err)
		}
		m.standby = sb
	}
	if err := m.hop.retarget(m.standby.Addr()); err != nil {
		return fmt.Errorf("faultinject: master %d: %w", m.index, err)
	}
	old := m.srv
	m.srv, m.standby, m.persistence = m.standby, old, NoPersistence
	if err := old.Kill(ctx); err != nil {
		return fmt.Errorf("faultinject: master %d: killing the old master: %w", m.index, err)
	}
	if err := old.Start(ctx, NoPersistence); err != nil {
		return fmt.Errorf("faultinject: master %d: starting the old master again as the standby: %w", m.index, err)
	}
	return nil
}
