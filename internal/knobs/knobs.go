// Package knobs holds test-only switches that turn off one safety mechanism
// of the coordinator at a time, so that the simulator and the chaos suite can
// show that each mechanism is needed: with it switched off they must find a
// violation. Production code never sets them; they are internal to this
// repository (the faultinject module may import them, users cannot). The
// coordinator reads them once per client (Set); DialTimeoutNotSent,
// RawUptime, WallUptime, NoRunStamp, NoLeaveTombstone, NoGrant,
// NoGrantTakeover, NoGrantLeaveRelease, NoGrantHoldRelease, NoConfigCheck,
// NoConfigStamp and NoConfigRun are read by the nodes' code (internal/notsent, internal/redisinfo, memnode
// and redisnode's scripts' arguments) on each call, and NoReconfigWait by
// package reconfig on each step.
package knobs

import "sync/atomic"

// Each switch is off (the mechanism on) by default.
var (
	// NoReleaseGuard: releases leave no guard, so a late acquire that
	// reaches a node after the release creates an orphan key.
	NoReleaseGuard atomic.Bool
	// AttachedRollback: the rollback of a failed acquire runs on the
	// caller's context, so a cancelled caller leaves its keys behind.
	AttachedRollback atomic.Bool
	// NoDrift: the validity does not subtract the clock drift allowance.
	NoDrift atomic.Bool
	// NoQuarantine: WithRestartQuarantine counts every vote.
	NoQuarantine atomic.Bool
	// NoVoteIdentity: the restart quarantine trusts the server identity it
	// read before a vote instead of reading it after: a restart that the
	// client did not see (a client that met the server before it, a proxy
	// that kept the connection) is missed.
	NoVoteIdentity atomic.Bool
	// SingleIdentify: a node's first contact reads its own identity only,
	// without the passes over every node, so a server listed twice that
	// restarts between the first contacts of its two addresses votes twice.
	SingleIdentify atomic.Bool
	// UnreadJoins: an identification pass in which a node of the set could
	// not be read still lets the new node join, so a server listed twice
	// can vote twice in one round (one address's vote in flight from before
	// its read failed, the other's after it joined).
	UnreadJoins atomic.Bool
	// VoteSetUnchecked: a vote's round counts the yes of a node that left
	// the identified set after voting (its read failed in another call's
	// pass), so a server listed twice can vote twice in one round: one
	// address's yes counted before it left, the other's after it joined in
	// a later pass that did not need the first address read.
	VoteSetUnchecked atomic.Bool
	// NoFenceWriteBack: WithFencing hands out max+1 without writing it back
	// to a quorum.
	NoFenceWriteBack atomic.Bool
	// NoFenceEpoch: WithFencing hands out max+1 even when fewer than a
	// quorum of the counters it read exist (lost in a restart).
	NoFenceEpoch atomic.Bool
	// NoShapeQuorum: a semaphore decides at the client's quorum (a simple
	// majority) instead of max(quorum, N*K/(K+1)+1), so K+1 holders can
	// each find a majority with room (the bug TestSemaphoreBound found).
	NoShapeQuorum atomic.Bool
	// JointOneSet: a client with two sets (redlock.WithQuorumOf, joint
	// mode) counts the first one alone, so a quorum of the new set that
	// misses the old set's quorum decides (the model's JOINT_ONE_SET).
	JointOneSet atomic.Bool
	// DialTimeoutNotSent: a node call whose dial timed out counts as not
	// sent (ErrNotSent), like a refused one, so its release is dropped
	// although the server may have queued the call (a paused server whose
	// accept queue is full).
	DialTimeoutNotSent atomic.Bool
	// NoLockDelay: WithLockDelay writes the keys (and the release guards)
	// with the TTL alone, so a lease that ends without Unlock frees the lock
	// as soon as its keys expire, not the lock delay later.
	NoLockDelay atomic.Bool
	// NoLockDelayStretch: with WithLockDelay the keys are written for
	// TTL + d (the behaviour before the fix), not TTL + d/(1-f), so on
	// masters whose clocks run fast by the drift factor f the delay ends up
	// to f*(TTL+d) early, past the validity's own allowance.
	NoLockDelayStretch atomic.Bool
	// NoPanicRelease: Mutex.Do does not release the lease or stop its
	// renewal when the function panics.
	NoPanicRelease atomic.Bool
	// NoFairRequeue: a fair Lock call keeps its waiter ID after an attempt
	// that a node granted and that then failed, so the tombstones the
	// granting nodes keep of it leave it out of their queues for the entry
	// TTL while later waiters go first (a fairness defect, not a safety one).
	NoFairRequeue atomic.Bool
	// NoLeaveTombstone: LeaveQueue (leave_queue.lua, memnode) takes the
	// waiter out of the line without leaving its tombstone, so a late copy
	// of its acquire enters it again, ahead of the waiters behind it, for
	// the entry TTL (the waiting line's kept-out, docs/verification.md).
	NoLeaveTombstone atomic.Bool
	// NoGrant: a release (release.lua, leave_queue.lua, memnode) only
	// names the line's first live waiter, as before the one-round-trip
	// handoff, instead of handing it the key (docs/handoff.md): the
	// before of the handoff's measurements, not a safety switch.
	NoGrant atomic.Bool
	// NoGrantTakeover: an acquire finds the key a release handed its
	// waiter and does not take it over (acquire_queued.lua, memnode), so
	// the waiter's next attempt is refused by its own grant, and so is
	// everyone, until the key's TTL (model/queue.pml, NoGrantTakeover).
	NoGrantTakeover atomic.Bool
	// NoGrantLeaveRelease: LeaveQueue leaves the key a release handed the
	// waiter that leaves (leave_queue.lua, memnode), so a call that gave
	// up leaves keys nobody releases (model/queue.pml,
	// NoGrantLeaveRelease: grant-released).
	NoGrantLeaveRelease atomic.Bool
	// NoGrantHold: a waiting call does not hold the lock with the keys
	// releases handed it (docs/handoff.md, the hold on grants): its next
	// attempt takes them over, a round trip more per handoff (the first
	// form's measurements; not a safety switch).
	NoGrantHold atomic.Bool
	// NoGrantCurrentValue: a waiting call counts a hand-over it hears of
	// whatever value it names, not only its latest attempt's, so a late
	// notification of an older hand-over (a key since taken over, expired
	// or taken by another) counts as a master it holds (model/queue.pml,
	// NoGrantCurrentValue: mutual-exclusion).
	NoGrantCurrentValue atomic.Bool
	// GrantHoldUnanswered: a waiting call counts a hand-over from a master
	// that did not answer its attempt, whose rollback release may still
	// delete the handed key (model/queue.pml, GrantHoldUnanswered).
	GrantHoldUnanswered atomic.Bool
	// GrantHoldLeaveAll: a call that holds with hand-overs leaves the line
	// of every master, those it counted too, where the leave releases the
	// lease's own key (model/queue.pml, GrantHoldLeaveAll).
	GrantHoldLeaveAll atomic.Bool
	// GrantHoldQuarantined: a waiting call holds with hand-overs also on a
	// client with a restart quarantine, so a master that restarted without
	// its keys (the holder's lost) and hands the key over counts at once,
	// as a vote in quarantine must not (the simulator's late and restarts
	// families: two holders).
	GrantHoldQuarantined atomic.Bool
	// ExtendCountsHanded: Extend counts a yes from a master whose acquire
	// did not leave the lease's value there (it refused, or never
	// answered), which holds that value only as a key a release handed the
	// call's waiter since; the call's LeaveQueue, maybe still on its way,
	// deletes it and hands it on (docs/handoff.md, rule 10; sim
	// TestExtendDoesNotCountAHandedKey: two holders).
	ExtendCountsHanded atomic.Bool
	// NoGrantHoldRelease: a release of a handed value (release.lua,
	// memnode) leaves the waiter it was handed to in the line, so a holder
	// by hand-overs stays first after its Unlock and the release names it,
	// not the next waiter (model/queue.pml, NoGrantHoldRelease).
	NoGrantHoldRelease atomic.Bool
	// NoPlainRequeue: a waiter of a plain lock keeps its ID after an
	// attempt with an unanswered call, so a late copy of its acquire can
	// put it back in a line, where a release hands it a key its call never
	// releases (model/queue.pml, GrantPlainNoRequeue: grant-released).
	NoPlainRequeue atomic.Bool
	// RequeueSendsUnsent: a waiter that requeues (a new ID after an
	// attempt with an unanswered call) still sends the old attempt's calls
	// that had not gone out yet (waiting for their node's first
	// identification), after its LeaveQueue of the old ID: where a master
	// restarted empty in between, no tombstone stops them, the departed
	// waiter enters the line again with a value record, and a release
	// hands it a key nobody releases (the simulator's late family, seed
	// 59066: no-orphans).
	RequeueSendsUnsent atomic.Bool
	// HandOverKeepsSleep: a waiter that holds on grants sleeps its longest
	// backoff even once a node handed it the key and the rest of a quorum
	// never do (the lines differed as the keys were handed on: waiters
	// each handed some masters' keys, all asleep, nobody to release), so
	// the lock stalls for a longest backoff (a burst's start, fair mode).
	HandOverKeepsSleep atomic.Bool
	// NoFreshLook: a Lock call whose first attempt failed starts its watch
	// and waits, without the attempt it makes once the watch listens, so
	// a release between that attempt and the watch goes unheard and the
	// call sleeps its backoff on a free lock.
	NoFreshLook atomic.Bool
	// HeldVoteUnreleased: a node that said yes to an acquire whose vote did
	// not count, and whose error wraps ErrNotSent (WithRestartQuarantine's
	// identity read after the yes was not sent: the caller's ctx had ended,
	// as right after Lock returned), is taken for one the acquire never
	// reached, so no release goes there and the key stays until its TTL.
	HeldVoteUnreleased atomic.Bool
	// BareTagNames: a lock name that is a hash tag and nothing else
	// ("{x}") is accepted, though its derived keys are those of the lock
	// "x" (wire.BareTag): a waiter of one stands in the other's line, so a
	// fair TryLock of the free one is refused, and a release of one can
	// hand its key to the other's waiter, which never takes it (an orphan
	// until its TTL).
	BareTagNames atomic.Bool
	// RawUptime: a server's uptime is taken as INFO's uptime_in_seconds,
	// which Redis counts from its start time truncated to the second, so a
	// client meeting a server just after its restart ends the quarantine up
	// to 1s early.
	RawUptime atomic.Bool
	// NoRunStamp: an acquire reads a fencing counter whatever server run
	// wrote it (wire.ReadFence), so a counter that a master brought
	// back old from its disk (the AOF's last second lost in a host crash)
	// counts as present and a token repeats.
	NoRunStamp atomic.Bool
	// WallUptime: a server met for the first time is judged by the uptime
	// its wall clock gives (INFO uptime_in_seconds), which a clock step at
	// boot inflates, instead of its main thread's CPU time, which no clock
	// step moves (internal/redisinfo, memnode).
	WallUptime atomic.Bool
	// NoBusyRetry: a release answered with an error reply that asks to try
	// later (MISCONF on a full disk, LOADING, BUSY, READONLY, ...) is taken
	// as final and not retried, so its key outlives the client once the
	// server takes writes again.
	NoBusyRetry atomic.Bool
	// NoConfigCheck: a Node with a configuration record (redisnode's
	// SetConfig) sends its calls unchecked, so a client on a stale list of
	// masters still takes a quorum of a set that is no longer current.
	NoConfigCheck atomic.Bool
	// NoReconfigWait: the masters take a change's next step without the
	// wait since the last step's seal (reconfig.lua's "nowait"), so a lease
	// of a set two steps back may still be valid when the new set grants.
	NoReconfigWait atomic.Bool
	// NoConfigStamp: an acquire reads a fencing counter whatever
	// configuration epoch raised it, so after steps that leave an idle
	// lock's old counters on a quorum of the new set its token can repeat
	// one handed out before (docs/reconfig.md, "Fence tokens across the
	// change").
	NoConfigStamp atomic.Bool
	// ErrorReplyMayApply: a vote answered with an error reply that says it
	// did not run (OOM, MISCONF, READONLY, LOADING, a failed configuration
	// check: QLCONFIG) counts as unanswered, so each attempt rolls that
	// master back and requeues its waiter, and fenced Lock calls of three
	// clients stall while one master is out of memory (a liveness defect).
	ErrorReplyMayApply atomic.Bool
	// NoConfigRun: the configuration check trusts a master's record
	// whatever server run wrote it, so a master that came back with an
	// older record (an older snapshot, a lost AOF tail, a replica that
	// missed the last write) counts the votes of clients whose
	// configuration is no longer current.
	NoConfigRun atomic.Bool
)

// Set is a snapshot of the switches that the coordinator reads. A client
// takes it once, in redlock.New, and reads its own copy from then on:
// switching a knob affects clients made afterwards, never one in use.
type Set struct {
	NoReleaseGuard     bool
	AttachedRollback   bool
	NoDrift            bool
	NoQuarantine       bool
	NoVoteIdentity     bool
	SingleIdentify     bool
	UnreadJoins        bool
	VoteSetUnchecked   bool
	NoFenceWriteBack   bool
	NoFenceEpoch       bool
	NoShapeQuorum      bool
	JointOneSet        bool
	NoLockDelay        bool
	NoPanicRelease     bool
	NoLockDelayStretch bool
	NoFairRequeue      bool
	NoFreshLook        bool
	NoPlainRequeue     bool
	RequeueSendsUnsent bool
	HandOverKeepsSleep bool
	HeldVoteUnreleased bool
	BareTagNames       bool
	NoBusyRetry        bool
	ErrorReplyMayApply bool

	NoGrantHold         bool
	NoGrantCurrentValue bool
	GrantHoldUnanswered bool
	GrantHoldLeaveAll   bool

	GrantHoldQuarantined bool
	ExtendCountsHanded   bool
}

// Load returns the switches' current values.
func Load() Set {
	return Set{
		NoReleaseGuard:     NoReleaseGuard.Load(),
		AttachedRollback:   AttachedRollback.Load(),
		NoDrift:            NoDrift.Load(),
		NoQuarantine:       NoQuarantine.Load(),
		NoVoteIdentity:     NoVoteIdentity.Load(),
		SingleIdentify:     SingleIdentify.Load(),
		UnreadJoins:        UnreadJoins.Load(),
		VoteSetUnchecked:   VoteSetUnchecked.Load(),
		NoFenceWriteBack:   NoFenceWriteBack.Load(),
		NoFenceEpoch:       NoFenceEpoch.Load(),
		NoShapeQuorum:      NoShapeQuorum.Load(),
		JointOneSet:        JointOneSet.Load(),
		NoLockDelay:        NoLockDelay.Load(),
		NoPanicRelease:     NoPanicRelease.Load(),
		NoLockDelayStretch: NoLockDelayStretch.Load(),
		NoFairRequeue:      NoFairRequeue.Load(),
		NoFreshLook:        NoFreshLook.Load(),
		NoPlainRequeue:     NoPlainRequeue.Load(),
		RequeueSendsUnsent: RequeueSendsUnsent.Load(),
		HandOverKeepsSleep: HandOverKeepsSleep.Load(),
		HeldVoteUnreleased: HeldVoteUnreleased.Load(),
		BareTagNames:       BareTagNames.Load(),
		NoBusyRetry:        NoBusyRetry.Load(),
		ErrorReplyMayApply: ErrorReplyMayApply.Load(),

		NoGrantHold:         NoGrantHold.Load(),
		NoGrantCurrentValue: NoGrantCurrentValue.Load(),
		GrantHoldUnanswered: GrantHoldUnanswered.Load(),
		GrantHoldLeaveAll:   GrantHoldLeaveAll.Load(),

		GrantHoldQuarantined: GrantHoldQuarantined.Load(),
		ExtendCountsHanded:   ExtendCountsHanded.Load(),
	}
}
