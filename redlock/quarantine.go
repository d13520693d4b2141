package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/internal/nodecheck"
)

// The restart quarantine (WithRestartQuarantine) judges every yes vote by
// the server's own account of itself, read after the vote: a vote counts
// only if the run that answers the Info read after it is one the client has
// known for the quarantine, or, met for the first time, has been up for the
// quarantine. The read comes after the vote on the server's timeline (it is
// sent once the vote's reply arrived), so it does not matter which client
// saw what before, nor whether a proxy kept the connection open across a
// restart: if the vote ran on an earlier run than the one the read finds,
// that run started after the attempt began, less than a TTL before the
// read, so it is younger than the quarantine and the vote is refused.

// memberQuarantine is a node's quarantine state; runID and quarantined are
// under the member's mu.
type memberQuarantine struct {
	durable     bool // exempt from the restart quarantine (WithRestartQuarantine)
	runID       string
	quarantined time.Time // votes count again from this moment on
}

// sawServer records the server run behind member j, and starts a
// quarantine if it is a new run (or a young first one) and the quarantine
// is on (reported to the client's Observer).
func (c *Client) sawServer(ctx context.Context, j int, info ServerInfo) {
	m := c.members[j]
	m.mu.Lock()
	newRun := info.RunID != m.runID
	known, left := c.sawRun(m, info)
	m.mu.Unlock()
	if c.obs == nil {
		return
	}
	if newRun {
		c.obs.NodeState(ctx, NodeStateEvent{Node: m.addr, Index: j, RunID: info.RunID, Restart: known, Quarantine: left, Findings: c.checkServer(m, info)})
	}
}

// checkServer judges a server's settings (see NodeStateEvent.Findings): the
// findings at levels warn and bad, less those the restart quarantine
// covers when it is on and m is not exempt from it (durable).
func (c *Client) checkServer(m *member, info ServerInfo) []ServerFinding {
	covered := c.cfg.quarantine && !m.durable
	var out []ServerFinding
	for _, f := range nodecheck.Server(info.Settings, nil, nil) {
		if (f.Level == nodecheck.Warn || f.Level == nodecheck.Bad) && !(f.Quarantine && covered) {
			out = append(out, ServerFinding{Level: f.Level, Check: f.Check, Text: f.Text})
		}
	}
	return out
}

// sawRun is sawServer under m.mu: it reports whether the server was known
// under another run, and the quarantine it started (0 for none).
func (c *Client) sawRun(m *member, info ServerInfo) (known bool, left time.Duration) {
	if info.RunID == m.runID {
		return false, 0
	}
	known = m.runID != ""
	m.runID = info.RunID
	if !c.cfg.quarantine || m.durable {
		return known, 0
	}
	q := c.cfg.quarantineFor
	if q == 0 {
		q = time.Duration(c.maxTTL.Load())
	}
	// A new run of a known server may lack keys granted until just now:
	// the old run may have kept granting after we last saw it (a failover
	// to a standby that started after that is young, yet lacks them too),
	// so it waits the whole quarantine. A server met for the first time
	// lacks at most what was granted before it started (a node reports a
	// promoted replica's uptime as 0: it may lack keys granted until its
	// promotion, whenever that was).
	left = q
	if !known {
		left = q - info.Uptime
	}
	if left > 0 {
		m.quarantined = time.Now().Add(left)
	}
	return known, left
}

// checkQuarantine decides whether a yes vote of member i counts: it reads
// the server's identity after the vote, and refuses the vote while that
// server is in quarantine (or is another member's server).
func (c *Client) checkQuarantine(ctx context.Context, i int) error {
	m := c.members[i]
	if !c.cfg.quarantine || m.durable || c.cfg.knobs.NoQuarantine {
		return nil
	}
	if !c.cfg.knobs.NoVoteIdentity { // test-only: trust the identity read before
		info, err := m.node.Info(ctx)
		if err != nil {
			return fmt.Errorf("%w: reading the server's identity after its vote: %w", ErrNodeQuarantined, err)
		}
		if err := c.observe(ctx, i, info); err != nil {
			return err
		}
	}
	m.mu.Lock()
	until := m.quarantined
	m.mu.Unlock()
	if left := time.Until(until); left > 0 {
		return fmt.Errorf("%w for %v more", ErrNodeQuarantined, left.Round(time.Millisecond))
	}
	return nil
}
