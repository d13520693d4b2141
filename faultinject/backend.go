package faultinject

import (
	"context"
	"time"
)

// BackendKind names where the Redis masters of a cluster run.
type BackendKind string

const (
	// Auto picks docker when an engine answers, else process when
	// redis-server is on PATH, else memory, and says which and why.
	Auto BackendKind = "auto"
	// Docker runs each master in a container (ory/dockertest v3) built
	// locally from the host's redis-server.
	Docker BackendKind = "docker"
	// Process runs each master as a redis-server process from PATH.
	Process BackendKind = "process"
	// Memory runs each master in-process with alicebob/miniredis v2.
	Memory BackendKind = "memory"
)

// Persistence says what a master keeps across a kill and restart.
type Persistence int

const (
	// NoPersistence: a killed master restarts empty.
	NoPersistence Persistence = iota
	// AOFAlways: append-only file with appendfsync always; keys and their
	// TTLs survive a kill -9.
	AOFAlways
	// AOFEverySec: append-only file with appendfsync everysec and
	// aof-timestamp-enabled yes. A kill -9 loses nothing (the page cache
	// survives the process); a host crash loses the writes of the last
	// second, which AOFTailLoss does (process backend). A full disk makes
	// the master refuse writes with MISCONF (DiskFull), where AOFAlways
	// makes it exit.
	AOFEverySec
)

func (p Persistence) String() string {
	switch p {
	case AOFAlways:
		return "aof-always"
	case AOFEverySec:
		return "aof-everysec"
	}
	return "none"
}

// known reports whether p is one of the Persistence values.
func (p Persistence) known() bool { return p == NoPersistence || p == AOFAlways || p == AOFEverySec }

// aof reports whether p keeps an append-only file.
func (p Persistence) aof() bool { return p == AOFAlways || p == AOFEverySec }

// fsync is p's appendfsync policy ("" without an AOF).
func (p Persistence) fsync() string {
	switch p {
	case AOFAlways:
		return "always"
	case AOFEverySec:
		return "everysec"
	}
	return ""
}

// keeps reports whether a master whose last run had persistence last and
// that starts with p comes back with its data (after a kill -9: both
// append-only).
func keeps(last, p Persistence) bool { return last.aof() && p.aof() }

// ServerSpec describes one master a backend starts.
type ServerSpec struct {
	// Index is the master's position in the cluster (0-based); backends use
	// it in names and labels.
	Index int
	// Persistence is used at start and at every restart unless Start is
	// given another.
	Persistence Persistence
	// Port is the host port the server listens on (published on 127.0.0.1
	// for docker); 0 picks a free one. A restarted server keeps its port.
	Port int
	// Label tags resources (containers, temp dirs) of one cluster so that
	// Close, and a crashed run's next start, can find exactly them.
	Label string
}

// server is one Redis master managed by a backend. Clients never dial Addr
// directly: the cluster puts a Toxiproxy proxy in front of it.
type server interface {
	// Addr is the server's own address, host:port on 127.0.0.1.
	Addr() string
	// Kill stops the server at once (SIGKILL / container kill).
	Kill(ctx context.Context) error
	// Start starts a killed server again on the same port with the given
	// persistence (data kept only when the previous run and this one keep
	// an append-only file: keeps).
	Start(ctx context.Context, p Persistence) error
	// Pause freezes the server (SIGSTOP / docker pause); Resume undoes it.
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// SetClock makes the server's wall clock read real + offset, running at
	// rate times real speed from now on (rate 1 and offset 0 undo it).
	SetClock(ctx context.Context, offset time.Duration, rate float64) error
	// Close stops the server and removes everything it made.
	Close(ctx context.Context) error
}

// backend starts servers of one kind.
type backend interface {
	Kind() BackendKind
	StartServer(ctx context.Context, spec ServerSpec) (server, error)
	// Close releases backend-wide resources (not the servers).
	Close(ctx context.Context) error
}
