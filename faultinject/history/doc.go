// Package history is the one safety checker of the fault-injection tools: a
// history of what the clients of a quorum lock did and observed, and the
// invariants judged on it.
//
// Both the chaos suite (real masters, faultinject/chaos) and the
// deterministic simulator (faultinject/sim) record Events into a history
// and call Check. Check runs every Invariant of the table Invariants and
// returns the Findings: each Violation names its invariant, whose Class
// says what a break means, so that each caller decides its verdict from
// data (the chaos suite by its scenario's expectation, the simulator by
// the documented assumptions its schedule broke).
//
// The package has no dependency on Docker, Redis or the lock library: an
// Event is plain data, and a history can be built by hand (the tests do,
// one violating history per invariant).
package history
