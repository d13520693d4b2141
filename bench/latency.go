package bench

import (
	"fmt"
	"time"
)

// A Fault is what happens to one master (the first of the N) under a
// condition, from the first measured cycle until the measurement ends,
// when the master returns. It is made in the client, by the connections'
// wrapper (see Condition); the server is not touched.
type Fault int

const (
	// NoFault leaves the master as it is.
	NoFault Fault = iota
	// Hung is a master that stopped (a SIGSTOPped process, a frozen VM):
	// new connections are accepted (the kernel's backlog), writes are
	// accepted, nothing is answered, so every call waits for its
	// deadline. When the master returns, it runs what it was sent, in
	// order: the writes held on connections still open are delivered on
	// them, and those of connections closed meanwhile on a fresh
	// connection, as a stopped server runs its queued commands when it is
	// continued.
	Hung
	// Dead is a master whose process died: connections are refused, and
	// the open ones are reset (reads see end of file, writes fail). When it
	// returns, new connections work again; the old ones stay broken.
	Dead
)

// String returns "none", "hung" or "dead".
func (f Fault) String() string {
	switch f {
	case NoFault:
		return "none"
	case Hung:
		return "hung"
	case Dead:
		return "dead"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// A Condition is the network the contenders run on. Everything it adds is
// added in the client: a net.Conn wrapper that the go-redis Dialer and the
// rueidis DialCtxFn return holds back each Write (time.Sleep) or fakes a
// fault. The kernel of the machine this was written on has no netem, and a
// userspace proxy would burn the measured cores. A go-redis client writes
// one command (or one pipeline) per Write, rueidis one flush of its
// pipeline; the server and its replies are not delayed.
type Condition struct {
	// Name identifies the condition in rows; it holds none of ":{}*?[]".
	Name string
	// Delay is added before every write to every master.
	Delay time.Duration
	// Jitter makes each write's delay uniform in [Delay-Jitter,
	// Delay+Jitter] (at least 0).
	Jitter time.Duration
	// Slow is added before every write to the first master only.
	Slow time.Duration
	// Fault happens to the first master (see Fault).
	Fault Fault
}

// Healthy is the network as it is (loopback for the masters the run
// starts).
var Healthy = Condition{Name: "healthy"}

// Delayed adds d before every write to every master.
func Delayed(d time.Duration) Condition {
	return Condition{Name: "delay-" + d.String(), Delay: d}
}

// Jittered adds a delay uniform in [d-j, d+j] before every write to every
// master. Jittered(time.Millisecond, time.Millisecond) is named
// "jitter-0-2ms".
func Jittered(d, j time.Duration) Condition {
	lo, hi := max(d-j, 0), d+j
	return Condition{Name: fmt.Sprintf("jitter-%g-%gms", ms(lo), ms(hi)), Delay: d, Jitter: j}
}

// OneSlow adds d before every write to the first master only.
func OneSlow(d time.Duration) Condition {
	return Condition{Name: "one-slow-" + d.String(), Slow: d}
}

// OneHung hangs the first master during the measurement (see Hung).
var OneHung = Condition{Name: "one-hung", Fault: Hung}

// OneDead kills the first master during the measurement (see Dead); the
// first cycle of each contender is the first lock after its death.
var OneDead = Condition{Name: "one-dead", Fault: Dead}

// faulted reports whether c treats one master apart: it then runs only with
// N >= 3, where the others still make a quorum.
func (c Condition) faulted() bool { return c.Slow > 0 || c.Fault != NoFault }

// wraps reports whether c needs the connection wrapper.
func (c Condition) wraps() bool { return c.Delay > 0 || c.Jitter > 0 || c.faulted() }

// Describe says in one line how c is made, for reports.
func (c Condition) Describe() string {
	switch {
	case !c.wraps():
		return "the network as it is"
	case c.Fault == Hung:
		return "the first master hung (in the client: writes accepted and held, no reply; delivered in order when it returns after the measurement)"
	case c.Fault == Dead:
		return "the first master dead from the first measured cycle (in the client: dials refused, open connections reset)"
	case c.Slow > 0:
		return fmt.Sprintf("%v added in the client before every write to the first master", c.Slow)
	case c.Jitter > 0:
		return fmt.Sprintf("a delay uniform in [%v, %v] added in the client before every write to every master", max(c.Delay-c.Jitter, 0), c.Delay+c.Jitter)
	}
	return fmt.Sprintf("%v added in the client before every write to every master", c.Delay)
}
