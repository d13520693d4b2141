package sim

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The model's time (model/redlock.pml, model/shapes.pml) is in ticks: a
// key lives TTL ticks, a lease TTL-DRIFT, a round is decided within the
// tick it starts in. A trail's events become times: the events of tick k
// lie in [k*ModelTick, k*ModelTick+modelSpan), in their order, at least
// modelStep apart, and a round that the model closed at its deadline
// closes modelNodeTimeout after it began. The durations are chosen so that
// every comparison the model makes in ticks comes out the same on the
// simulator's clock (docs/verification.md, "From a trail to a schedule"):
// a TTL of T ticks is (T-1/2) ticks long, and events stay within modelSpan
// of their tick's start, less than half a tick.
const (
	ModelTick        = 200 * time.Millisecond
	modelSpan        = 90 * time.Millisecond
	modelStep        = 250 * time.Microsecond
	modelNodeTimeout = 20 * time.Millisecond
	// driftConstant is redlock's fixed part of the drift allowance.
	driftConstant = 2 * time.Millisecond
	// modelBootStep is how far a master's clock steps forward right after
	// a restart with "step=1" (BOOT_STEP): the low end of the simulator's
	// own draws (drawHostFaults), well over any trail's quarantine (a few
	// ticks) and the whole second INFO's uptime_in_seconds counts in.
	//
	// A restart with an older state ("stale=1") steps it as far,
	// for two things the model has and memnode's RestartFromCheckpoint has
	// not: the keys and guards of the older state are lost (the step
	// expires every one at once; the fencing counters, kept without
	// expiry, stay), and a client that meets the new run for the first time
	// takes as its uptime the real time since the restart (the model takes
	// the uptime's lower bound at its largest). Without the step memnode's
	// uptime_in_seconds, whole seconds less one, would be the smaller
	// bound and quarantine the run up to two seconds, ten ticks, longer
	// than the model does; with it the CPU time, the real time since the
	// restart, is.
	modelBootStep = 30 * time.Second
)

// Trail is a model counterexample as SPIN printed it: the EV lines of
// `spin -t -p` on model/redlock.pml, model/shapes.pml or model/queue.pml.
type Trail struct {
	// Name is the model configuration (model/check.sh), Flags its -D flags,
	// Model the model's file without ".pml" (from the header line).
	Name  string
	Flags []string
	Model string
	// Violation names the property the counterexample breaks.
	Violation string
	Events    []TrailEvent
	// N, C, A, TTL, Drift are the model's masters, clients, attempts per
	// client, and TTL and drift allowance in ticks.
	N, C, A, TTL, Drift int
	// LockDelay is the lock delay in ticks (LOCKDELAY; 0 without).
	LockDelay int
	// Prior is the fencing counter every master holds at the start, as an
	// earlier lease granted that token wrote it back and the AOF synced it
	// (PRIOR, "EV prior tok=1"; 0 without).
	Prior int
	// Queue is the waiting line's model (queue.pml; "EV start" with ETTL):
	// its entry TTL, late copies' reach and backoff in ticks, and whether
	// its calls are fair (binding).
	Queue                bool
	ETTL, Strag, Backoff int
	Fair                 bool
	// Cycle: the trail ends in an acceptance cycle (an LTL property's
	// counterexample, "EV cycle" where it starts): the events after it
	// repeat for ever. Only its ticks are kept (CycleSteps counts the
	// other events in it).
	Cycle      bool
	CycleSteps int
}

// TrailEvent is one EV line: its kind and arguments, the tick it happened
// in, and the time ParseTrail gave it.
type TrailEvent struct {
	Kind string
	Args map[string]int
	Tick int
	At   time.Duration
	Line string
}

// Has reports whether the trail's configuration has flag (without -D).
func (t Trail) Has(flag string) bool {
	return slices.ContainsFunc(t.Flags, func(f string) bool { return f == "-D"+flag || strings.HasPrefix(f, "-D"+flag+"=") })
}

// ReadTrail reads the output of `spin -t -p` on a model counterexample
// (its lines that start with "EV", after leading spaces; other lines are
// ignored), with model/check.sh's header line ("# model/check.sh NAME:
// spin -t -p FLAGS MODEL.pml") when there is one.
func ReadTrail(r io.Reader) (Trail, error) {
	var t Trail
	sc := bufio.NewScanner(r)
	tick := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "# model/check.sh "); ok {
			name, cmd, _ := strings.Cut(rest, ":")
			t.Name = name
			for _, f := range strings.Fields(cmd) {
				if strings.HasPrefix(f, "-D") {
					t.Flags = append(t.Flags, f)
				}
				if m, ok := strings.CutSuffix(f, ".pml"); ok {
					t.Model = m
				}
			}
			continue
		}
		rest, ok := strings.CutPrefix(line, "EV ")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		e := TrailEvent{Kind: fields[0], Args: map[string]int{}, Tick: tick, Line: line}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				if e.Kind == "violate" {
					t.Violation = f
				}
				continue
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				if k == "shape" {
					t.Flags = append(t.Flags, "-Dshape="+v)
					continue
				}
				if k == "next" && v == "none" { // queue.pml: a release or leave names no waiter
					e.Args[k] = -1
					continue
				}
				return t, fmt.Errorf("trail: %q: %s is not a number", line, f)
			}
			e.Args[k] = n
		}
		switch e.Kind {
		case "tick":
			tick++
			continue
		case "cycle":
			t.Cycle = true
			continue
		case "start":
			if ettl, ok := e.Args["ETTL"]; ok {
				t.Queue, t.N, t.C, t.ETTL = true, e.Args["N"], e.Args["C"], ettl
				t.Strag, t.Backoff, t.Fair = e.Args["STRAG"], e.Args["BACKOFF"], e.Args["FAIR"] == 1
				continue
			}
			t.N, t.C, t.A, t.TTL, t.Drift = e.Args["N"], e.Args["C"], e.Args["A"], e.Args["TTL"], e.Args["DRIFT"]
			t.LockDelay = e.Args["LD"]
			if k, ok := e.Args["K"]; ok {
				t.Flags = append(t.Flags, fmt.Sprintf("-DK=%d", k))
			}
			continue
		case "prior":
			t.Prior = e.Args["tok"]
			continue
		}
		if t.Cycle {
			t.CycleSteps++
		}
		t.Events = append(t.Events, e)
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	if t.Queue {
		if t.Cycle && t.Violation == "" {
			t.Violation = "granted" // queue.pml's one LTL property
		}
		if t.N == 0 || t.C == 0 || t.ETTL == 0 {
			return t, fmt.Errorf("trail %s: no \"EV start\" line with N, C and ETTL", t.Name)
		}
		return t, nil
	}
	if t.N == 0 || t.C == 0 || t.A == 0 || t.TTL == 0 {
		return t, fmt.Errorf("trail %s: no \"EV start\" line with N, C, A and TTL", t.Name)
	}
	return t, nil
}

// ModelTTL is the simulator's TTL for a model TTL of ttl ticks: ttl-1/2
// ticks, so that a key set in tick w is still there in tick w+ttl-1 and
// gone in tick w+ttl, wherever in their ticks the two events fall.
func ModelTTL(ttl int) time.Duration { return time.Duration(2*ttl-1) * ModelTick / 2 }

// modelRate is the clock rate of a master whose keys the model expires d
// ticks early: a key then lives (ttl-d-1/2) ticks.
func modelRate(ttl, d int) float64 { return float64(ModelTTL(ttl)) / float64(ModelTTL(ttl-d)) }

// ParseTrail reads a trail (ReadTrail) and translates it into the Script
// that replays it on the simulator. Each model event becomes a time
// (times); a client's steps become its operations; a master's restarts,
// pauses, clock jumps and rates its faults; and each node call the model
// applied, delayed, lost or dialled in vain a ScriptCall. A call the trail
// never applies is lost. A restart with an older state ("stale=1") is a
// CrashAOFTail down for no time whose checkpoint is the master's last
// "fsync" (or the start, or its last restart before), its clock stepped
// forward by modelBootStep as it comes back, a restart with a clock step
// ("step=1") a BootClockStep of modelBootStep. The script's
// options (fencing, quarantine, a late client, the shape, the lock delay,
// the prior counter) are the configuration's; a
// mechanism the trail's configuration switched off is the caller's to
// switch off (internal/knobs). A trail of model/queue.pml (the waiting
// line) becomes waiting Lock calls instead (trailqueue.go).
func ParseTrail(r io.Reader) (Script, Trail, error) {
	t, err := ReadTrail(r)
	if err != nil {
		return Script{}, t, err
	}
	if t.Queue {
		s, err := parseQueueTrail(&t)
		return s, t, err
	}
	if t.Model == "reconfig" {
		s, err := parseReconfigTrail(&t)
		return s, t, err
	}
	if err := t.times(); err != nil {
		return Script{}, t, err
	}
	ttl := ModelTTL(t.TTL)
	// The model's allowance is DRIFT ticks; redlock's is the factor times
	// the TTL plus driftConstant.
	s := Script{Name: t.Name, Masters: t.N, Clients: t.C, TTL: ttl,
		Drift:       float64(time.Duration(t.Drift)*ModelTick-driftConstant) / float64(ttl),
		NodeTimeout: modelNodeTimeout, ReleaseTimeout: modelNodeTimeout,
		Fencing: t.Has("FENCING"), Quar: t.Has("QUAR"),
		// The model's keys live TTL+LD ticks: ModelTTL(TTL+LD) is the TTL
		// plus LD whole ticks.
		LockDelay: time.Duration(t.LockDelay) * ModelTick, Prior: int64(t.Prior)}
	if t.LockDelay > 0 && (t.Has("FAST") || t.Has("BEYOND")) {
		// A fast master's rate (modelRate) is for keys of the TTL alone:
		// the model expires a key of TTL+LD ticks d ticks early, the rate
		// would expire it d*(TTL+LD)/TTL early.
		return Script{}, t, fmt.Errorf("trail %s: fast clocks with a lock delay cannot be replayed (the model's fast clock is an offset, the simulator's a rate)", t.Name)
	}
	if t.Has("RESTART_STALE") && t.Has("WALL_UPTIME") {
		// A stale restart's clock step (modelBootStep) would make its run look
		// up for the quarantine to the WallUptime knob, which the model's
		// stale restart does not.
		return Script{}, t, fmt.Errorf("trail %s: a restart with an older state cannot be replayed with WALL_UPTIME (its replay steps the master's clock)", t.Name)
	}
	switch {
	case t.Has("SEM"):
		k := 2
		for _, f := range t.Flags {
			if v, ok := strings.CutPrefix(f, "-DK="); ok {
				k, _ = strconv.Atoi(v)
			}
		}
		s.Shape = Shape{Kind: SemaphoreLock, K: k}
	case t.Has("RW"):
		s.Shape = Shape{Kind: RWLock}
	}
	if t.Has("LATE") {
		s.Late = []int{t.C - 1}
	}

	type callID struct {
		kind      CallKind
		i, m, seq int
	}
	calls := map[callID]*ScriptCall{}
	var order []callID
	get := func(kind CallKind, i, m, seq int) *ScriptCall {
		id := callID{kind, i, m, seq}
		if c, ok := calls[id]; ok {
			return c
		}
		c := &ScriptCall{Client: i / t.A, Master: m, Kind: kind, Attempt: i % t.A, Seq: seq}
		calls[id] = c
		order = append(order, id)
		return c
	}
	sent := func(kind CallKind, i, seq int) {
		for m := range t.N {
			get(kind, i, m, seq).DropRequest = true // until the trail applies it
		}
	}
	applied := func(c *ScriptCall, at time.Duration, lost bool) {
		c.DropRequest, c.ApplyAt = false, at
		c.DropReply = true // until its reply reaches the client
		if !lost && t.Has("SPLIT") {
			return
		}
		if !lost {
			c.DropReply, c.ReplyAt = false, at
		}
	}
	extends := map[int]int{} // attempt: extends sent
	// A release is sent at once ("rapply": applied at once), into flight
	// ("rsend": applied by a later "rapply", lost by "rlost" or with its
	// master's run), or dialled in vain ("rdial"); retries are sends too.
	type relState struct{ sends, flying int }
	rels := map[[2]int]*relState{}
	rel := func(i, m int) *relState {
		k := [2]int{i, m}
		if rels[k] == nil {
			rels[k] = &relState{flying: -1}
		}
		return rels[k]
	}
	relSend := func(i, m int) *ScriptCall {
		r := rel(i, m)
		r.sends++
		return get(CallRelease, i, m, r.sends-1)
	}
	type pause struct {
		at, full time.Duration
		m        int
	}
	pauses := map[int]*pause{}
	endPause := func(p *pause, at time.Duration) {
		f := Fault{Kind: MasterPause, Master: p.m, At: p.at, Dur: at - p.at}
		if p.full > 0 {
			f.Kind, f.Delay = BacklogPause, p.full-p.at
		}
		s.Faults = append(s.Faults, f)
	}
	stalled := map[int]bool{}
	// synced is when each master's state was last durable, as a restart
	// with an older state ("stale=1") brings it back: the start (the
	// prior counter, or nothing), its last "fsync", or its last restart
	// but a stale one (the state it came back with is the synced one).
	synced := make([]time.Duration, t.N)
	var last time.Duration
	for _, e := range t.Events {
		a := e.Args
		i, m, c := a["i"], a["m"], a["c"]
		last = max(last, e.At)
		switch e.Kind {
		case "lock":
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: c, Kind: OpLock})
			sent(CallAcquire, i, 0)
		case "adial":
			get(CallAcquire, i, m, 0).DropRequest = false
			get(CallAcquire, i, m, 0).DialTimeout = true
		case "aapply":
			applied(get(CallAcquire, i, m, 0), e.At, a["lost"] == 1)
		case "areply":
			cl := get(CallAcquire, i, m, 0)
			cl.DropReply, cl.ReplyAt = false, e.At
		case "alost":
			get(CallAcquire, i, m, 0).DropRequest = true
		case "raise":
			sent(CallRaise, i, 0)
		case "zapply":
			applied(get(CallRaise, i, m, 0), e.At, a["lost"] == 1)
		case "zlost":
			get(CallRaise, i, m, 0).DropRequest = true
		case "extend":
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: c, Kind: OpExtend})
			sent(CallExtend, i, extends[i])
			extends[i]++
		case "eapply":
			applied(get(CallExtend, i, m, extends[i]-1), e.At, a["lost"] == 1)
		case "elost":
			get(CallExtend, i, m, extends[i]-1).DropRequest = true
		case "rsend":
			cl := relSend(i, m)
			cl.DropRequest = true // until it applies
			rel(i, m).flying = cl.Seq
		case "rapply":
			r := rel(i, m)
			var cl *ScriptCall
			if r.flying >= 0 {
				cl, r.flying = get(CallRelease, i, m, r.flying), -1
			} else {
				cl = relSend(i, m)
			}
			cl.DropRequest, cl.ApplyAt = false, e.At
			cl.DropReply = a["lost"] == 1
		case "rdial":
			relSend(i, m).DialTimeout = true
		case "rlost":
			if r := rel(i, m); r.flying >= 0 {
				get(CallRelease, i, m, r.flying).DropRequest = true
				r.flying = -1
			}
		case "write":
			kind := OpWrite
			if stalled[c] {
				kind, stalled[c] = OpStallWrite, false
			}
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: c, Kind: kind})
		case "cpause":
			stalled[c] = true
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: c, Kind: OpStall})
		case "unlock":
			s.Ops = append(s.Ops, ScriptOp{At: e.At, Client: c, Kind: OpUnlock})
		case "fsync":
			synced[m] = e.At
		case "restart":
			f := Fault{Kind: RestartEmpty, Master: m, At: e.At}
			switch {
			case a["stale"] == 1:
				// The power cut's fault, down for no time: Checkpoint when
				// the state was last synced, RestartFromCheckpoint now, and
				// the clock stepped forward at once (modelBootStep says why).
				f.Kind, f.Delay, f.Jump = CrashAOFTail, e.At-synced[m], modelBootStep
			case a["step"] == 1:
				f.Kind, f.Jump = BootClockStep, modelBootStep
			case a["keep"] == 1:
				f.Kind = RestartKeep
			}
			if f.Kind != CrashAOFTail {
				synced[m] = e.At
			}
			if p := pauses[m]; p != nil { // a restart resumes a paused master
				endPause(p, e.At)
				delete(pauses, m)
			}
			for k, r := range rels { // releases in flight to it die with its run
				if k[1] == m {
					r.flying = -1
				}
			}
			s.Faults = append(s.Faults, f)
		case "mpause":
			pauses[m] = &pause{at: e.At, m: m}
		case "mfull":
			pauses[m].full = e.At
		case "mresume":
			endPause(pauses[m], e.At)
			delete(pauses, m)
		case "jump":
			s.Faults = append(s.Faults, Fault{Kind: ClockJump, Master: m, At: e.At, Jump: ttl + ModelTick})
		case "fast":
			if t.Has("RESTART_STALE") || t.Has("BOOT_STEP") {
				// The step sets the master's clock rate back to 1.
				return Script{}, t, fmt.Errorf("trail %s: a fast clock cannot be replayed with restarts that step the clock (RESTART_STALE, BOOT_STEP)", t.Name)
			}
			k := DriftWithin
			if a["d"] > t.Drift {
				k = DriftBeyond
			}
			s.Faults = append(s.Faults, Fault{Kind: k, Master: m, Rate: modelRate(t.TTL, a["d"])})
		}
	}
	s.Duration = (last/ModelTick + 1) * ModelTick
	for _, p := range pauses {
		endPause(p, s.Duration)
	}
	for _, id := range order {
		s.Calls = append(s.Calls, *calls[id])
	}
	slices.SortStableFunc(s.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	return s, t, nil
}

// times gives every event its time (TrailEvent.At): in trail order,
// modelStep apart at least, within its tick's window, and a round the
// model closed at its deadline ("deadline", "zdeadline", "edeadline")
// exactly modelNodeTimeout+modelStep after the event that began it (its
// lock, its write-back's decision, its extend). These are difference
// constraints; the least times that meet them are found by relaxation.
func (t *Trail) times() error {
	n := len(t.Events)
	var bs []bound
	began := map[string]int{} // round ("a3", "z3", "e3") -> event that began it
	timedOut := map[string]bool{}
	for k, e := range t.Events {
		if k > 0 {
			bs = append(bs, bound{k - 1, k, modelStep})
		}
		i := strconv.Itoa(e.Args["i"])
		var round string
		switch e.Kind {
		case "lock":
			began["a"+i] = k
		case "raise":
			began["z"+i] = k
		case "extend":
			began["e"+i] = k
		case "deadline":
			round = "a" + i
		case "zdeadline":
			round = "z" + i
		case "edeadline":
			round = "e" + i
		case "close", "zclose", "eclose":
			// A round that ended with every call answered ended before its
			// deadline.
			r := map[string]string{"close": "a", "zclose": "z", "eclose": "e"}[e.Kind] + i
			if b, ok := began[r]; ok && !timedOut[r] {
				bs = append(bs, bound{k, b, -(modelNodeTimeout - modelStep)})
			}
			delete(timedOut, r)
		}
		if round != "" {
			timedOut[round] = true
		}
		if e.Kind == "rdial" {
			// The coordinator queues the release and retries it once its
			// dial has timed out (modelNodeTimeout later): the master must
			// still be paused then, as the model's retry found it.
			for k2 := k + 1; k2 < n; k2++ {
				if e2 := t.Events[k2]; (e2.Kind == "mresume" || e2.Kind == "restart") && e2.Args["m"] == e.Args["m"] {
					bs = append(bs, bound{k, k2, modelNodeTimeout + 2*modelStep})
					break
				}
			}
		}
		if round != "" {
			b, ok := began[round]
			if !ok {
				return fmt.Errorf("trail %s: %q closes a round that never began", t.Name, e.Line)
			}
			d := modelNodeTimeout + modelStep
			bs = append(bs, bound{b, k, d}, bound{k, b, -d})
		}
	}
	return t.solve(bs)
}

// bound is a difference constraint between two events' times:
// at[to] >= at[from] + d.
type bound struct {
	from, to int
	d        time.Duration
}

// solve gives every event the least time that meets bs and lies at or
// after its tick's start (plus modelStep), by relaxation; it fails when
// an event falls past its tick's window or the bounds contradict each
// other.
func (t *Trail) solve(bs []bound) error {
	n := len(t.Events)
	at := make([]time.Duration, n)
	for k, e := range t.Events {
		at[k] = time.Duration(e.Tick)*ModelTick + modelStep
	}
	for range n + 1 {
		changed := false
		for _, b := range bs {
			if v := at[b.from] + b.d; at[b.to] < v {
				at[b.to], changed = v, true
			}
		}
		if !changed {
			for k, e := range t.Events {
				if lim := time.Duration(e.Tick)*ModelTick + modelSpan; at[k] > lim {
					return fmt.Errorf("trail %s: %q falls at %v, past its tick's window (%v): too many events in one tick", t.Name, e.Line, at[k], lim)
				}
				t.Events[k].At = at[k]
			}
			return nil
		}
	}
	return fmt.Errorf("trail %s: the rounds' deadlines cannot all be met (the model closed them in an order no timing gives)", t.Name)
}
