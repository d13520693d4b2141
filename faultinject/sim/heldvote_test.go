package sim

import (
	"testing"
	"time"
)

// heldVoteUnsent is the schedule of the defect an outside tester found
// (knob HeldVoteUnreleased): with WithRestartQuarantine, a yes whose
// identity read after it was not sent was taken for an acquire that never
// reached its master, so Unlock sent no release there and the key stayed
// until its TTL. The tester's read was not sent because the caller's ctx
// had ended (a cancel right after Lock returned, between the late yes and
// its read); here, because the master's host crashed between the two,
// refusing the read's connection, and came back from its disk with the
// key. Three masters, the restart quarantine, one client:
//
//   - 0ms: c0's TryLock: m0 says yes at once. m1 and m2 apply the
//     acquire at once; m2's yes comes back at 2ms, m1's at 10ms.
//   - 1ms: m2's last fsync (the key in it), then its host crashes: the
//     quarantine's read of m2's identity after its yes, at 2ms, finds the
//     connection refused (ErrNotSent), and m2's vote does not count. m2
//     is back at 51ms with the key.
//   - 10ms: m1's yes makes the quorum: TryLock returns.
//   - 100ms: c0 unlocks. With the knob no release goes to m2, which
//     still holds c0's value after the client closed (no-orphans); with
//     the fix m2's is released too.
func heldVoteUnsent() Script {
	const ms = time.Millisecond
	return Script{Name: "held-vote-unsent", Masters: 3, Clients: 1, TTL: 2 * time.Second, Quar: true,
		Duration: 300 * ms,
		Ops: []ScriptOp{
			{At: 0, Client: 0, Kind: OpLock},
			{At: 100 * ms, Client: 0, Kind: OpUnlock},
		},
		Faults: []Fault{
			{Kind: CrashAOFTail, Master: 2, At: ms, Dur: 50 * ms},
		},
		Calls: []ScriptCall{
			{Client: 0, Master: 1, Kind: CallAcquire, ReplyAt: 10 * ms},
			{Client: 0, Master: 2, Kind: CallAcquire, ReplyAt: 2 * ms},
		},
	}
}

// TestHeldVoteUnsentIsReleased runs heldVoteUnsent: with
// knobs.HeldVoteUnreleased m2 keeps the key (no-orphans); with the fix the
// schedule passes with c0's lease.
func TestHeldVoteUnsentIsReleased(t *testing.T) {
	knobSchedule(t, heldVoteUnsent(), "HeldVoteUnreleased", "no-orphans", 1)
}
