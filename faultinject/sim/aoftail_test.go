package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
)

// aofTailRestoresAnEntry is the schedule of the restarts family's seed
// 115041: a host crash that loses a master's last second of AOF brings
// back a waiter's entry in its line whose LeaveQueue had applied after the
// last fsync, with the value record of an attempt long over; a release
// there hands that value the key, and nobody takes it over or releases
// it. It expires with its TTL (docs/handoff.md); the recorder names the
// entry (history.Restored) and no-orphans excuses that value on that
// master only. Three masters, the fair queue:
//
//   - 0ms: c0 takes the lock (TTL 2s) on every master (its yeses from m0
//     and m2 come back at 1ms, so that its call to m1 goes out before the
//     round is decided) and holds it until 200ms.
//   - 10ms: c1's waiting Lock call: its first attempt (waiter c1.0001) is
//     refused by m0 and m1 and lines up there; its call to m2 applies at
//     once (c1.0001 in m2's line too), but its reply waits until 150ms.
//     Its watch listens on m0 from 30ms only.
//   - 20ms: m0's last fsync: c0's key and c1.0001's entry, with its value
//     record.
//   - 30ms: the watch ready, c1 looks once more (a release before it
//     listened would have gone unheard) and finds attempt 1's call to m2
//     unfinished: it requeues, as c1.0002, and c1.0001's LeaveQueue
//     applies on every master (after m0's fsync).
//   - 100ms: m0's host crashes; at 110ms it is back with its keyspace as of
//     20ms: c0's key, and c1.0001 first in its line with attempt 1's value.
//   - 200ms: c0 unlocks. m1 and m2 hand the key to c1.0002, which holds
//     with their hand-overs (a quorum) until the workload's end; m0 hands
//     it to c1.0001, at attempt 1's value, which nobody releases.
func aofTailRestoresAnEntry() Script {
	const ms = time.Millisecond
	return Script{Name: "aof-tail-restores-an-entry", Masters: 3, Clients: 2, TTL: 2 * time.Second,
		Fair: true, Quar: true, Backoff: 50 * ms, Duration: 600 * ms,
		Ops: []ScriptOp{
			{At: 0, Client: 0, Kind: OpLock},
			{At: 10 * ms, Client: 1, Kind: OpWait},
			{At: 200 * ms, Client: 0, Kind: OpUnlock},
		},
		Faults: []Fault{
			{Kind: CrashAOFTail, Master: 0, At: 100 * ms, Dur: 10 * ms, Delay: 80 * ms},
		},
		Calls: []ScriptCall{
			{Client: 0, Master: 0, Kind: CallAcquire, ReplyAt: ms},
			{Client: 0, Master: 2, Kind: CallAcquire, ReplyAt: ms},
			{Client: 1, Master: 0, Kind: CallWatch, ApplyAt: 30 * ms},
			{Client: 1, Master: 2, Kind: CallAcquire, ReplyAt: 150 * ms},
		},
	}
}

// leaveRefusedUnsent is aofTailRestoresAnEntry with m0 down when c1
// requeues: its host crashes at 25ms (the last fsync at 20ms) and is back
// at 75ms, so that c1.0001's LeaveQueue to m0 is refused unsent (the
// connection refused: the client does not retry it, as it does not retry
// such a release) and m0 comes back with c1.0001 first in its line. The
// recorder counts that LeaveQueue as a refused release of the values
// c1.0001's acquires carried to m0 (history.ReleaseRefused).
func leaveRefusedUnsent() Script {
	s := aofTailRestoresAnEntry()
	s.Name = "leave-refused-unsent"
	s.Faults = []Fault{{Kind: CrashAOFTail, Master: 0, At: 25 * time.Millisecond, Dur: 50 * time.Millisecond, Delay: 5 * time.Millisecond}}
	return s
}

// TestGhostEntriesAreExcused runs aofTailRestoresAnEntry and
// leaveRefusedUnsent: in each, m0 still holds the key at attempt 1's value
// after every client closed, the recorder named that value on m0 (Restored
// after the crash that lost c1.0001's removal; ReleaseRefused for the
// removal m0 refused), and the run passes: the value is excused. A history
// without those events fails no-orphans with that very value.
func TestGhostEntriesAreExcused(t *testing.T) {
	for _, c := range []struct {
		s    Script
		kind history.Kind
	}{{aofTailRestoresAnEntry(), history.Restored}, {leaveRefusedUnsent(), history.ReleaseRefused}} {
		t.Run(c.s.Name, func(t *testing.T) {
			r := runScript(t, c.s)
			if r.Outcome != Pass || r.Holds != 2 {
				t.Fatalf("the schedule: %v, %d leases (want pass, 2), violations %v, unsafe %v\nhistory:\n%s",
					r.Outcome, r.Holds, r.Violations, r.Unsafe, strings.Join(r.History, "\n"))
			}
			excuse := func(e history.Event) bool { return e.Kind == c.kind && e.Node == 0 }
			var tokens []string
			for _, e := range r.Events {
				if excuse(e) {
					tokens = append(tokens, e.Token)
				}
			}
			var left []string
			for _, e := range r.Events {
				if e.Kind == history.Leftover && e.Node == 0 && slices.Contains(tokens, e.Token) {
					left = append(left, e.Token)
				}
			}
			if len(left) != 1 {
				t.Fatalf("m0 after every client closed: %d leftovers of a value named by %s (%v), want 1\nhistory:\n%s",
					len(left), c.kind, tokens, strings.Join(r.History, "\n"))
			}
			f := history.Check(slices.DeleteFunc(slices.Clone(r.Events), excuse))
			if vs := f.Of(&history.NoOrphans); len(vs) != 1 || vs[0].Token != left[0] {
				t.Errorf("without the %s events on m0: no-orphans %v, want one, of %s", c.kind, vs, left[0])
			}
		})
	}
}
