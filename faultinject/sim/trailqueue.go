package sim

import (
	"fmt"
	"strconv"
	"time"
)

// A trail of model/queue.pml (the waiting line and its wake-ups) becomes a
// script of waiting Lock calls (docs/verification.md, "From a trail to a
// schedule"):
//
//   - "lock c" is client c's waiting Lock call (OpWait) on a mutex made
//     WithFairQueue (FAIR=1) and WithRetryBackoff of BACKOFF ticks (with
//     NO_BACKOFF: queueNoBackoff, never within the run); the call lasts
//     until the script's end, and must get the lock before it has stayed
//     free for queueWait (history.Granted).
//   - "attempt c" begins the call's next acquisition: its acquires are
//     dropped until "aapply c m" applies one (its reply then, or with
//     pend=1 at "areply c m", or never); "deadline c" leaves the ones not
//     applied unanswered, and "lapply c m" applies such a call late (its
//     reply lost).
//   - "release c m" applies the release of c's current acquisition on m
//     (its rollback, or its Unlock, "unlock c": OpUnlock); "leave c m" the
//     client's next LeaveQueue on m; "watch c" makes the client's next
//     Watch on every master listen from then.
//   - "wake c" with no later "attempt c": the woken call's attempt, whose
//     acquires reach no master within the trail (the model never ran it).
//   - A call the trail never applies is lost; a call the trail does not
//     script (a rollback's release to a master the key was not on, every
//     call after the trail's end) reaches its master at once.
//
// The model abstracts two things the code does otherwise, so the replay
// takes the nearest real schedule:
//
//   - A late copy's acquire ("lapply") enters the line in the model
//     although its round's rollback has left a release guard of its value
//     there ("a late copy never takes the key: the release guard ...
//     refuses it"); acquire_queued.lua checks that guard before anything
//     else, so a copy that comes after the guard changes nothing. In the
//     replay the rollback's release to that master reaches it right after
//     the copy (the network delivers the release after the late acquire).
//   - Waiter IDs are random: the links rename them (scriptline.go) so that
//     ties in arrival go as in the model; the calls' arrivals must then be
//     in the model's order (client 0 first) to the millisecond, which the
//     parser checks.
const (
	// queueTTL is the lock's TTL in a queue.pml replay: the model's keys
	// never expire (holders unlock within a tick).
	queueTTL = 50 * ModelTick
	// queueWait bounds a waiting call's wait on a free lock (Script.Wait):
	// four ticks, more than a round, its rollback and a backoff of a tick,
	// and less than a waiter's entry TTL (redlock's minimum, 1s): a waiter
	// kept out by an entry that stays in line must wait past the bound
	// even when that entry's last refresh came just before the lock fell
	// free (at five ticks, the bound and the entry's expiry met, and a
	// replay caught the kept-out waiter in about 1 run in 8).
	queueWait = 4 * ModelTick
	// queueNoBackoff is the backoff of a NO_BACKOFF trail: past any run.
	queueNoBackoff = time.Hour
)

// parseQueueTrail translates a queue.pml trail (ParseTrail).
func parseQueueTrail(t *Trail) (Script, error) {
	if t.Cycle && t.CycleSteps > 0 {
		return Script{}, fmt.Errorf("trail %s: %d events repeat in its cycle, which a replay plays once: it cannot be replayed", t.Name, t.CycleSteps)
	}
	if err := t.queueTimes(); err != nil {
		return Script{}, err
	}
	s := Script{Name: t.Name, Masters: t.N, Clients: t.C, TTL: queueTTL, Drift: 0.01,
		NodeTimeout: modelNodeTimeout, ReleaseTimeout: modelNodeTimeout,
		Fair: t.Fair, Backoff: time.Duration(t.Backoff) * ModelTick, Wait: queueWait}
	if t.Has("NO_BACKOFF") {
		s.Backoff = queueNoBackoff
	}
	type callID struct {
		kind           CallKind
		c, m, att, seq int
	}
	calls := map[callID]*ScriptCall{}
	var order []callID
	get := func(kind CallKind, c, m, att, seq int) *ScriptCall {
		id := callID{kind, c, m, att, seq}
		if cl, ok := calls[id]; ok {
			return cl
		}
		cl := &ScriptCall{Client: c, Master: m, Kind: kind, Attempt: att, Seq: seq}
		calls[id] = cl
		order = append(order, id)
		return cl
	}
	type lateCopy struct{ att, tick int }
	var (
		attempts = map[int]int{}         // client: acquisitions begun
		cur      = map[int]int{}         // client: its current acquisition
		flying   = map[[2]int]bool{}     // (client, master): its current acquire not applied yet
		late     = map[[2]int]lateCopy{} // (client, master): a late copy on the way
		leaves   = map[[2]int]int{}      // (client, master): LeaveQueues so far
		watches  = map[[2]int]int{}      // (client, master): Watches so far
		arrival  = map[int]time.Duration{}
	)
	// lastAttempt: each client's last "attempt" event, by index.
	lastAttempt := map[int]int{}
	for k, e := range t.Events {
		if e.Kind == "attempt" {
			lastAttempt[e.Args["c"]] = k
		}
	}
	var last time.Duration
	for k, e := range t.Events {
		a := e.Args
		c, m := a["c"], a["m"]
		last = max(last, e.At)
		switch e.Kind {
		case "lock":
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: c, Kind: OpWait})
			arrival[c] = e.At.Truncate(time.Millisecond)
		case "attempt":
			cur[c] = attempts[c]
			attempts[c]++
			for m := range t.N {
				get(CallAcquire, c, m, cur[c], 0).DropRequest = true // until the trail applies it
				flying[[2]int{c, m}] = true
			}
		case "aapply":
			cl := get(CallAcquire, c, m, cur[c], 0)
			cl.DropRequest, cl.ApplyAt = false, e.At
			cl.DropReply, cl.ReplyAt = a["pend"] == 1, e.At
			flying[[2]int{c, m}] = false
		case "areply":
			cl := get(CallAcquire, c, m, cur[c], 0)
			cl.DropReply, cl.ReplyAt = false, e.At
		case "deadline":
			for m := range t.N {
				k := [2]int{c, m}
				if !flying[k] {
					continue
				}
				flying[k] = false
				// One late copy per client and master at a time, as the
				// model keeps it (for STRAG ticks).
				if lc, ok := late[k]; !ok || e.Tick-lc.tick >= t.Strag {
					late[k] = lateCopy{cur[c], e.Tick}
				}
			}
		case "lapply":
			k := [2]int{c, m}
			lc, ok := late[k]
			if !ok {
				return Script{}, fmt.Errorf("trail %s: %q applies a late copy the trail never left", t.Name, e.Line)
			}
			delete(late, k)
			cl := get(CallAcquire, c, m, lc.att, 0)
			cl.DropRequest, cl.ApplyAt, cl.DropReply = false, e.At, true
			// The rollback's release of that acquisition reaches the
			// master right after the copy (see above).
			rl := get(CallRelease, c, m, lc.att, 0)
			if rl.ApplyAt <= e.At {
				rl.ApplyAt = e.At + modelStep/2
			}
		case "release":
			get(CallRelease, c, m, cur[c], 0).ApplyAt = e.At
		case "leave":
			k := [2]int{c, m}
			get(CallLeave, c, m, 0, leaves[k]).ApplyAt = e.At
			leaves[k]++
		case "watch":
			for m := range t.N {
				k := [2]int{c, m}
				get(CallWatch, c, m, 0, watches[k]).ApplyAt = e.At
				watches[k]++
			}
		case "unlock":
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: c, Kind: OpUnlock})
		case "wake":
			// The woken call attempts at once (its watch's wake-up). When
			// the trail goes on without that attempt, its acquires reach
			// no master within the trail (the network holds them): the
			// model's scheduler never ran it. A wake whose attempt the
			// trail does schedule would start it earlier than the model
			// does: not replayed.
			if la, ok := lastAttempt[c]; ok && la > k {
				return Script{}, fmt.Errorf("trail %s: %q cannot be replayed (the woken call attempts at once, the trail's attempt comes later)", t.Name, e.Line)
			}
			cur[c] = attempts[c]
			attempts[c]++
			for m := range t.N {
				get(CallAcquire, c, m, cur[c], 0).DropRequest = true
			}
		case "violate":
			// grant-released (GRANT) holds at every tick: the replay
			// looks at the masters' keys where the model found a key
			// left to a call that ended (history.GrantReleased).
			if t.Violation == "grant-released" {
				s.Checkpoints = append(s.Checkpoints, e.At)
			}
		case "fail", "grant", "publish", "note", "gnote", "hold-grants",
			"handoff", "takeover", "leave-release", "release-leave":
			// The round's decision (its time is queueTimes'), a
			// notification (the masters send it), the property; with
			// GRANT what a master's release, acquire or LeaveQueue did
			// to its key (the hand-over, its take-over, the release of a
			// handed key: the step's own call does it); with GRANT_HOLD
			// a hand-over's notification (the master sends it), the call
			// holding with them (the code's own step once they arrive),
			// and a released handed value's waiter leaving the line.
		default:
			// "backoff" starts an attempt at a time of the client's
			// choosing (the backoff's jitter); "giveup", "die" and
			// "nlost" have no script step yet.
			return Script{}, fmt.Errorf("trail %s: %q cannot be replayed (no script step for %q)", t.Name, e.Line, e.Kind)
		}
	}
	for c := range arrival {
		for c2 := range arrival {
			if c < c2 && arrival[c2] < arrival[c] {
				return Script{}, fmt.Errorf("trail %s: client %d's Lock call begins a millisecond before client %d's: the masters would order them otherwise than the model", t.Name, c2, c)
			}
		}
	}
	s.Duration = (last/ModelTick+1)*ModelTick + s.Wait + ModelTick
	for _, id := range order {
		s.Calls = append(s.Calls, *calls[id])
	}
	return s, nil
}

// queueTimes gives every event of a queue.pml trail its time, as times
// does for redlock.pml's: in trail order at least modelStep apart, within
// its tick's window; an acquisition's round begins with its trigger (the
// Lock call, the watch's start for the fresh look, or the requeue's last
// LeaveQueue, which its calls wait for) and, closed at its deadline,
// closes exactly modelNodeTimeout+modelStep after it, or else before its
// deadline; the watch starts within the node timeout of the failure that
// starts it (the coordinator bounds a Watch by it).
func (t *Trail) queueTimes() error {
	var bs []bound
	trigger := map[string]int{} // client -> its latest lock, watch or leave
	began := map[string]int{}   // client -> its round's trigger
	timedOut := map[string]bool{}
	failed := map[string]int{}
	for k, e := range t.Events {
		if k > 0 {
			bs = append(bs, bound{k - 1, k, modelStep})
		}
		c := strconv.Itoa(e.Args["c"])
		d := modelNodeTimeout + modelStep
		switch e.Kind {
		case "lock", "watch", "leave":
			trigger[c] = k
		case "attempt":
			began[c] = trigger[c]
			timedOut[c] = false
		}
		switch e.Kind {
		case "deadline":
			b, ok := began[c]
			if !ok {
				return fmt.Errorf("trail %s: %q closes a round that never began", t.Name, e.Line)
			}
			bs = append(bs, bound{b, k, d}, bound{k, b, -d})
			timedOut[c] = true
		case "grant", "fail":
			if b, ok := began[c]; ok && !timedOut[c] {
				bs = append(bs, bound{k, b, -(modelNodeTimeout - modelStep)})
			}
			if e.Kind == "fail" {
				failed[c] = k
			}
		case "watch":
			if f, ok := failed[c]; ok {
				bs = append(bs, bound{k, f, -(modelNodeTimeout - modelStep)})
			}
		}
	}
	return t.solve(bs)
}
