package chaos

import (
	"time"

	"github.com/quorumlock/quorumlock/faultinject"
)

// hostScenarios are the host faults' scenarios (faultinject's
// AOFTailLoss, ClockStepAfterRestart, ClockStrobe, DiskFull and
// OneWayPartition), with fencing on, judged at a real PostgreSQL resource
// guarded by fence.GuardSQL: the clients' fenced writes go to PostgreSQL,
// and the checker judges its decisions and the rows it kept. Each has a
// client pause (or a fault during one), so that the guard has stale writes
// to refuse. They run on the process backend (the faults act on
// redis-server processes); scenarios whose names end in -no-run-stamp
// switch the run stamp of fencing counters off (knobs.NoRunStamp) and must
// be caught.
var hostScenarios = []Scenario{
	aofTailLoss("aof-tail-loss-pg", 3, Safe, ""),
	aofTailLoss("aof-tail-loss-pg-no-run-stamp", 3, Unsafe, "NoRunStamp"),
	aofTailLoss("aof-tail-loss-pg-n5", 5, Safe, ""),
	aofTailLoss("aof-tail-loss-pg-n5-no-run-stamp", 5, Unsafe, "NoRunStamp"),
	{
		Name: "clock-step-after-restart-pg", Expect: Safe, Nodes: 5, Clients: 3, TTL: baseTTL, Hold: hold,
		Fencing: true, Quarantine: true, Resource: PostgreSQL,
		About: "a minority restarts empty with its clocks stepped 2 min forward at boot (uptime_in_seconds inflated), again and again; a holder stalls past its validity now and then: with the restart quarantine and fencing, PostgreSQL keeps no stale write",
		Schedule: []Step{
			{At: 300 * time.Millisecond, Every: 1500 * time.Millisecond,
				Fault: faultinject.ClockStepAfterRestart{Step: 2 * time.Minute}, Target: Minority},
			pgPause,
		},
	},
	{
		// Every master's libfaketime file is rewritten at each flip and
		// re-read at each of its clock reads: a flip every 2 ms on 5
		// masters cut the lock's throughput by 4 on 2 cores (and to 0
		// acquisitions under -race on a loaded machine); 3 masters every
		// 10 ms leave it about as it is.
		Name: "clock-strobe-pg", Expect: Safe, Nodes: 3, Clients: 3, TTL: baseTTL, Hold: hold,
		Fencing: true, Resource: PostgreSQL,
		About: "every master's clock flips between +3 ms and -3 ms every 10 ms (6 ms of swing, within the 12 ms drift allowance); a holder stalls past its validity now and then: PostgreSQL keeps no stale write",
		Schedule: []Step{
			{Fault: faultinject.ClockStrobe{Offset: 3 * time.Millisecond, Period: 10 * time.Millisecond}, Target: All},
			pgPause,
		},
	},
	{
		Name: "disk-full-pg", Expect: Safe, Nodes: 3, Clients: 3, TTL: baseTTL, Hold: hold,
		Fencing: true, Persistence: faultinject.AOFEverySec, Resource: PostgreSQL,
		About: "one master's disk fills (MISCONF to every write) for 0.5 s, again and again; a holder stalls past its validity now and then: PostgreSQL keeps no stale write",
		Schedule: []Step{
			{At: 300 * time.Millisecond, For: 500 * time.Millisecond, Every: 300 * time.Millisecond,
				Fault: faultinject.DiskFull{}, Target: LastNode},
			pgPause,
		},
	},
	{
		// 3 masters: each master's namespace, veth pair and nftables
		// table take about a second to make and remove with 5.
		Name: "one-way-partition-pg", Expect: Safe, Nodes: 3, Clients: 3, TTL: baseTTL, Hold: hold,
		Fencing: true, Resource: PostgreSQL,
		About: "a master's replies are dropped by nftables in its network namespace (requests applied, replies lost and retransmitted after) for 0.8 s, again and again; a holder stalls past its validity now and then: PostgreSQL keeps no stale write",
		Schedule: []Step{
			{At: 300 * time.Millisecond, For: 800 * time.Millisecond, Every: 300 * time.Millisecond,
				Fault: faultinject.OneWayPartition{Direction: faultinject.Downstream}, Target: LastNode},
			pgPause,
		},
	},
}

// pgPause is a holder that checks its lease, stalls 300 ms past its
// validity and then writes, every 1.5 s: a stale write the guard must
// refuse.
var pgPause = Step{At: 700 * time.Millisecond, Every: 1500 * time.Millisecond, Pause: 300 * time.Millisecond}

// aofTailLoss is the AOF tail loss scenario at n masters: the two clients
// split, each reaching a bare quorum, the two sharing the pivot, and each
// takes the lock once before the workload (WarmUp: each has a fencing
// counter on its own masters). The holder checks its lease, and while it
// stalls past its validity (700 ms) the pivot loses its AOF's last second
// in a host crash (appendfsync everysec), the holder's token's write-back
// with it, and comes back at once. The other client is granted the lock by
// the pivot and its own masters: with the run stamp the pivot's restored
// counter reads as lost, fewer than a quorum of counters exist, its token
// starts a new epoch, and the stalled holder's late write is refused; with
// knob NoRunStamp the restored counter counts, its token is at most the
// holder's (token-order), and PostgreSQL refuses its write (a newer lease
// refused) or keeps the holder's late one after it (a stale write).
func aofTailLoss(name string, n int, expect Expect, knob string) Scenario {
	about := "the pivot of a split loses its AOF's last second (appendfsync everysec: a host crash) while the holder stalls past its validity; fencing with the run stamp: the next token starts a new epoch, PostgreSQL refuses the late write"
	if knob != "" {
		about = "aof-tail-loss-pg with the run stamp of fencing counters off (knobs.NoRunStamp): the restored counters count, the next token repeats or goes below the stalled holder's"
	}
	return Scenario{
		Name: name, Expect: expect, Nodes: n, Clients: 2, TTL: baseTTL, Hold: hold, Split: true, WarmUp: true,
		Fencing: true, Persistence: faultinject.AOFEverySec, Resource: PostgreSQL, Knob: knob, About: about,
		Schedule: []Step{{At: 200 * time.Millisecond, Hold: hold, Pause: 700 * time.Millisecond, Every: 1500 * time.Millisecond,
			Fault: faultinject.AOFTailLoss{}, Target: Pivot}},
	}
}
