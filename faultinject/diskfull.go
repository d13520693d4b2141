package faultinject

import (
	"context"
	"fmt"
)

// DiskFull fills the masters' disks: each master's directory is a tmpfs of
// its own (Config.Tmpfs), which is shrunk to what it holds and filled. A
// master with AOFEverySec then fails to write its append-only file (INFO
// persistence aof_last_write_status:err; Inject writes a probe key until
// it does) and answers every write, a script's first write included, with
// "MISCONF Errors writing to the AOF file: No space left on device"; reads
// (INFO, GET, a script that does not write) still answer. A master with
// AOFAlways exits at its next write (Redis cannot go on when a write it
// must fsync fails): a crash. Undo frees the disk; a running master writes
// its AOF again within a second (Undo waits until INFO says so), and one
// that exited is started again with its persistence. Needs: root, the
// process backend, Config.Tmpfs, masters with an append-only file.
type DiskFull struct {
	Nodes []int
}

// diskFiller is a server whose disk can be filled (the process backend's
// on a tmpfs).
type diskFiller interface {
	FillDisk(ctx context.Context) error
	// FreeDisk reports whether the server exited while its disk was full.
	FreeDisk(ctx context.Context) (exited bool, err error)
}

func (f DiskFull) Name() string          { return name("disk-full", f.Nodes, "", "") }
func (f DiskFull) String() string        { return f.Name() }
func (f DiskFull) On(nodes ...int) Fault { f.Nodes = nodes; return f }

// Needs says what the fault needs: root, the process backend, Config.Tmpfs,
// an append-only file.
func (f DiskFull) Needs() Needs {
	return Needs{Root: true, Process: true, Tmpfs: true, Persistence: []Persistence{AOFEverySec, AOFAlways}}
}

func (f DiskFull) Inject(ctx context.Context, c *Cluster) error {
	return named(f, "injecting", c.onMasters(f.Nodes, func(m *member) error {
		df, ok := m.srv.(diskFiller)
		if !ok {
			return fmt.Errorf("faultinject: master %d: a full disk needs the process backend, not %s", m.index, c.kind)
		}
		if m.killed {
			return fmt.Errorf("faultinject: master %d is killed", m.index)
		}
		m.diskFull = true // even when filling failed half-way: Undo frees what was written
		if err := df.FillDisk(ctx); err != nil {
			return fmt.Errorf("faultinject: master %d: %w", m.index, err)
		}
		return nil
	}))
}

func (f DiskFull) Undo(ctx context.Context, c *Cluster) error {
	return named(f, "undoing", c.onMasters(f.Nodes, func(m *member) error { return m.freeDisk(ctx) }))
}

// freeDisk undoes DiskFull on m, starting m again if it exited meanwhile.
// m.mu must be held.
func (m *member) freeDisk(ctx context.Context) error {
	if !m.diskFull {
		return nil
	}
	exited, err := m.srv.(diskFiller).FreeDisk(ctx)
	if err != nil {
		return fmt.Errorf("faultinject: master %d: %w", m.index, err)
	}
	m.diskFull = false
	if exited && !m.killed {
		return m.start(ctx, m.persistence)
	}
	return nil
}
