// Package chaos runs the quorum lock under the faults of the RedLock debate
// (Kleppmann's critique, antirez's reply, the Redis docs), records what every
// client did, and checks the history.
//
// A Scenario is data: a cluster size, a TTL, a number of clients, a duration
// and a fault schedule, with the expected outcome. Safe scenarios must show no
// violation; unsafe scenarios are built so that the dangerous interleaving
// happens on every run, and must show one: that is how the checker proves it
// can fail. Run executes one scenario on a faultinject.Cluster and returns a
// Report; Check is the checker on its own, usable on any History.
//
// The workload: K client goroutines, each with its own redlock.Client over
// its own faultinject.Link (its own proxies and connections, as separate
// processes would have), loop Lock -> critical section -> write to a
// protected Register -> Unlock. Every event is timestamped on one reference
// monotonic clock (RefClock).
package chaos

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
)

// Expect is the expected outcome of a scenario.
type Expect string

const (
	// Safe: the run must show no violation.
	Safe Expect = "safe"
	// Unsafe: the run must show at least one violation (the fault defeats
	// RedLock's assumptions, and the checker must catch it).
	Unsafe Expect = "unsafe"
)

// Target names the masters a node fault acts on, relative to the cluster
// size N, so that a scenario keeps its meaning when N changes.
type Target string

const (
	// Minority is the last (N-1)/2 masters: at most a minority.
	Minority Target = "minority"
	// LastNode is master N-1.
	LastNode Target = "last"
	// Pivot is master (N-1)/2: with Scenario.Split it is the one master in
	// both client 0's and client 1's only reachable quorum.
	Pivot Target = "pivot"
	// Rolling is one master per injection, in turn: 0, 1, ..., N-1, 0, ...
	Rolling Target = "rolling"
	// All is every master at once (a network, or a machine, slow for
	// everyone).
	All Target = "all"
)

// Nodes returns the master indexes of t in a cluster of n masters. Errors
// name the target and n.
func (t Target) Nodes(n int) ([]int, error) {
	if n < 1 {
		return nil, fmt.Errorf("chaos: target %q needs at least one master, have %d", t, n)
	}
	switch t {
	case Minority:
		k := (n - 1) / 2
		if k == 0 {
			return nil, fmt.Errorf("chaos: target %q is empty with %d masters; use at least 3", t, n)
		}
		out := make([]int, 0, k)
		for i := n - k; i < n; i++ {
			out = append(out, i)
		}
		return out, nil
	case LastNode:
		return []int{n - 1}, nil
	case Pivot:
		return []int{(n - 1) / 2}, nil
	case Rolling, All:
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	return nil, fmt.Errorf("chaos: unknown target %q (want %s, %s, %s, %s or %s)", t, Minority, LastNode, Pivot, Rolling, All)
}

// Step is one entry of a fault schedule. A step is either a node or network
// fault (Fault, acting on Target) or a client pause (Pause > 0).
//
// The scheduler runs each step in its own goroutine: it waits At, then
// injects; when For > 0 it undoes the fault For later; when Every > 0 it
// injects again Every after the previous injection ended, until the run
// ends. At the end of the run every fault is undone (Cluster.HealAll) before
// the clients stop.
type Step struct {
	// At is the delay from the start of the workload to the first
	// injection.
	At time.Duration
	// Every, when positive, repeats the step Every after the previous
	// injection (and its undo) finished. Zero: inject once.
	Every time.Duration
	// For, when positive, undoes the fault For after injecting it. Zero:
	// the fault stays until the end of the run (faults whose injection
	// completes by itself, such as FaultRestart, need no undo).
	For time.Duration
	// Hold, when positive, makes the step wait for a holder: the next
	// client to acquire the lock stays in its critical section for up to
	// Hold (instead of Scenario.Hold; never past its lease's validity, and
	// no longer once another client has acquired), and the fault is
	// injected as soon as that client holds the lock. This forces the fault
	// into the holder's lease.
	Hold time.Duration
	// Fault is the fault; its Nodes are filled from Target at run time.
	// Ignored when Pause > 0.
	Fault faultinject.Fault
	// Target says which masters Fault acts on.
	Target Target
	// Pause, when positive, makes the step a client pause instead of a node
	// fault (a GC pause, a VM migration): the next client to acquire checks
	// its lease is valid, then stalls until Pause past its lease's validity
	// deadline, and then writes to the protected resource. With Hold and a
	// Fault as well, the step is both: the fault is injected as soon as
	// that client holds the lease (and has checked it), during its stall.
	Pause time.Duration
	// Overrun, when positive, makes the step a work overrun instead of a
	// node fault: the next client to acquire works until Overrun past its
	// lease's validity deadline, then checks its lease (over by then) and
	// skips its write, as the workload's protocol requires.
	Overrun time.Duration
}

// Name describes the step, for logs.
func (s Step) Name() string {
	var b strings.Builder
	if s.Pause > 0 && s.Fault != nil {
		fmt.Fprintf(&b, "%s@%s during client-pause(validity+%v)", strings.Replace(s.Fault.On().Name(), "[]", "", 1), s.Target, s.Pause)
	} else if s.Pause > 0 {
		fmt.Fprintf(&b, "client-pause(validity+%v)", s.Pause)
	} else if s.Overrun > 0 {
		fmt.Fprintf(&b, "work-overrun(validity+%v)", s.Overrun)
	} else {
		fmt.Fprintf(&b, "%s@%s", strings.Replace(s.Fault.On().Name(), "[]", "", 1), s.Target)
	}
	if s.Hold > 0 {
		fmt.Fprintf(&b, " while held(%v)", s.Hold)
	}
	if s.For > 0 {
		fmt.Fprintf(&b, " for %v", s.For)
	}
	if s.Every > 0 {
		fmt.Fprintf(&b, " every %v", s.Every)
	}
	return b.String()
}

// Scenario is one chaos run as data. Durations apply to both the full and
// the short (CI-sized) variant except Duration/ShortDuration.
type Scenario struct {
	// Name is unique within Scenarios; letters, digits and '-'.
	Name string
	// About says in one sentence what the scenario shows.
	About string
	// Expect is the expected outcome.
	Expect Expect
	// Nodes is the number of masters N.
	Nodes int
	// TTL is the lock's TTL.
	TTL time.Duration
	// DriftFactor is the lock's drift allowance factor. Zero: the redlock
	// default (0.01, see redlock.WithDriftFactor).
	DriftFactor float64
	// Clients is the number of client goroutines K (each its own
	// redlock.Client and Link).
	Clients int
	// Duration is the length of the workload in the full suite (at least
	// 30 s); ShortDuration in the short one (a few seconds).
	Duration, ShortDuration time.Duration
	// Hold is the length of an ordinary critical section.
	Hold time.Duration
	// Persistence is every master's persistence.
	Persistence faultinject.Persistence
	// Split cuts the clients' links so that each of the first two clients
	// reaches exactly a bare quorum: client 0 reaches masters [0, q) and
	// client 1 masters [N-q, N), q = N/2+1. For odd N the two quorums share
	// exactly one master, the Pivot. Other clients reach every master.
	Split bool
	// Schedule is the fault schedule.
	Schedule []Step
	// Fencing makes the lock hand out fencing tokens (redlock.WithFencing)
	// and the protected resource refuse a write whose token is below the
	// highest it has accepted. The checker then judges writes by what
	// fencing promises (see Check): an overlap of leases is reported but
	// harmless as long as the resource never takes an older lease's write
	// after a newer one's, nor refuses the newer one.
	Fencing bool
	// Quarantine turns on the restart quarantine
	// (redlock.WithRestartQuarantine with its default: the longest TTL).
	Quarantine bool
	// Shape is the kind of lock the clients take. Default: Mutex.
	Shape Shape
	// K is a Semaphore's number of places.
	K int
	// Renew runs every critical section with Mutex.Do and auto-renewal at
	// its default fraction; a client-pause step then stalls the function
	// past its first validity, and it writes only while its context is
	// live and its lease valid.
	Renew bool
	// NodeTimeout is the deadline of the clients' calls to each master
	// (redlock.WithNodeTimeout) and of their releases
	// (redlock.WithReleaseTimeout). Zero: a fifth of the TTL. Must be
	// below the TTL.
	NodeTimeout time.Duration
	// Resource is the protected resource the clients write to. Empty: the
	// in-process register (history.Register). PostgreSQL: a table on a
	// real PostgreSQL server, guarded by fence.GuardSQL (needs Fencing).
	Resource Resource
	// WarmUp makes each client take the lock once, in turn, before the
	// workload (recorded as any lease): with fencing, every client's
	// counter is then on the masters it reaches, whichever client the
	// workload's contention favours.
	WarmUp bool
	// Reconfig changes the masters during the run (reconfig.go); nil:
	// the masters stay those of the start.
	Reconfig *Reconfig
	// Knob names a safety mechanism switched off for the run (a switch of
	// internal/knobs, see Knobs): the unsafe twin of a protected scenario.
	// The switches are process-wide: a scenario with a Knob must not run
	// beside another.
	Knob string
}

// Resource names a scenario's protected resource.
type Resource string

// PostgreSQL is the Resource where the clients' writes go to a real
// PostgreSQL server through fence.GuardSQL, each a transaction of the guard
// and the write; the checker judges the decisions, and the database's own
// record of what it kept (history.StoredWriteOrder).
const PostgreSQL Resource = "postgresql"

// Needs is what the scenario's faults need of the machine and of the
// cluster (faultinject.Needs, merged over its schedule); a fair lock needs
// masters that keep a waiting line, which the memory backend's do not: it
// runs on the process backend.
func (s Scenario) Needs() faultinject.Needs {
	var n faultinject.Needs
	for _, st := range s.Schedule {
		if st.Fault != nil {
			n = n.Merge(faultinject.NeedsOf(st.Fault))
		}
	}
	n.Process = n.Process || s.Shape == Fair
	return n
}

// Missing reports what this machine lacks to run the scenario (its faults'
// needs, PostgreSQL), or nil. Libfaketime is left to the backend: the
// memory backend's clocks need none, and on the others a clock fault's
// injection fails saying it is missing.
func (s Scenario) Missing() error {
	n := s.Needs()
	n.Libfaketime = false
	err := n.Missing()
	if s.Resource == PostgreSQL {
		err = errors.Join(err, PostgresAvailable())
	}
	return err
}

// nodeTimeout is the scenario's NodeTimeout, or its default.
func (s Scenario) nodeTimeout() time.Duration {
	if s.NodeTimeout > 0 {
		return s.NodeTimeout
	}
	return s.TTL / 5
}

// Validate checks the scenario's fields against each other. Errors name the
// scenario and the bad value.
func (s Scenario) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("chaos: scenario %q: %s", s.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case s.Name == "":
		return fmt.Errorf("chaos: scenario without a name")
	case s.Expect != Safe && s.Expect != Unsafe:
		return bad("expect %q must be %q or %q", s.Expect, Safe, Unsafe)
	case s.Nodes < 1:
		return bad("nodes %d must be at least 1", s.Nodes)
	case s.TTL <= 0:
		return bad("TTL %v must be positive", s.TTL)
	case s.Clients < 1:
		return bad("clients %d must be at least 1", s.Clients)
	case s.Duration <= 0 || s.ShortDuration <= 0:
		return bad("durations %v / %v (short) must be positive", s.Duration, s.ShortDuration)
	case s.NodeTimeout < 0 || s.NodeTimeout >= s.TTL:
		return bad("node timeout %v must be in [0, TTL %v)", s.NodeTimeout, s.TTL)
	case s.Hold < 0 || s.Hold >= s.TTL:
		return bad("hold %v must be in [0, TTL %v)", s.Hold, s.TTL)
	case s.Split && s.Nodes%2 == 0:
		return bad("split needs an odd number of nodes, have %d", s.Nodes)
	case s.Split && s.Clients < 2:
		return bad("split needs at least 2 clients, have %d", s.Clients)
	case !slices.Contains([]Shape{Mutex, Fair, RW, Semaphore, Reentrant, Election}, s.Shape):
		return bad("shape %q must be one of %q, %q, %q, %q, %q, %q", s.Shape, Mutex, Fair, RW, Semaphore, Reentrant, Election)
	case (s.Shape == Semaphore) != (s.K > 0):
		return bad("K %d must be positive for a semaphore and 0 otherwise (shape %q)", s.K, s.Shape)
	case s.Shape != Mutex && (s.Fencing || s.Renew):
		return bad("fencing and renewal scenarios use the mutex, not shape %q", s.Shape)
	case s.Resource != "" && s.Resource != PostgreSQL:
		return bad("resource %q must be empty (the in-process register) or %q", s.Resource, PostgreSQL)
	case s.Resource == PostgreSQL && !s.Fencing:
		return bad("the PostgreSQL resource is guarded by fencing tokens: set Fencing")
	case s.Knob != "" && Knobs()[s.Knob] == nil:
		return bad("knob %q is not one of %s", s.Knob, strings.Join(knobNames(), ", "))
	case s.Reconfig != nil && (s.Split || s.Renew || s.Shape != Mutex):
		return bad("a change of the masters runs with a plain mutex, without Split or Renew")
	}
	if s.Reconfig != nil {
		if err := s.Reconfig.validate(s.Nodes, s.Clients); err != nil {
			return bad("%v", err)
		}
	}
	if n := s.Needs(); !n.Allows(s.Persistence) {
		return bad("its faults need masters with persistence %v, not %s", n.Persistence, s.Persistence)
	}
	for i, st := range s.Schedule {
		if st.At < 0 || st.Every < 0 || st.For < 0 || st.Hold < 0 || st.Pause < 0 || st.Overrun < 0 {
			return bad("step %d (%s) has a negative duration", i, st.Name())
		}
		if st.Hold >= s.TTL {
			return bad("step %d (%s): hold %v must be below the TTL %v", i, st.Name(), st.Hold, s.TTL)
		}
		if st.Pause > 0 && st.Overrun > 0 {
			return bad("step %d is both a pause and an overrun", i)
		}
		if st.Pause > 0 && st.Fault != nil && st.Hold == 0 {
			return bad("step %d (%s): a fault during a client pause needs Hold", i, st.Name())
		}
		if st.Fault == nil && (st.Pause > 0 || st.Overrun > 0) {
			continue
		}
		if st.Fault == nil {
			return bad("step %d has neither a fault kind nor a pause or overrun", i)
		}
		if _, err := st.Target.Nodes(s.Nodes); err != nil {
			return bad("step %d (%s): %v", i, st.Name(), err)
		}
	}
	return nil
}

// Common parameters of the built-in scenarios.
const (
	fullDuration  = 30 * time.Second
	shortDuration = 3 * time.Second
	// baseTTL is the TTL of the throughput scenarios; splitTTL of the
	// scenarios that force a fault into a holder's lease.
	baseTTL  = time.Second
	splitTTL = 2 * time.Second
	// linger is how long a holder targeted by a fault stays in its
	// critical section at most (never past its validity, and no longer
	// once another client acquired): the longest window the protocol
	// allows for a restart (a container restart on a loaded machine
	// included) and the other client's retry to happen inside it.
	linger = splitTTL * 9 / 10
	hold   = time.Millisecond
	// The shape scenarios' node deadline (half their splitTTL), pause
	// (longer than that deadline) and short duration; see their entries.
	shapeNodeTimeout   = splitTTL / 2
	shapePause         = splitTTL * 3 / 4
	shapeShortDuration = 5 * time.Second
)

// builtin is the scenario list; Scenarios returns copies.
var builtin = []Scenario{
	{
		Name: "healthy", Expect: Safe, Nodes: 5, Clients: 3, TTL: baseTTL, Hold: hold,
		About: "no fault: the baseline",
	},
	{
		Name: "minority-killed", Expect: Safe, Nodes: 5, Clients: 3, TTL: baseTTL, Hold: hold,
		About: "a minority is killed, kept down for 1.5 TTL, restarted empty; again and again",
		Schedule: []Step{{At: 300 * time.Millisecond, For: 1500 * time.Millisecond, Every: 300 * time.Millisecond,
			Fault: faultinject.Kill{}, Target: Minority}},
	},
	{
		Name: "minority-paused", Expect: Safe, Nodes: 5, Clients: 3, TTL: baseTTL, Hold: hold,
		About: "a minority is paused (SIGSTOP) for half a TTL, then resumed; again and again",
		Schedule: []Step{{At: 300 * time.Millisecond, For: 500 * time.Millisecond, Every: 300 * time.Millisecond,
			Fault: faultinject.Pause{}, Target: Minority}},
	},
	{
		Name: "minority-partitioned", Expect: Safe, Nodes: 5, Clients: 3, TTL: baseTTL, Hold: hold,
		About: "a minority is cut off from every client (connections refused), then healed; again and again",
		Schedule: []Step{{At: 300 * time.Millisecond, For: 800 * time.Millisecond, Every: 300 * time.Millisecond,
			Fault: faultinject.Partition{}, Target: Minority}},
	},
	{
		// With one master late, a quorum needs 3 of the 4 others; on a
		// loaded machine (the short suite under -race beside other work:
		// the in-process memory backend shares the CPU with the clients)
		// a fifth of a 1 s TTL timed out most calls and a run locked
		// nothing. Half of a 2 s TTL leaves a loaded CPU room and keeps
		// the late master on time; validity is still most of the TTL.
		Name: "slow-node", Expect: Safe, Nodes: 5, Clients: 3, TTL: splitTTL, Hold: hold, NodeTimeout: splitTTL / 2,
		About:    "one master answers 20 ms late for the whole run",
		Schedule: []Step{{Fault: faultinject.Latency{Latency: 20 * time.Millisecond}, Target: LastNode}},
	},
	{
		Name: "clock-drift", Expect: Safe, Nodes: 5, Clients: 3, TTL: baseTTL, Hold: hold, DriftFactor: 0.01,
		About:    "a minority's clocks run 0.5% fast, within the 1% drift allowance",
		Schedule: []Step{{Fault: faultinject.ClockRate{Rate: 1.005}, Target: Minority}},
	},
	{
		Name: "replies-delayed", Expect: Safe, Nodes: 5, Clients: 3, TTL: baseTTL, Hold: hold,
		About: "one master's replies arrive 1.2 s late (past the TTL) for 2 s at a time: its late yes never counts, its keys are released",
		Schedule: []Step{{At: 300 * time.Millisecond, For: 2 * time.Second, Every: 500 * time.Millisecond,
			Fault: faultinject.Latency{Latency: 1200 * time.Millisecond}, Target: LastNode}},
	},
	{
		Name: "work-overrun", Expect: Safe, Nodes: 3, Clients: 2, TTL: baseTTL, Hold: hold,
		About:    "a holder's work runs 300 ms past its validity; it checks its lease after the work, finds it over and does not write",
		Schedule: []Step{{At: 200 * time.Millisecond, Every: time.Second, Overrun: 300 * time.Millisecond}},
	},
	{
		Name: "split-quorums", Expect: Safe, Nodes: 3, Clients: 3, TTL: baseTTL, Hold: hold, Split: true,
		About: "client 0 reaches only masters {0,1}, client 1 only {1,2} (bare quorums sharing the pivot), client 2 all: the pivot serialises them",
	},
	{
		Name: "rolling-restart-aof", Expect: Safe, Nodes: 5, Clients: 3, TTL: baseTTL, Hold: hold, Persistence: faultinject.AOFAlways,
		About: "every master in turn is killed and restarted at once with AOF appendfsync always, one every 400 ms",
		Schedule: []Step{{At: 300 * time.Millisecond, Every: 400 * time.Millisecond,
			Fault: faultinject.Restart{Persistence: faultinject.AOFAlways}, Target: Rolling}},
	},
	// The shape scenarios run 3 to 5 contending clients whose every
	// attempt is a Lua script on each of 5 in-process masters behind two
	// proxies (about 2 ms of CPU per node call under -race). On a loaded
	// 2-core machine the process gets well under a core and a node call
	// takes hundreds of milliseconds: at a fifth of a 1 s TTL every call
	// timed out, each timeout dropped its connection (the next call
	// redials through both proxies) and queued a release retry, and a
	// short run locked nothing (about 1 run in 4, most in a run beside
	// two busy processes). Half of a 2 s TTL leaves that room; the
	// pauses outlast the node deadline so that calls to a paused master
	// still time out; 5 s gives a loaded run the write leases, full
	// semaphore and re-entries TestShapeScenariosExerciseTheirShape
	// looks for.
	{
		Name: "rw-minority-killed", Expect: Safe, Nodes: 5, Clients: 4, TTL: splitTTL, Hold: hold, Shape: RW,
		NodeTimeout: shapeNodeTimeout, ShortDuration: shapeShortDuration,
		About: "read-write lock (writer preference; 3 reads in 4): a minority is killed and restarted empty, again and again; a writer never overlaps anyone",
		Schedule: []Step{{At: 300 * time.Millisecond, For: 1500 * time.Millisecond, Every: 300 * time.Millisecond,
			Fault: faultinject.Kill{}, Target: Minority}},
	},
	{
		Name: "semaphore-node-paused", Expect: Safe, Nodes: 5, Clients: 5, TTL: splitTTL, Hold: hold, Shape: Semaphore, K: 2,
		NodeTimeout: shapeNodeTimeout, ShortDuration: shapeShortDuration,
		About: "semaphore K=2 (quorum 4 of 5): one master is paused for 3/4 of a TTL, again and again; never more than 2 holders",
		Schedule: []Step{{At: 300 * time.Millisecond, For: shapePause, Every: 300 * time.Millisecond,
			Fault: faultinject.Pause{}, Target: LastNode}},
	},
	{
		// Eight clients in a fair line (each its own client and links, as
		// eight processes would have), a master paused and another killed
		// and restarted empty, again and again: the line is lost with the
		// killed master's data and rebuilt by the waiters' next attempts.
		Name: "fair-paused-killed", Expect: Safe, Nodes: 5, Clients: 8, TTL: splitTTL, Hold: hold, Shape: Fair,
		NodeTimeout: shapeNodeTimeout, ShortDuration: shapeShortDuration,
		About: "fair mutex, 8 clients in the masters' line: one master is paused for 3/4 of a TTL and another killed, kept down for 1.5 TTL and restarted empty, again and again; no two holders, no key left",
		Schedule: []Step{
			{At: 300 * time.Millisecond, For: shapePause, Every: 300 * time.Millisecond, Fault: faultinject.Pause{}, Target: Pivot},
			{At: 500 * time.Millisecond, For: 3 * splitTTL / 2, Every: 300 * time.Millisecond, Fault: faultinject.Kill{}, Target: LastNode},
		},
	},
	{
		// Masters 0 and 1 of five are replaced by the spares 5 and 6 one
		// master per step (add 5, add 6, remove 0, remove 1), with the
		// records and the waits the masters enforce; the clients reload
		// what each step publishes, and when a master refuses them as
		// stale. Client 0 cannot reach masters 3 and 4, client 1 master 2
		// (the twin's cuts), and master 3 is paused again and again.
		Name: "replace-two-of-five", Expect: Safe, Nodes: 7, Clients: 8, TTL: reconfigTTL, Hold: reconfigHold,
		NodeTimeout: reconfigNodeTimeout, ShortDuration: reconfigShortDuration,
		About:    "masters 0 and 1 of 5 replaced by two spares in four steps (records, enforced waits) under 8 clients that reload; two clients partitioned, one master paused again and again: no two holders",
		Reconfig: &Reconfig{Spares: 2, To: []int{2, 3, 4, 5, 6}, Cut: reconfigCut},
		Schedule: []Step{{At: 300 * time.Millisecond, For: 300 * time.Millisecond, Every: time.Second,
			Fault: faultinject.Pause{}, Target: Pivot}},
	},
	{
		// The same change in the two steps of joint mode: while joint a
		// client lists all seven masters and needs a quorum of {0,...,4}
		// and one of {2,...,6}; the same cuts and pauses.
		Name: "replace-two-of-five-joint", Expect: Safe, Nodes: 7, Clients: 8, TTL: reconfigTTL, Hold: reconfigHold,
		NodeTimeout: reconfigNodeTimeout, ShortDuration: reconfigShortDuration,
		About:    "masters 0 and 1 of 5 replaced by two spares in two steps through joint mode (a quorum of the old set and of the new while joint) under 8 clients that reload; two clients partitioned, one master paused again and again: no two holders",
		Reconfig: &Reconfig{Spares: 2, To: []int{2, 3, 4, 5, 6}, Cut: reconfigCut, Joint: true},
		Schedule: []Step{{At: 300 * time.Millisecond, For: 300 * time.Millisecond, Every: time.Second,
			Fault: faultinject.Pause{}, Target: Pivot}},
	},
	{
		// The same change as one swap of the clients' lists, without
		// records: client 0 keeps the old list and reaches only {0,1,2},
		// client 1 loads the new one and reaches {3,4,5,6}, a quorum of it
		// that misses client 0's.
		Name: "replace-two-of-five-swap", Expect: Unsafe, Nodes: 7, Clients: 8, TTL: reconfigTTL, Hold: reconfigHold,
		NodeTimeout: reconfigNodeTimeout, ShortDuration: reconfigShortDuration,
		About:    "unsafe twin of replace-two-of-five: the clients' lists swapped at once without records, one client left on the old list: two quorums that do not meet",
		Reconfig: &Reconfig{Spares: 2, To: []int{2, 3, 4, 5, 6}, Swap: true, Cut: reconfigCut},
	},
	{
		// Every master restarts at once (AOF always: keys and records
		// survive, the records of another run): no checked client gets a
		// vote until the operator recovers, and then each is refused as
		// stale and loads the next epoch.
		Name: "recover-after-every-master-restarts", Expect: Safe, Nodes: 5, Clients: 8, TTL: reconfigTTL, Hold: reconfigHold,
		NodeTimeout: reconfigNodeTimeout, ShortDuration: reconfigShortDuration, Persistence: faultinject.AOFAlways,
		About:    "every master restarts at once with its AOF, its record now of another run: checked clients get no vote until quorumlock reconfig recover writes the same set at the next epoch, then they reload it: no two holders",
		Reconfig: &Reconfig{To: []int{0, 1, 2, 3, 4}, At: time.Second, Restart: true},
	},
	{
		Name: "reentrant-minority-paused", Expect: Safe, Nodes: 5, Clients: 3, TTL: splitTTL, Hold: hold, Shape: Reentrant,
		NodeTimeout: shapeNodeTimeout, ShortDuration: shapeShortDuration,
		About: "reentrant mutex, one owner per client re-entering once per hold: a minority is paused for 3/4 of a TTL, again and again; two owners never overlap",
		Schedule: []Step{{At: 300 * time.Millisecond, For: shapePause, Every: 300 * time.Millisecond,
			Fault: faultinject.Pause{}, Target: Minority}},
	},
	{
		Name: "election-restart-quarantined", Expect: Safe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true, Quarantine: true,
		About:    "leader election (leaderships fenced and self-renewing; the register judges writes by time, so two leaders at once count): a master of the leader's bare quorum restarts empty, with the restart quarantine: one leader at a time (without it: two leaders, 10 violations in a short run)",
		Schedule: restartAtOnce,
	},
	{
		Name: "restart-delayed", Expect: Safe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true,
		About: "a master of the holder's bare quorum crashes and restarts empty, but only after more than the TTL",
		Schedule: []Step{{At: 200 * time.Millisecond, Hold: linger, Every: 2 * time.Second,
			Fault: faultinject.Restart{Delay: splitTTL + 300*time.Millisecond}, Target: Pivot}},
	},
	{
		Name: "restart-aof", Expect: Safe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true,
		Persistence: faultinject.AOFAlways,
		About:       "a master of the holder's bare quorum crashes and restarts at once, with AOF appendfsync always",
		// Every counts from the end of the injection, which comes right
		// after the holder began to linger: with Every below the linger,
		// every acquisition would be a lingering one. 5 s leaves room for
		// ordinary acquisitions between faults.
		Schedule: []Step{{At: 200 * time.Millisecond, Hold: linger, Every: 5 * time.Second,
			Fault: faultinject.Restart{Persistence: faultinject.AOFAlways}, Target: Pivot}},
	},
	{
		Name: "restart-no-persistence", Expect: Unsafe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true,
		About:    "a master of the holder's bare quorum crashes and restarts at once, empty: the other client takes it",
		Schedule: restartAtOnce,
	},
	{
		Name: "restart-no-persistence-quarantined", Expect: Safe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true, Quarantine: true,
		About:    "restart-no-persistence with the restart quarantine: the restarted master's votes do not count until every key it lost has expired",
		Schedule: restartAtOnce,
	},
	{
		Name: "restart-no-persistence-fenced", Expect: Safe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true, Fencing: true,
		About:    "restart-no-persistence with fencing: the leases overlap, but the resource never takes the older holder's write after the newer one's",
		Schedule: restartAtOnce,
	},
	{
		Name: "failover-no-key", Expect: Unsafe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true,
		About: "a master of the holder's bare quorum fails over to a server without the key (a Sentinel failover to a replica that lacked it): the other client takes it",
		Schedule: []Step{{At: 200 * time.Millisecond, Hold: linger, Every: 600 * time.Millisecond,
			Fault: faultinject.Failover{}, Target: Pivot}},
	},
	{
		Name: "failover-no-key-quarantined", Expect: Safe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true, Quarantine: true,
		About: "failover-no-key with the restart quarantine: the new master (another run_id) does not vote until every key it lacks has expired",
		Schedule: []Step{{At: 200 * time.Millisecond, Hold: linger, Every: 600 * time.Millisecond,
			Fault: faultinject.Failover{}, Target: Pivot}},
	},
	{
		Name: "clock-jump", Expect: Unsafe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true,
		About:    "a master of the holder's bare quorum jumps its clock forward past the TTL: the key expires, the other client takes it",
		Schedule: clockJump,
	},
	{
		Name: "clock-jump-fenced", Expect: Safe, Nodes: 3, Clients: 2, TTL: splitTTL, Hold: hold, Split: true, Fencing: true,
		About:    "clock-jump with fencing: the leases overlap, but the jumped master kept its counter, so the newer holder's token is higher",
		Schedule: clockJump,
	},
	{
		Name: "client-pause", Expect: Unsafe, Nodes: 3, Clients: 2, TTL: baseTTL, Hold: hold,
		About:    "a holder checks its lease, pauses past its validity, then writes: a stale write (fencing needed)",
		Schedule: clientPause,
	},
	{
		Name: "client-pause-fenced", Expect: Safe, Nodes: 3, Clients: 2, TTL: baseTTL, Hold: hold, Fencing: true,
		About:    "client-pause with fencing: the paused holder's late write carries an older token and is refused",
		Schedule: clientPause,
	},
	{
		Name: "client-pause-renewed", Expect: Safe, Nodes: 3, Clients: 2, TTL: baseTTL, Hold: hold, Renew: true,
		About:    "client-pause where the stall is slow work, not a stopped process: under Mutex.Do with auto-renewal the lease is renewed through it",
		Schedule: clientPause,
	},
}

// The change of the masters' scenarios: the partitions they share; a TTL
// short enough for the first record's wait and four steps' (0.67 s each:
// the TTL, its drift, a third of it) to fit a short run, with node
// deadlines a loaded machine meets; a critical section long enough for two
// holders to overlap.
var reconfigCut = map[int][]int{0: {3, 4}, 1: {2}}

const (
	reconfigTTL           = 500 * time.Millisecond
	reconfigNodeTimeout   = 120 * time.Millisecond
	reconfigHold          = 50 * time.Millisecond
	reconfigShortDuration = 5 * time.Second
)

// The schedules that unsafe scenarios share with their protected twins.
var (
	restartAtOnce = []Step{{At: 200 * time.Millisecond, Hold: linger, Every: 600 * time.Millisecond,
		Fault: faultinject.Restart{}, Target: Pivot}}
	clockJump = []Step{{At: 200 * time.Millisecond, Hold: linger, For: linger, Every: 600 * time.Millisecond,
		Fault: faultinject.ClockJump{Offset: 2 * splitTTL}, Target: Pivot}}
	clientPause = []Step{{At: 200 * time.Millisecond, Every: 2 * time.Second, Pause: 300 * time.Millisecond}}
)

func init() {
	builtin = append(builtin, hostScenarios...)
	for i := range builtin {
		builtin[i].Duration = cmp.Or(builtin[i].Duration, fullDuration)
		builtin[i].ShortDuration = cmp.Or(builtin[i].ShortDuration, shortDuration)
		if err := builtin[i].Validate(); err != nil {
			panic(err)
		}
	}
}

// Scenarios returns the built-in scenarios: the safe ones, then each unsafe
// one followed by its protected twins. The caller may
// modify the returned values.
func Scenarios() []Scenario {
	out := make([]Scenario, len(builtin))
	for i, s := range builtin {
		s.Schedule = slices.Clone(s.Schedule)
		out[i] = s
	}
	return out
}

// Names returns the names of the built-in scenarios, in order.
func Names() []string {
	out := make([]string, len(builtin))
	for i, s := range builtin {
		out[i] = s.Name
	}
	return out
}

// Lookup returns the built-in scenarios called by names, in the order given.
// An unknown name gives an error that lists the valid ones.
func Lookup(names ...string) ([]Scenario, error) {
	all := Scenarios()
	var out []Scenario
	for _, n := range names {
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == n })
		if i < 0 {
			valid := Names()
			sort.Strings(valid)
			return nil, fmt.Errorf("chaos: unknown scenario %q; valid scenarios: %s", n, strings.Join(valid, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}
