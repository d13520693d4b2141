package faultinject

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"testing"

	"github.com/quorumlock/quorumlock/faultinject/clockskew"
	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// Needs is what a fault needs of the machine and of the cluster it acts
// on, as its doc says. Missing tells what this machine lacks; RequireFault
// fails or skips a test as CI says; a chaos scenario starts its cluster
// with what its faults need (ClusterNeeds).
type Needs struct {
	// Root: the fault mounts or creates network namespaces.
	Root bool
	// Libfaketime: on the process and docker backends, the fault sets a
	// master's clock through libfaketime (package clockskew: gcc and
	// libfaketime.so.1).
	Libfaketime bool
	// Tools are commands the fault runs (nft, ip, redis-check-aof).
	Tools []string
	// Process: the fault acts on redis-server processes (the process
	// backend) only.
	Process bool
	// Tmpfs and Netns: the cluster must be started with Config.Tmpfs or
	// Config.Netns.
	Tmpfs, Netns bool
	// Persistence: the masters it acts on must run with one of these
	// (empty: any).
	Persistence []Persistence
}

// needer is a fault that says what it needs.
type needer interface{ Needs() Needs }

// NeedsOf returns what f needs (nothing for the faults that need nothing
// beyond a cluster).
func NeedsOf(f Fault) Needs {
	if n, ok := f.(needer); ok {
		return n.Needs()
	}
	return Needs{}
}

// Missing returns what this machine lacks of n, each need with the
// package that brings it, or nil.
func (n Needs) Missing() error {
	var errs []error
	if n.Root {
		errs = append(errs, canMount())
	}
	if n.Libfaketime {
		errs = append(errs, clockskew.Available())
	}
	if n.Process {
		if _, err := redisproc.LookPath(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, tool := range n.Tools {
		if _, err := exec.LookPath(tool); err != nil {
			errs = append(errs, fmt.Errorf("faultinject: %s not found in PATH (%s)", tool, toolPackage(tool)))
		}
	}
	return errors.Join(errs...)
}

// toolPackage names the Debian package of a tool.
func toolPackage(tool string) string {
	switch tool {
	case "nft":
		return "apt-get install -y nftables"
	case "ip":
		return "apt-get install -y iproute2"
	case "redis-check-aof":
		return "Debian: apt-get install -y redis-tools"
	}
	return "install it"
}

// Merge returns n with m's needs added.
func (n Needs) Merge(m Needs) Needs {
	n.Root = n.Root || m.Root
	n.Libfaketime = n.Libfaketime || m.Libfaketime
	n.Process = n.Process || m.Process
	n.Tmpfs = n.Tmpfs || m.Tmpfs
	n.Netns = n.Netns || m.Netns
	for _, t := range m.Tools {
		if !slices.Contains(n.Tools, t) {
			n.Tools = append(n.Tools, t)
		}
	}
	if len(m.Persistence) > 0 {
		if len(n.Persistence) == 0 {
			n.Persistence = slices.Clone(m.Persistence)
		} else {
			n.Persistence = slices.DeleteFunc(slices.Clone(n.Persistence), func(p Persistence) bool { return !slices.Contains(m.Persistence, p) })
		}
	}
	return n
}

// Allows reports whether a master with persistence p meets n.
func (n Needs) Allows(p Persistence) bool {
	return len(n.Persistence) == 0 || slices.Contains(n.Persistence, p)
}

// Apply sets the cluster options n needs in cfg: the process backend when
// it needs one (an error if cfg asks for another), Tmpfs and Netns.
func (n Needs) Apply(cfg Config) (Config, error) {
	if n.Process {
		switch cfg.Backend {
		case "", Auto:
			cfg.Backend = Process
		case Process:
		default:
			return cfg, fmt.Errorf("faultinject: the faults need the process backend, not %s", cfg.Backend)
		}
	}
	cfg.Tmpfs = cfg.Tmpfs || n.Tmpfs
	cfg.Netns = cfg.Netns || n.Netns
	return cfg, nil
}

// RequireFault skips the test when this machine lacks what f needs
// (Needs.Missing), or fails it when the CI environment variable is "true".
func RequireFault(t testing.TB, f Fault) {
	t.Helper()
	if err := NeedsOf(f).Missing(); err != nil {
		redisproc.RequireOrSkip(t, fmt.Errorf("faultinject: %s: %w", f.On().Name(), err))
	}
}
