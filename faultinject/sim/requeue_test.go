package sim

import (
	"testing"
	"time"
)

// requeueDropsUnsent is the schedule of the defect the late family's seed
// 59066 found (knob RequeueSendsUnsent): a fair waiter that requeued (a new
// ID after an attempt with a call still running) still sent the old
// attempt's calls that had not gone out yet, held up in the client's first
// identification of their master; sent after the old ID's LeaveQueue, on a
// master that had restarted empty in between (its tombstone lost), they
// entered the departed waiter in the line with a value record, and a
// release handed it a key nobody releases. Three masters, the fair queue,
// the restart quarantine (a restart without keys breaks no assumption):
//
//   - 0ms: c0 takes the lock on every master (its yeses from m0 and m2
//     come back at 1ms, so that its call to m1 goes out before the round
//     is decided: otherwise the goroutines' order at 0ms decides whether
//     it is sent at all, and c1 may be granted m1).
//   - 5ms-25ms: m2 paused. 10ms: c1, a new process (Late), makes a
//     waiting Lock call; its first contact reads m0 and m1 at once and
//     identifies them (the passes wait for none of m2, which it has never
//     read), but its read of m2 waits for m2's resume: attempt 1's call to
//     m2 (waiter c1.0001) waits for m2's identification. Attempt 1 is
//     refused by m0 and m1 (c0 holds the lock), the waiter lines up there.
//   - 11ms: c1's next attempt requeues, attempt 1's call to m2 not
//     finished: c1.0001's LeaveQueue goes to every master (m0 and m1 apply
//     it at once, m2 at its resume at 25ms: tombstones), and the call goes
//     on as c1.0002.
//   - 20ms-420ms: m1 paused. At 25ms m2 answers c1's read and its call's
//     identification passes begin; they need m1, identified already, read
//     again: the pass waits for m1 until its resume, and with it every
//     later call of c1 to m2 (one identification at a time). Attempt 1's
//     call to m2 is still unsent.
//   - 100ms: m2 restarts empty: c0's key and c1.0001's tombstone are gone.
//   - 150ms: c2 tries once: m2 (empty, its line too) says yes, m0 no, m1
//     no reply: it fails and its rollback's release on m2 applies at 600ms
//     (c2's release timeout is long enough that it is not retried before).
//   - 420ms: m1 resumes; the pass ends, m2 joins the identified set, and
//     the calls waiting for it go out. With the knob attempt 1's stale
//     acquire reaches m2's new run, no tombstone stops it, and c2 holds
//     the key there: c1.0001 enters m2's line, first, with attempt 1's
//     value. With the fix the requeue at 11ms dropped that call: it is
//     never sent.
//   - 600ms: c2's release on m2 hands the key to the line's first waiter:
//     with the knob the departed c1.0001, at a value nobody releases.
//   - 800ms: c0 unlocks; m0 and m1 hand the key to c1's current waiter,
//     which holds until the workload's end (1.2s) and releases.
//
// With the knob m2 still holds attempt 1's value (TTL 2s from 600ms) after
// every client closed: no-orphans. With the fix m2's line holds only c1's
// current waiter, and the schedule passes with c0's and c1's leases.
func requeueDropsUnsent() Script {
	const ms = time.Millisecond
	return Script{Name: "requeue-drops-unsent", Masters: 3, Clients: 3, TTL: 2 * time.Second,
		Fair: true, Quar: true, Backoff: 50 * ms, Late: []int{1}, ReleaseTimeout: time.Second,
		Duration: 1200 * ms,
		Ops: []ScriptOp{
			{At: 0, Client: 0, Kind: OpLock},
			{At: 10 * ms, Client: 1, Kind: OpWait},
			{At: 150 * ms, Client: 2, Kind: OpLock},
			{At: 800 * ms, Client: 0, Kind: OpUnlock},
		},
		Faults: []Fault{
			{Kind: MasterPause, Master: 2, At: 5 * ms, Dur: 20 * ms},
			{Kind: MasterPause, Master: 1, At: 20 * ms, Dur: 400 * ms},
			{Kind: RestartEmpty, Master: 2, At: 100 * ms},
		},
		Calls: []ScriptCall{
			{Client: 0, Master: 0, Kind: CallAcquire, ReplyAt: ms},
			{Client: 0, Master: 2, Kind: CallAcquire, ReplyAt: ms},
			{Client: 2, Master: 2, Kind: CallRelease, ApplyAt: 600 * ms},
		},
	}
}

// TestRequeueDropsUnsentCalls runs requeueDropsUnsent: with the old
// attempt's unsent calls still sent after a requeue (RequeueSendsUnsent) a
// release hands m2's key to the departed waiter (no-orphans); with the fix
// the schedule passes, c0 and c1 granted the lock.
func TestRequeueDropsUnsentCalls(t *testing.T) {
	knobSchedule(t, requeueDropsUnsent(), "RequeueSendsUnsent", "no-orphans", 2)
}
