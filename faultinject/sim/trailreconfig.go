package sim

import (
	"fmt"
	"time"
)

// A trail of model/reconfig.pml (the online change of the masters,
// docs/reconfig.md) becomes a Script with Configs: four masters, two
// clients, the model's plan as the configurations of its epochs. Its
// events:
//
//	lock c e         client c's TryLock, on its configuration (epoch e)
//	vote c m X       its acquire applies on master m then (X: yes, no,
//	                 stale, behind: what the master answers on its own)
//	grant, fail      the round's end: every vote of it lies within the
//	                 node timeout of its lock; with fencing, the round's
//	                 write-back (RaiseFence on each master of its set)
//	                 applies then, as the model applies it at the
//	                 decision
//	token            the model's token: the real coordinator computes its
//	                 own
//	reload c e       client c builds its client on epoch e (OpReload)
//	install m e      master m takes epoch e's record (its removed form
//	                 when e's set leaves it out): a ScriptInstall
//	rollback m e     master m restarts with its keys and epoch e's record,
//	                 written by its previous run (an older snapshot): a
//	                 ScriptInstall with Rollback
//	seal, commit, step, publish, tick: no action of their own (the
//	                 seal's wait is the changer's, reconfig.lua's; a
//	                 replay installs at the trail's times)
//
// PRIOR_FENCE: masters 0 and 3 hold the lock's counter at 1, unstamped,
// before the records. PLAN_JOINT: epoch 2 is joint({0,1,3} q2, old
// {0,1,2} q2), as reconfig.Joint makes it; with JOINT_OLD_SET its sets are
// named the other way round (the same configuration for every rule), so
// that knobs.JointOneSet, which counts the first set alone, counts the old
// one as that trail's round does. Not replayed: Extends (EXTENDS).
func parseReconfigTrail(t *Trail) (Script, error) {
	if t.Has("EXTENDS") {
		return Script{}, fmt.Errorf("trail %s: EXTENDS cannot be replayed (Extends are not in the replay)", t.Name)
	}
	if t.N != 4 || t.C != 2 {
		return Script{}, fmt.Errorf("trail %s: %d masters and %d clients, want reconfig.pml's 4 and 2", t.Name, t.N, t.C)
	}
	// The rounds: each lock to its grant or fail, every call of it within
	// the node timeout of its start (the model decides once every master
	// answered).
	var bs []bound
	open := map[int]int{} // client -> its lock's event
	for k, e := range t.Events {
		if k > 0 {
			bs = append(bs, bound{k - 1, k, modelStep})
		}
		c := e.Args["c"]
		switch e.Kind {
		case "lock":
			open[c] = k
		case "grant", "fail":
			b, ok := open[c]
			if !ok {
				return Script{}, fmt.Errorf("trail %s: %q ends a round that never began", t.Name, e.Line)
			}
			bs = append(bs, bound{k, b, -(modelNodeTimeout - modelStep)})
			delete(open, c)
		case "extend", "extended", "notextended":
			return Script{}, fmt.Errorf("trail %s: %q cannot be replayed", t.Name, e.Line)
		}
	}
	if err := t.solve(bs); err != nil {
		return Script{}, err
	}
	ttl := ModelTTL(t.TTL)
	s := Script{Name: t.Name, Masters: t.N, Clients: t.C, TTL: ttl,
		Drift:       float64(time.Duration(t.Drift)*ModelTick-driftConstant) / float64(ttl),
		NodeTimeout: modelNodeTimeout, ReleaseTimeout: modelNodeTimeout,
		Records: !t.Has("SWAP"), Fencing: t.Has("FENCING")}
	if t.Has("PRIOR_FENCE") {
		s.Prior, s.PriorOn = 1, []int{0, 3}
	}
	// The plan's epochs (reconfig.pml's SETA): {0,1,2} q2, then the swap
	// to {0,1,3} q2 in one step, or the two single steps through
	// {0,1,2,3} q3, or through joint mode.
	s.Configs = []ScriptConfig{{Masters: []int{0, 1, 2}, Quorum: 2}, {Masters: []int{0, 1, 2, 3}, Quorum: 3}, {Masters: []int{0, 1, 3}, Quorum: 2}}
	switch {
	case t.Has("SWAP") || t.Has("PLAN_SWAP"):
		s.Configs = []ScriptConfig{s.Configs[0], s.Configs[2]}
	case t.Has("PLAN_JOINT") && t.Has("JOINT_OLD_SET"):
		s.Configs[1] = ScriptConfig{Masters: []int{0, 1, 2}, Quorum: 2, Old: []int{0, 1, 3}, OldQuorum: 2}
	case t.Has("PLAN_JOINT"):
		s.Configs[1] = ScriptConfig{Masters: []int{0, 1, 3}, Quorum: 2, Old: []int{0, 1, 2}, OldQuorum: 2}
	}
	attempts := make([]int, t.C)
	epochOf := make([]int, t.C) // each client's open round's epoch
	var last time.Duration
	for _, e := range t.Events {
		a := e.Args
		last = e.At
		switch e.Kind {
		case "lock":
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: a["c"], Kind: OpLock})
			attempts[a["c"]]++
			epochOf[a["c"]] = a["e"]
		case "grant", "fail":
			if !s.Fencing || a["e"] < 1 || a["e"] > len(s.Configs) {
				break
			}
			for _, m := range s.Configs[epochOf[a["c"]]-1].all() {
				s.Calls = append(s.Calls, ScriptCall{Client: a["c"], Master: m, Kind: CallRaise, Attempt: attempts[a["c"]] - 1, ApplyAt: e.At})
			}
		case "vote":
			s.Calls = append(s.Calls, ScriptCall{Client: a["c"], Master: a["m"], Kind: CallAcquire, Attempt: attempts[a["c"]] - 1, ApplyAt: e.At})
		case "reload":
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: a["c"], Kind: OpReload, Epoch: a["e"]})
		case "install":
			s.Installs = append(s.Installs, ScriptInstall{At: e.At, Master: a["m"], Epoch: a["e"]})
		case "rollback":
			s.Installs = append(s.Installs, ScriptInstall{At: e.At, Master: a["m"], Epoch: a["e"], Rollback: true})
		}
	}
	s.Duration = (last/ModelTick + 1) * ModelTick
	return s, nil
}
