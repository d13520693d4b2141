package faultinject

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// AOFTailLoss is a host crash that loses the append-only file's last
// second: the master must run with AOFEverySec (appendfsync everysec,
// aof-timestamp-enabled yes), whose AOF a power cut leaves without the
// writes the kernel had not synced. The master is killed, the writes its
// AOF logged in the second of the crash (by its own clock, libfaketime's
// when skewed) are cut with redis-check-aof --truncate-to-timestamp
// <the second before> on its newest incremental file, and Delay later it
// starts again from what is left: a new run (run_id) with keys and
// fencing counters as they were up to a second earlier (a counter raised in
// that second comes back lower, stamped with the old run). Undo does
// nothing.
//
// A kill -9 alone loses nothing (the page cache survives the process):
// this fault is how a test gets the power cut. Needs: the process backend,
// redis-check-aof (Debian package redis-tools), masters with AOFEverySec.
type AOFTailLoss struct {
	Nodes []int
	Delay time.Duration
}

// tailLoser is a server that can lose its AOF's last second (the process
// backend's).
type tailLoser interface {
	LoseAOFTail(ctx context.Context) error
	// Running reports whether the server process is alive (LoseAOFTail may
	// fail after its kill).
	Running() bool
}

func (f AOFTailLoss) Name() string {
	return name("aof-tail-loss", f.Nodes, fmt.Sprintf("(delay=%v)", f.Delay), "")
}
func (f AOFTailLoss) String() string        { return f.Name() }
func (f AOFTailLoss) On(nodes ...int) Fault { f.Nodes = nodes; return f }
func (f AOFTailLoss) Undo(context.Context, *Cluster) error {
	return nil
}

// Needs says what the fault needs: the process backend, redis-check-aof,
// AOFEverySec masters.
func (f AOFTailLoss) Needs() Needs {
	return Needs{Process: true, Tools: []string{"redis-check-aof"}, Persistence: []Persistence{AOFEverySec}}
}

func (f AOFTailLoss) Inject(ctx context.Context, c *Cluster) error {
	return named(f, "injecting", c.loseAOFTail(ctx, f.Delay, f.Nodes))
}

// loseAOFTail crashes the masters as AOFTailLoss says and starts them
// again delay later.
func (c *Cluster) loseAOFTail(ctx context.Context, delay time.Duration, nodes []int) error {
	if delay < 0 {
		return fmt.Errorf("faultinject: delay %v is negative", delay)
	}
	err := c.onMasters(nodes, func(m *member) error {
		tl, ok := m.srv.(tailLoser)
		switch {
		case !ok:
			return fmt.Errorf("faultinject: master %d: losing the AOF's last second needs the process backend, not %s", m.index, c.kind)
		case m.killed:
			return fmt.Errorf("faultinject: master %d is killed", m.index)
		}
		err := tl.LoseAOFTail(ctx)
		if !tl.Running() {
			m.killed, m.paused = true, false
		}
		if err != nil {
			return fmt.Errorf("faultinject: master %d: %w", m.index, err)
		}
		return nil
	})
	if err != nil {
		// Bring back those that went down, as the fault would have.
		return errors.Join(err, c.revive(context.WithoutCancel(ctx), 0, nodes))
	}
	return c.revive(ctx, delay, nodes)
}
