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

// TestAOFTailRestoresAnEntry runs aofTailRestoresAnEntry: m0 still holds
// the key at attempt 1's value after every client closed, the recorder
// named that value as a restored entry's on m0, and the run passes (the
// value is excused). A history without the Restored events (what the
// checker saw before) fails no-orphans with that very value.
func TestAOFTailRestoresAnEntry(t *testing.T) {
	r := runScript(t, aofTailRestoresAnEntry())
	if r.Outcome != Pass || r.Holds != 2 {
		t.Fatalf("the schedule: %v, %d leases (want pass, 2), violations %v, unsafe %v\nhistory:\n%s",
			r.Outcome, r.Holds, r.Violations, r.Unsafe, strings.Join(r.History, "\n"))
	}
	events := r.Events
	restored := func(e history.Event) bool { return e.Kind == history.Restored }
	var tokens []string
	for _, e := range events {
		if restored(e) && e.Node == 0 {
			tokens = append(tokens, e.Token)
		}
	}
	var left []string
	for _, e := range events {
		if e.Kind == history.Leftover && e.Node == 0 && slices.Contains(tokens, e.Token) {
			left = append(left, e.Token)
		}
	}
	if len(left) != 1 {
		t.Fatalf("m0 after every client closed: %d leftovers of a restored entry's value (restored %v), want 1\nhistory:\n%s",
			len(left), tokens, strings.Join(r.History, "\n"))
	}
	t.Logf("m0 left %s, restored there %v", left[0], tokens)
	f := history.Check(slices.DeleteFunc(slices.Clone(events), restored))
	if vs := f.Of(&history.NoOrphans); len(vs) != 1 || vs[0].Token != left[0] {
		t.Errorf("without the Restored events: no-orphans %v, want one, of %s", vs, left[0])
	}
}
