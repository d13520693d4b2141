package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// A Script is an explicit schedule: the world of a Plan (masters,
// clients, the proxy-like network, the history and its checker), but every
// client operation at a given time instead of randomly drawing workers,
// and chosen node calls delivered, delayed or lost as it says instead of
// drawing the network's weather. A model checker's counterexample becomes
// one (ParseTrail, docs/verification.md); RunScript runs it against the
// real coordinator. Times are since the workload's start.
type Script struct {
	// Name says where the script came from (a model configuration).
	Name             string
	Masters, Clients int
	TTL              time.Duration
	// Drift is the clients' WithDriftFactor.
	Drift float64
	// NodeTimeout and ReleaseTimeout are the clients' (redlock's defaults
	// when zero).
	NodeTimeout, ReleaseTimeout time.Duration
	// Fencing: the lock is made WithFencing; Quar: the clients use
	// WithRestartQuarantine(0).
	Fencing, Quar bool
	// LockDelay is the lock's WithLockDelay (0: none). The history's
	// Acquired events carry it, and the checker judges what it promises
	// (history.LockDelay).
	LockDelay time.Duration
	// Shape is the lock's (the zero Shape: a mutex). A read-write lock's
	// client 0 takes the write lease, the others read leases.
	Shape Shape
	// Prior is the fencing counter every master holds at the start (0:
	// none): written by the master's current run, as an earlier lease
	// granted that token wrote it back, before the clients meet the
	// masters (priorCounter).
	Prior int64
	// PriorOn lists the masters that hold Prior (nil: every master).
	PriorOn []int
	// Late lists the clients that meet the masters at their first
	// operation (a new process); the others meet every master before the
	// workload starts.
	Late []int
	// Fair makes the lock WithFairQueue (a mutex); Backoff is its
	// WithRetryBackoff, minimum and maximum alike (0: redlock's default).
	Fair    bool
	Backoff time.Duration
	// Wait bounds each waiting Lock call (OpWait): it must get the lock
	// before the lock has stayed free for Wait (history.Granted; 0: not
	// judged).
	Wait time.Duration
	// Ops are the clients' operations; each client runs its own in order,
	// each at its time (later if the previous one is still running).
	Ops []ScriptOp
	// Faults are the masters' faults (restarts, pauses, clock jumps and
	// rates), run as a Plan's are.
	Faults []Fault
	// Calls script node calls; a call not listed reaches its master at
	// once and its reply comes back at once.
	Calls []ScriptCall
	// Duration is the workload's length: clients still holding a lease
	// then release it, then every client closes (as after a Plan's).
	Duration time.Duration
	// Checkpoints are times at which the world records the value each
	// master holds as the lock's key, with the client whose call sent it
	// (history.Held, judged by history.GrantReleased). A checkpoint is a
	// time the script leaves no call on its way (its calls apply at their
	// ApplyAt, the unscripted ones at once).
	Checkpoints []time.Duration
	// Configs, for a trail of model/reconfig.pml (trailreconfig.go): the
	// masters and quorum of each epoch, epoch 1 first. Each client starts
	// on epoch 1 and lists its masters only; OpReload moves it to another
	// epoch. nil: every client lists every master.
	Configs []ScriptConfig
	// Records: the masters of epoch 1 hold its record at the start and
	// each client's calls carry its epoch's record (false: no records,
	// the clients' lists alone).
	Records bool
	// Installs are the records the masters take during the run.
	Installs []ScriptInstall
}

// ScriptConfig is one epoch's configuration of a Script.
type ScriptConfig struct {
	Masters []int
	Quorum  int
	// Old and OldQuorum: joint mode's other set (wire.Config.Old), none
	// in single mode.
	Old       []int
	OldQuorum int
}

// all is every master of c, each once (wire.Config.All's order).
func (c ScriptConfig) all() []int { return wire.Union(c.Masters, c.Old) }

// ScriptInstall is master Master taking epoch Epoch's record at At (its
// removed form when that epoch's set leaves the master out). Rollback: the
// master restarts with its keys then, the record now of its previous run
// (an older snapshot brought it back).
type ScriptInstall struct {
	At            time.Duration
	Master, Epoch int
	Rollback      bool
}

// OpKind is one kind of client operation of a Script.
type OpKind int

// Client operations.
const (
	// OpLock makes one attempt (TryLock: a semaphore's, a
	// read-write lock's writer's for client 0, its reader's for the others).
	OpLock OpKind = iota
	// OpWrite writes to the protected resource if the lease is valid.
	OpWrite
	// OpStall checks that the lease is valid, then stalls (a process
	// pause): the next OpStallWrite writes without checking again.
	OpStall
	// OpStallWrite is the stalled holder's write.
	OpStallWrite
	// OpExtend extends the lease.
	OpExtend
	// OpUnlock stops using the lease and releases it.
	OpUnlock
	// OpWait is a waiting Lock call (a mutex's Lock: it waits in the
	// masters' line and retries), until it gets the lock or the script's
	// Duration ends.
	OpWait
	// OpReload moves the client to configuration Epoch (Script.Configs).
	OpReload
)

func (k OpKind) String() string {
	return [...]string{"lock", "write", "stall", "stall-write", "extend", "unlock", "wait", "reload"}[k]
}

// ScriptOp is one client operation at a time.
type ScriptOp struct {
	At     time.Duration
	Client int
	Kind   OpKind
	Epoch  int // OpReload
}

// CallKind is the kind of a node call a ScriptCall scripts.
type CallKind int

// Node calls a script can steer.
const (
	CallAcquire CallKind = iota // Acquire, AcquireFenced, AcquireHold
	CallRelease                 // Release, ReleaseHold (the first and its retries)
	CallRaise                   // RaiseFence (the fencing write-back)
	CallExtend                  // Extend, ExtendHold
	CallLeave                   // LeaveQueue (Attempt 0; Seq counts the client's on the master)
	CallWatch                   // Watch: ApplyAt is when the subscription listens (Attempt 0)
)

func (k CallKind) String() string {
	return [...]string{"acquire", "release", "raise", "extend", "leave", "watch"}[k]
}

// ScriptCall steers one node call: the Seq-th call of Kind that client
// Client makes to master Master for its Attempt-th acquisition (both from
// 0, counted in the order the client's acquisitions first reach a node).
type ScriptCall struct {
	Client, Master int
	Kind           CallKind
	Attempt, Seq   int
	// ApplyAt is when the request reaches the master (if it is made later,
	// or ApplyAt is 0: at once); ReplyAt when its reply reaches the client
	// (0 or past: at once).
	ApplyAt, ReplyAt time.Duration
	// DropRequest: the request never reaches the master (the caller waits
	// for its deadline). DropReply: the request applies, its reply never
	// comes. DialTimeout: the call needs a new connection and its dial
	// times out (nothing is sent), as to a paused master whose accept queue
	// is full.
	DropRequest, DropReply, DialTimeout bool
}

func (c ScriptCall) String() string {
	s := fmt.Sprintf("c%d-m%d %v #%d.%d:", c.Client, c.Master, c.Kind, c.Attempt, c.Seq)
	switch {
	case c.DialTimeout:
		s += " dial times out"
	case c.DropRequest:
		s += " request lost"
	default:
		s += fmt.Sprintf(" applies at %v", c.ApplyAt)
		if c.DropReply {
			s += ", reply lost"
		} else if c.ReplyAt > 0 {
			s += fmt.Sprintf(", reply at %v", c.ReplyAt)
		}
	}
	return s
}

// scriptName is the lock the script's clients use.
const scriptName = "lock-0"

// Plan returns the Plan the script's world runs with: its masters,
// clients, options and faults (the verdict reads its broken assumptions).
func (s Script) Plan() Plan {
	p := Plan{Family: Family("model:" + s.Name), Masters: s.Masters, Clients: s.Clients, Workers: 1,
		Names: []string{scriptName}, TTL: s.TTL, Delay: s.LockDelay, Drift: s.Drift, MaxIn: 16, Fencing: s.Fencing, Quar: s.Quar,
		Duration: s.Duration, Faults: slices.Clone(s.Faults)}
	if s.Shape.Kind != MutexLock {
		p.Shapes = []Shape{s.Shape}
		p.Owners = make([]int, s.Clients)
	}
	for _, c := range s.Late {
		p.Faults = append(p.Faults, Fault{Kind: LateClient, Client: c})
	}
	slices.SortStableFunc(p.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	return p
}

func (s Script) String() string {
	b := fmt.Sprintf("script %s: masters=%d clients=%d ttl=%v lockdelay=%v drift=%v nodetimeout=%v fencing=%v quarantine=%v shape=%v late=%v duration=%v",
		s.Name, s.Masters, s.Clients, s.TTL, s.LockDelay, s.Drift, s.NodeTimeout, s.Fencing, s.Quar, s.Shape, s.Late, s.Duration)
	if s.Prior > 0 {
		b += fmt.Sprintf(" prior=%d", s.Prior)
	}
	if s.Fair || s.Backoff > 0 || s.Wait > 0 {
		b += fmt.Sprintf(" fair=%v backoff=%v wait=%v", s.Fair, s.Backoff, s.Wait)
	}
	for _, f := range s.Faults {
		b += "\n  fault " + f.String()
	}
	for _, o := range s.Ops {
		b += fmt.Sprintf("\n  %v c%d %v", o.At, o.Client, o.Kind)
	}
	for _, c := range s.Calls {
		b += "\n  call " + c.String()
	}
	for _, at := range s.Checkpoints {
		b += fmt.Sprintf("\n  checkpoint at %v", at)
	}
	return b
}

// RunScript runs s against the real coordinator and judges its history as
// Run does. It must run inside a synctest bubble (synctest.Test), never
// concurrently with a run that expects other knobs.
func RunScript(s Script) Result {
	p := s.Plan()
	w := &world{plan: p, t0: time.Now().Add(p.TTL + 2*time.Second), wait: s.Wait, sent: map[string]sentBy{}}
	w.cut = make([][]int, p.Clients)
	for c := range w.cut {
		w.cut[c] = make([]int, p.Masters)
	}
	for m := range p.Masters {
		w.masters = append(w.masters, memnode.New(fmt.Sprintf("m%d", m)))
		if s.Prior > 0 && (s.PriorOn == nil || slices.Contains(s.PriorOn, m)) {
			priorCounter(w.masters[m], scriptName, s.Prior, p.TTL)
		}
	}
	w.stores = []*memnode.FencedStore{{}}
	w.full = make([]time.Time, p.Masters)
	copts := []redlock.ClientOption{redlock.WithDriftFactor(p.Drift), redlock.WithMaxInFlight(p.MaxIn)}
	if s.NodeTimeout > 0 {
		copts = append(copts, redlock.WithNodeTimeout(s.NodeTimeout))
	}
	if s.ReleaseTimeout > 0 {
		copts = append(copts, redlock.WithReleaseTimeout(s.ReleaseTimeout))
	}
	if p.Quar {
		copts = append(copts, redlock.WithRestartQuarantine(0))
	}
	lopts := []redlock.LockOption{redlock.WithTTL(p.TTL)}
	if s.LockDelay > 0 {
		lopts = append(lopts, redlock.WithLockDelay(s.LockDelay))
	}
	if p.Fencing {
		lopts = append(lopts, redlock.WithFencing())
	}
	if s.Backoff > 0 {
		lopts = append(lopts, redlock.WithRetryBackoff(s.Backoff, s.Backoff))
	}
	if s.Fair {
		lopts = append(lopts, redlock.WithFairQueue())
	}
	w.build = func(c int, ns []redlock.Node, q []redlock.ClientOption) generation {
		cl, err := redlock.New(ns, append(slices.Clip(copts), q...)...)
		if err != nil {
			panic(err)
		}
		g := generation{client: cl, mutexes: make([]*redlock.Mutex, 1), rws: make([][2]*redlock.Mutex, 1), sems: make([]*redlock.Mutex, 1)}
		switch s.Shape.Kind {
		case MutexLock:
			g.mutexes[0], err = cl.NewMutex(scriptName, lopts...)
		case RWLock:
			g.rws[0][0], g.rws[0][1], err = cl.NewRWMutex(scriptName, lopts...)
		case SemaphoreLock:
			g.sems[0], err = cl.NewSemaphore(scriptName, s.Shape.K, lopts...)
		default:
			err = fmt.Errorf("sim: a script cannot run shape %v", s.Shape)
		}
		if err != nil {
			panic(err)
		}
		return g
	}
	for c := range p.Clients {
		reg := &acquisitions{ids: map[string]int{}}
		names := &waiterNames{client: c, to: map[string]string{}, from: map[string]string{}}
		var ls []*link
		var sns []simNode
		for m := range p.Masters {
			l := &link{w: w, client: c, master: m, addr: m, m: w.masters[m], rngs: map[int]*rand.Rand{}, released: map[string]time.Time{}}
			ls = append(ls, l)
			sns = append(sns, &scriptLink{link: l, script: &s, reg: reg, names: names, seq: map[callKey]int{}})
		}
		w.links = append(w.links, ls)
		w.simNodes = append(w.simNodes, sns)
	}
	if s.Configs != nil {
		w.change = s.change(p)
		w.initRecords()
	}
	for c := range p.Clients {
		ns, q := w.nodes(c, 0)
		w.add(w.build(c, ns, q))
	}
	time.Sleep(p.TTL) // the masters have been up a while
	for c := range w.clients {
		if !slices.Contains(s.Late, c) {
			w.warmUp(c)
		}
	}
	time.Sleep(time.Until(w.t0))
	var wg sync.WaitGroup
	wg.Go(w.faults)
	wg.Go(func() {
		for _, in := range s.Installs {
			if d := time.Until(w.t0.Add(in.At)); d > 0 {
				time.Sleep(d)
			}
			w.install(in.Master, in.Epoch-1)
			if in.Rollback {
				w.masters[in.Master].Restart(true)
				w.log("m%d restarts with its keys: its epoch %d record is now of another run", in.Master, in.Epoch)
			}
		}
	})
	wg.Go(func() {
		for _, at := range s.Checkpoints {
			if d := time.Until(w.t0.Add(at)); d > 0 {
				time.Sleep(d)
			}
			w.checkpoint()
		}
	})
	for c := range p.Clients {
		var ops []ScriptOp
		for _, o := range s.Ops {
			if o.Client == c {
				ops = append(ops, o)
			}
		}
		wg.Go(func() { w.scripted(c, ops) })
	}
	wg.Wait()
	w.finish()
	return w.result()
}

// priorCounter leaves m holding lock name's fencing counter at
// token, written by its current run, as a lease granted token would have
// left it: the lease's acquire, its write-back, its release (nothing else
// stays: the key is deleted, so no release guard is set).
func priorCounter(m *memnode.Node, name string, token int64, ttl time.Duration) {
	ctx := context.Background()
	const value = "prior-lease"
	ok, err := m.Acquire(ctx, name, value, ttl)
	if err == nil && ok {
		ok, err = m.RaiseFence(ctx, name, value, token)
	}
	if err == nil && ok {
		ok, err = m.Release(ctx, name, value, 0)
	}
	if err != nil || !ok {
		panic(fmt.Sprintf("sim: the prior counter on %s: %v, %v", m.Addr(), ok, err))
	}
}

// scripted runs client c's operations.
func (w *world) scripted(c int, ops []ScriptOp) {
	p := w.plan
	sh := p.shape(0)
	var lease *redlock.Lease
	var h *hold
	stalled := false
	ctxFor := func(d time.Duration) (context.Context, context.CancelFunc) {
		return context.WithTimeout(withWorker(context.Background(), c*64), d)
	}
	unlock := func() {
		if lease.Valid() && time.Now().Before(lease.Until()) {
			w.covered(h, sh, lease)
		}
		w.stopped(h, lease)
		ctx, cancel := ctxFor(time.Second)
		err := lease.Unlock(ctx)
		cancel()
		w.checkErr("unlock", err, unlockErrs)
		w.log("c%d released %s: %v", c, h.name, errName(err))
		lease, h, stalled = nil, nil, false
	}
	for _, op := range ops {
		if d := time.Until(w.t0.Add(op.At)); d > 0 {
			time.Sleep(d)
		}
		switch {
		case op.Kind == OpWait && lease == nil:
			// A waiting Lock call, until it gets the lock or the script
			// ends (history.Granted judges how long it waited).
			ctx, cancel := context.WithDeadline(withWorker(context.Background(), c*64), w.t0.Add(p.Duration))
			w.record(history.Event{Client: c, Kind: history.Waiting, At: w.at(time.Now()), Lock: p.Names[0], Within: w.wait})
			g := w.current(c)
			l, err := g.mutexes[0].Lock(ctx)
			cancel()
			w.tried("lock", err)
			if err != nil {
				w.record(history.Event{Client: c, Kind: history.GaveUp, At: w.at(time.Now()), Lock: p.Names[0], Err: err.Error()})
				w.log("c%d: waiting lock failed: %v", c, err)
				break
			}
			lease, h, stalled = l, &hold{depth: 1, cfg: g.cfg}, false
			w.acquired(c, 0, h, lease)
			w.log("c%d acquired %s (waiting) until +%v fence %d", c, h.name, lease.Until().Sub(h.start), h.fence)
		case op.Kind == OpReload:
			w.reload(c, op.Epoch-1)
		case op.Kind == OpLock && lease == nil:
			g := w.current(c)
			try := g.mutexes[0].TryLock
			write := false
			switch sh.Kind {
			case RWLock:
				try, write = g.rws[0][0].TryLock, c == 0
				if write {
					try = g.rws[0][1].TryLock
				}
			case SemaphoreLock:
				try = g.sems[0].TryLock
			}
			ctx, cancel := ctxFor(time.Second)
			l, err := try(ctx)
			cancel()
			w.tried("lock", err)
			if err != nil {
				w.log("c%d: lock failed: %v", c, err)
				break
			}
			lease, h, stalled = l, &hold{write: write, depth: 1, cfg: g.cfg}, false
			w.acquired(c, 0, h, lease)
			w.log("c%d acquired %s%s until +%v fence %d", c, h.name, h.kind(sh), lease.Until().Sub(h.start), h.fence)
		case lease == nil:
		case op.Kind == OpWrite:
			w.write(h, 0, lease, lease.Until())
		case op.Kind == OpStall && lease.Valid():
			w.record(history.Event{Client: c, Kind: history.Paused, At: w.at(time.Now()), Lock: h.name, Token: lease.Token()})
			w.log("c%d stalls holding %s", c, h.name)
			stalled = true
		case op.Kind == OpStallWrite && stalled:
			w.write(h, 0, nil, lease.Until())
			stalled = false
		case op.Kind == OpExtend:
			ctx, cancel := ctxFor(time.Second)
			err := lease.Extend(ctx)
			cancel()
			w.checkErr("extend", err, extendErrs)
			w.log("c%d extended %s: %v", c, h.name, err)
		case op.Kind == OpUnlock:
			unlock()
		}
		w.checkStats(c)
	}
	if lease != nil {
		if d := time.Until(w.t0.Add(p.Duration)); d > 0 {
			time.Sleep(d)
		}
		unlock()
	}
}

// acquisitions numbers a client's acquisitions (their values, or holds'
// IDs) in the order they first reach a node; its links share it.
type acquisitions struct {
	mu  sync.Mutex
	ids map[string]int
}

// of returns id's number, numbering it if it is an acquire's (else -1).
func (a *acquisitions) of(id string, acquire bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.ids[id]
	if !ok {
		if !acquire {
			return -1
		}
		n = len(a.ids)
		a.ids[id] = n
	}
	return n
}

type callKey struct {
	kind    CallKind
	attempt int
}

// scriptLink is a link whose calls of the script's lock go as the script
// says; the rest (a master's runs, the history's late-acquire
// bookkeeping) is link's, but for the pool, which keeps one connection.
type scriptLink struct {
	*link
	script *Script
	reg    *acquisitions
	names  *waiterNames
	mu     sync.Mutex
	seq    map[callKey]int
	idle   bool // the pool's idle connection
}

var (
	_ redlock.FencingNode = (*scriptLink)(nil)
	_ redlock.ShapeNode   = (*scriptLink)(nil)
	_ redlock.QueueNode   = (*scriptLink)(nil)
)

// take takes the idle connection, or dials a new one; it reports false
// when the dial times out (the master is paused with its accept queue
// full). A script's link keeps at most one idle connection, as the model
// does (a go-redis pool may keep more, and which calls of a warm-up left
// two behind is the Go scheduler's choice): a call that needs a
// connection while another call holds it dials.
func (l *scriptLink) take() bool {
	full := l.w.backlogFull(l.master)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idle {
		l.idle = false
		return true
	}
	return !full
}

// put gives a call's connection back (at most one stays idle), or
// discards it when the call ended without its reply.
func (l *scriptLink) put(broken bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !broken {
		l.idle = true
	}
}

// steer returns what the script says of the next call of kind for the
// acquisition attempt (-1: not the script's lock; the zero ScriptCall).
func (l *scriptLink) steer(kind CallKind, attempt int) ScriptCall {
	if attempt < 0 {
		return ScriptCall{}
	}
	l.mu.Lock()
	k := callKey{kind, attempt}
	seq := l.seq[k]
	l.seq[k]++
	l.mu.Unlock()
	for _, c := range l.script.Calls {
		if c.Client == l.client && c.Master == l.master && c.Kind == kind && c.Attempt == attempt && c.Seq == seq {
			return c
		}
	}
	return ScriptCall{}
}

// attempt returns the acquisition a call of key for id belongs to.
func (l *scriptLink) attempt(key, id string, acquire bool) int {
	if key != scriptName {
		return -1
	}
	return l.reg.of(id, acquire)
}

func (l *scriptLink) call(ctx context.Context, sc ScriptCall, f func(ctx context.Context) reply) reply {
	if ctx.Err() != nil {
		return reply{err: l.unsent(ctx)}
	}
	if l.w.isCut(l.client, l.master) || sc.DropRequest {
		<-ctx.Done() // a black hole: the caller waits for its deadline
		return reply{err: l.ctxErr(ctx)}
	}
	if sc.DialTimeout || !l.take() {
		return l.dialTimedOut(ctx)
	}
	apply := time.Duration(0)
	if sc.ApplyAt > 0 {
		apply = time.Until(l.w.t0.Add(sc.ApplyAt))
	}
	replyDelay := func() time.Duration {
		if sc.ReplyAt > 0 {
			return time.Until(l.w.t0.Add(sc.ReplyAt))
		}
		return 0
	}
	r, ok := l.exchange(ctx, f, apply, replyDelay, sc.DropReply, func() {})
	l.put(!ok) // a call that ends without its reply discards its connection
	return r
}

func (l *scriptLink) Info(ctx context.Context) (redlock.ServerInfo, error) {
	r := l.call(ctx, ScriptCall{}, func(ctx context.Context) reply {
		info, err := l.m.Info(ctx)
		return reply{info: info, err: err}
	})
	return r.info, r.err
}

func (l *scriptLink) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	sent := time.Now()
	l.w.sending(l.client, key, value)
	r := l.call(ctx, l.steer(CallAcquire, l.attempt(key, value, true)), func(ctx context.Context) reply {
		ok, err := l.m.Acquire(ctx, key, value, ttl)
		l.afterAcquire(key, value, sent, ok, err)
		return reply{ok: ok, err: err}
	})
	return r.ok, r.err
}

func (l *scriptLink) AcquireFenced(ctx context.Context, key, value string, ttl time.Duration) (bool, int64, error) {
	sent := time.Now()
	l.w.sending(l.client, key, value)
	r := l.call(ctx, l.steer(CallAcquire, l.attempt(key, value, true)), func(ctx context.Context) reply {
		ok, fence, err := l.m.AcquireFenced(ctx, key, value, ttl)
		l.afterAcquire(key, value, sent, ok, err)
		return reply{ok: ok, fence: fence, err: err}
	})
	return r.ok, r.fence, r.err
}

func (l *scriptLink) RaiseFence(ctx context.Context, key, value string, token int64) (bool, error) {
	r := l.call(ctx, l.steer(CallRaise, l.attempt(key, value, false)), func(ctx context.Context) reply {
		ok, err := l.m.RaiseFence(ctx, key, value, token)
		return reply{ok: ok, err: err}
	})
	return r.ok, r.err
}

func (l *scriptLink) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	r := l.call(ctx, l.steer(CallExtend, l.attempt(key, value, false)), func(ctx context.Context) reply {
		ok, err := l.m.Extend(ctx, key, value, ttl)
		return reply{ok: ok, err: err}
	})
	return r.ok, r.err
}

func (l *scriptLink) Release(ctx context.Context, key, value string, guard time.Duration) (bool, error) {
	r := l.call(ctx, l.steer(CallRelease, l.attempt(key, value, false)), func(ctx context.Context) reply {
		ok, err := l.m.Release(ctx, key, value, guard)
		if err == nil {
			l.unlinedBy(key, value)
		}
		if err == nil && !ok {
			l.noteReleased(key + "\x00" + value)
		}
		return reply{ok: ok, err: err}
	})
	if refusedUnsent(r) {
		l.w.refused(l.link, value)
	}
	return r.ok, r.err
}

func (l *scriptLink) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	sent := time.Now()
	r := l.call(ctx, l.steer(CallAcquire, l.attempt(key, h.ID, true)), func(ctx context.Context) reply {
		n, err := l.m.AcquireHold(ctx, key, h, ttl)
		mem := wire.Member(h.Group, h.ID)
		l.afterAcquireOf(key, mem, h.ID, func() bool { return l.holds(key, mem) }, sent, n > 0, err)
		return reply{n: n, err: err}
	})
	return r.n, r.err
}

func (l *scriptLink) ExtendHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (bool, error) {
	r := l.call(ctx, l.steer(CallExtend, l.attempt(key, h.ID, false)), func(ctx context.Context) reply {
		ok, err := l.m.ExtendHold(ctx, key, h, ttl)
		return reply{ok: ok, err: err}
	})
	return r.ok, r.err
}

func (l *scriptLink) ReleaseHold(ctx context.Context, key string, h redlock.Hold, guard time.Duration) (bool, error) {
	r := l.call(ctx, l.steer(CallRelease, l.attempt(key, h.ID, false)), func(ctx context.Context) reply {
		ok, err := l.m.ReleaseHold(ctx, key, h, guard)
		if err == nil && !ok {
			l.noteReleased(key + "\x00" + wire.Member(h.Group, h.ID))
		}
		return reply{ok: ok, err: err}
	})
	if refusedUnsent(r) {
		l.w.refused(l.link, h.ID)
	}
	return r.ok, r.err
}

// noteReleased records that a release of what (key and value, or hold)
// reached the master without finding it, as link does: an acquire of it
// that applies later is overtaken.
func (l *scriptLink) noteReleased(what string) {
	l.link.mu.Lock()
	defer l.link.mu.Unlock()
	if _, ok := l.released[what]; !ok {
		l.released[what] = time.Now()
	}
}
