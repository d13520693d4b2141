package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/reconfig"
	"github.com/quorumlock/quorumlock/redlock"
)

// Outcome is a schedule's verdict.
type Outcome int

// Outcomes: a schedule passes, fails (an invariant broke while every
// documented assumption held), or is classified (it broke an assumption:
// its safety invariants are not judged, its other invariants are).
const (
	Pass Outcome = iota
	Classified
	Fail
)

func (o Outcome) String() string { return [...]string{"pass", "classified", "FAIL"}[o] }

// Result is what one schedule did.
type Result struct {
	Plan       Plan
	Outcome    Outcome
	Violations []string // invariants broken
	Broken     []string // documented assumptions the schedule broke
	Unsafe     []string // safety violations seen in a classified schedule
	// Known: fencing violations after a master lost its counters while the
	// quarantine was on: an open library bug (docs/simulation.md), counted
	// apart so that CI stays green; StrictFencing makes them failures.
	Known    []string
	Coverage [numKinds]int
	Holds    int // leases granted
	Attempts int
	// Queued counts fair acquires sent (AcquireQueued) and Notified the
	// release notifications delivered to the clients (QueueNode.Watch, after the
	// links' weather), Lost those the links dropped.
	Queued, Notified, Lost int
	// Goroutines: most goroutines seen in the process while it ran.
	Goroutines int
	Digest     uint64 // hash of the history on the virtual clock
	History    []string
	// Events is the history the checks judged.
	Events []history.Event
}

// hold is one lease's life, on the bubble's clock, for the log and the
// digest (the checks judge the history's events).
type hold struct {
	idx        int
	client     int
	name       string
	token      string
	start, end time.Time // [acquired, min(Until, stop)]
	fence      int64
	write      bool   // RWLock: a write lease (a read lease otherwise)
	owner      string // ReentrantLock: the lease's owner
	depth      int    // ReentrantLock: 1 for an outer lease, 2 for a re-entry inside it
	cfg        int    // a Change's configuration the client held it on (index)
}

type world struct {
	plan    Plan
	t0      time.Time
	masters []*memnode.Node
	links   [][]*link // [client][master]
	clients []*redlock.Client
	mutexes [][]*redlock.Mutex    // [client][name]: a mutex, or a reentrant mutex
	rws     [][][2]*redlock.Mutex // [client][name] for RWLock names: the reader and the writer
	sems    [][]*redlock.Mutex    // [client][name] for SemaphoreLock names
	stores  []*memnode.FencedStore

	deliveries deliveries
	// change: the plan's Change (or a Script's Configs) as it runs (nil
	// without one).
	change *changeRun
	// simNodes: each client's node for each master ([client][master]: a
	// link, or a script's link); build makes a client over nodes.
	simNodes [][]simNode
	build    func(c int, ns []redlock.Node, q []redlock.ClientOption) generation
	// wait is a script's bound on its waiting Lock calls (Script.Wait).
	wait time.Duration

	mu    sync.Mutex
	cut   [][]int     // [client][master] > 0: cut
	full  []time.Time // [master]: in a BacklogPause, its accept queue is full from then (zero: not)
	holds []*hold
	// events is the history the safety invariants judge (package history),
	// on the bubble's clock as durations since t0.
	events   []history.Event
	viol     []string // harness checks: errors, bounds, Close
	coverage [numKinds]int
	attempts int
	// queued, notified, lost: see Result.
	queued, notified, lost int
	maxG                   int // most goroutines seen (process-wide)
	hist                   []string
	// sent: a script's key values, by the client that sent each and
	// when it first did (RunScript; nil in a Plan's run).
	sent map[string]sentBy
}

func (w *world) cover(k FaultKind) {
	w.mu.Lock()
	w.coverage[k]++
	w.mu.Unlock()
}

// count adds one to a counter of w (queued, notified, lost).
func (w *world) count(n *int) {
	w.mu.Lock()
	*n++
	w.mu.Unlock()
}

func (w *world) isCut(c, m int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cut[c][m] > 0
}

func (w *world) violate(format string, args ...any) {
	w.mu.Lock()
	w.viol = append(w.viol, fmt.Sprintf("%v: ", time.Since(w.t0))+fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

func (w *world) log(format string, args ...any) {
	w.mu.Lock()
	w.hist = append(w.hist, fmt.Sprintf("%12v ", time.Since(w.t0))+fmt.Sprintf(format, args...))
	w.mu.Unlock()
}

// StrictFencing makes fencing violations after a counter loss under the
// restart quarantine failures rather than Result.Known. On by default since
// the fencing epoch fixed them; off only to compare with older results.
var StrictFencing atomic.Bool

func init() { StrictFencing.Store(true) }

// Run runs plan's schedule and checks it. It must run inside a synctest
// bubble, and never concurrently with a run that expects other knobs.
func Run(plan Plan) Result {
	// The workload starts at t0, after the masters have been up for a while
	// and every client met every master (t0 is never written again: the
	// warm-up's own stragglers read it).
	w := &world{plan: plan, t0: time.Now().Add(plan.TTL + plan.Delay + 2*time.Second)}
	w.cut = make([][]int, plan.Clients)
	for c := range w.cut {
		w.cut[c] = make([]int, plan.Masters)
	}
	for m := range plan.Masters {
		w.masters = append(w.masters, memnode.New(fmt.Sprintf("m%d", m)))
	}
	w.stores = make([]*memnode.FencedStore, len(plan.Names))
	for i := range w.stores {
		w.stores[i] = &memnode.FencedStore{}
	}
	w.full = make([]time.Time, plan.Masters)
	for c := range plan.Clients {
		var ls []*link
		for m := range plan.Masters {
			ls = append(ls, &link{w: w, client: c, master: m, addr: m, m: w.masters[m], rngs: map[int]*rand.Rand{}, released: map[string]time.Time{}})
		}
		// A server listed twice: its second address, last in the list.
		for _, a := range plan.aliases() {
			ls = append(ls, &link{w: w, client: c, master: a.Master, addr: len(ls), alias: true, from: w.t0.Add(a.At),
				m: w.masters[a.Master], rngs: map[int]*rand.Rand{}, released: map[string]time.Time{}})
		}
		w.links = append(w.links, ls)
		sns := make([]simNode, 0, len(ls))
		for _, l := range ls { // the masters', then the aliases'
			sns = append(sns, l)
		}
		w.simNodes = append(w.simNodes, sns)
	}
	w.build = w.newClient
	if plan.Change != nil {
		w.change = w.newChange() // the clients' nodes are its first configuration's
	}
	for c := range plan.Clients {
		ns, q := w.nodes(c, 0)
		w.add(w.build(c, ns, q))
	}
	// Masters have been up for a while before the clients start.
	time.Sleep(plan.TTL + plan.Delay)
	if w.change != nil {
		w.initRecords()
	}
	// Each client meets every master (reads its identity) one after the
	// other, so that no worker's first call races another's for it. A late
	// client does so when it starts.
	for c := range w.clients {
		if _, late := plan.late(c); !late {
			w.warmUp(c)
		}
	}
	time.Sleep(time.Until(w.t0))

	var wg sync.WaitGroup
	wg.Go(w.faults)
	if w.change != nil {
		wg.Go(w.changer)
	}
	for c := range plan.Clients {
		start := func() {
			for k := range plan.Workers {
				rng := rand.New(rand.NewPCG(plan.Seed, uint64(100000+c*64+k)))
				wg.Go(func() { w.worker(c, c*64+k, rng) })
			}
		}
		if at, late := plan.late(c); late {
			wg.Go(func() {
				time.Sleep(time.Until(w.t0.Add(at)))
				w.warmUp(c)
				start()
			})
			continue
		}
		start()
	}
	wg.Wait()
	w.finish()
	return w.result()
}

// warmUp is client c's first contact with every master: one lock and
// unlock, before its workers start.
func (w *world) warmUp(c int) {
	mu, err := w.current(c).client.NewMutex("warm-up", redlock.WithTTL(w.plan.TTL))
	if err != nil {
		panic(err)
	}
	if lease, err := mu.TryLock(context.Background()); err == nil {
		_ = lease.Unlock(context.Background())
	}
	w.checkStats(c)
}

// generation is a client with its locks, one per name (a mutex or
// reentrant mutex, an RWLock's reader and writer, a semaphore), as the
// world's workers use them.
type generation struct {
	client  *redlock.Client
	mutexes []*redlock.Mutex
	rws     [][2]*redlock.Mutex
	sems    []*redlock.Mutex
	cfg     int // a Change's configuration (index), 0 without one
}

// nodes is what client c lists: every master's node (and an alias's), or
// with a Change the nodes of the masters of its configuration cfg, each
// carrying cfg's record (configured) unless the change has no records;
// and cfg's quorum (reconfig.QuorumOptions), none without a Change.
func (w *world) nodes(c, cfg int) ([]redlock.Node, []redlock.ClientOption) {
	var ns []redlock.Node
	if w.change == nil {
		for _, n := range w.simNodes[c] {
			ns = append(ns, n)
		}
		return ns, nil
	}
	conf := w.change.cfgs[cfg]
	for _, m := range w.change.index(conf) {
		if w.change.unchecked {
			ns = append(ns, w.simNodes[c][m])
			continue
		}
		ns = append(ns, configured{simNode: w.simNodes[c][m], rec: conf.Record()})
	}
	return ns, reconfig.QuorumOptions(conf)
}

// newClient builds client c's redlock.Client over ns and its locks, with
// the plan's options.
func (w *world) newClient(c int, ns []redlock.Node, q []redlock.ClientOption) generation {
	plan := w.plan
	copts := []redlock.ClientOption{
		redlock.WithNodeTimeout(nodeTimeout), redlock.WithReleaseTimeout(releaseTimeout),
		redlock.WithDriftFactor(plan.Drift), redlock.WithMaxInFlight(plan.MaxIn),
	}
	if plan.Quar {
		copts = append(copts, redlock.WithRestartQuarantine(0))
	}
	lopts := []redlock.LockOption{redlock.WithTTL(plan.TTL), redlock.WithLockDelay(plan.Delay),
		redlock.WithRetryBackoff(retryMin, retryMax)}
	if plan.Fencing {
		lopts = append(lopts, redlock.WithFencing())
	}
	if plan.Renew {
		lopts = append(lopts, redlock.WithAutoRenew(0))
	}
	cl, err := redlock.New(ns, append(copts, q...)...)
	if err != nil {
		panic(err)
	}
	g := generation{client: cl, mutexes: make([]*redlock.Mutex, len(plan.Names)),
		rws: make([][2]*redlock.Mutex, len(plan.Names)), sems: make([]*redlock.Mutex, len(plan.Names))}
	for i, name := range plan.Names {
		var err error
		switch sh := plan.shape(i); sh.Kind {
		case MutexLock:
			o := lopts
			if plan.Fair {
				o = append(slices.Clip(lopts), redlock.WithFairQueue())
			}
			g.mutexes[i], err = cl.NewMutex(name, o...)
		case ReentrantLock:
			g.mutexes[i], err = cl.NewReentrant(name, ownerName(plan.Owners[c]), lopts...)
		case RWLock:
			o := lopts
			if sh.Prefer {
				o = append(slices.Clip(lopts), redlock.WithWriterPreference())
			}
			g.rws[i][0], g.rws[i][1], err = cl.NewRWMutex(name, o...)
		case SemaphoreLock:
			g.sems[i], err = cl.NewSemaphore(name, sh.K, lopts...)
		}
		if err != nil {
			panic(err)
		}
	}
	return g
}

// add appends the next client's generation (building the world).
func (w *world) add(g generation) {
	w.clients = append(w.clients, g.client)
	w.mutexes = append(w.mutexes, g.mutexes)
	w.rws = append(w.rws, g.rws)
	w.sems = append(w.sems, g.sems)
}

// current returns client c's client and its locks now (a Change's reload
// replaces them).
func (w *world) current(c int) generation {
	w.mu.Lock()
	defer w.mu.Unlock()
	g := generation{client: w.clients[c], mutexes: w.mutexes[c], rws: w.rws[c], sems: w.sems[c]}
	if w.change != nil {
		g.cfg = w.change.loaded[c]
	}
	return g
}

// backlogFull reports whether master m is paused with its accept queue
// full (a BacklogPause past its Delay): new connections time out.
func (w *world) backlogFull(m int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.full[m].IsZero() && !time.Now().Before(w.full[m])
}

// faults applies the plan's faults at their times and heals everything at
// the end of the workload.
func (w *world) faults() {
	type ev struct {
		at time.Duration
		do func()
	}
	var evs []ev
	var strobes sync.WaitGroup // ClockStrobe's goroutines, ended by the workload's end
	defer strobes.Wait()
	p := w.plan
	for _, f := range p.Faults {
		m := w.masters[f.Master]
		end := min(f.At+f.Dur, p.Duration)
		switch f.Kind {
		case MasterPause:
			var resume func()
			evs = append(evs, ev{f.At, func() { resume = m.Pause() }}, ev{end, func() { resume() }})
		case BacklogPause:
			var resume func()
			setFull := func(at time.Time) {
				w.mu.Lock()
				w.full[f.Master] = at
				w.mu.Unlock()
			}
			evs = append(evs, ev{f.At, func() { resume = m.Pause(); setFull(time.Now().Add(f.Delay)) }},
				ev{end, func() { setFull(time.Time{}); resume() }})
		case MasterCrash:
			evs = append(evs, ev{f.At, func() {
				m.Fail(fmt.Errorf("sim: m%d down: %w", f.Master, redlock.ErrNotSent))
				w.record(history.Event{Kind: history.KeysLost, At: w.at(time.Now()), Node: f.Master})
			}}, ev{end, func() { m.Restart(false); m.Fail(nil) }})
		case CrashAOFTail:
			// The last fsync, then the power cut: down (connections
			// refused) until the host is back, with the keyspace as of the
			// last fsync (and its clock stepped, if Jump says so, before
			// anything reaches it).
			var synced time.Time
			evs = append(evs, ev{f.At - f.Delay, func() { m.Checkpoint(); synced = time.Now() }},
				ev{f.At, func() {
					m.Fail(fmt.Errorf("sim: m%d down: %w", f.Master, redlock.ErrNotSent))
					w.record(history.Event{Kind: history.KeysLost, At: w.at(time.Now()), Node: f.Master})
				}}, ev{end, func() {
					m.RestartFromCheckpoint()
					w.restoredLines(f.Master, synced)
					if f.Jump > 0 {
						_ = m.SkewClock(f.Jump, 1)
					}
					m.Fail(nil)
				}})
		case BootClockStep:
			// Refused while the host boots, so that no command lands
			// between the restart and the step (a key set on the clock
			// before the step would expire early: a broken assumption,
			// not this fault).
			evs = append(evs, ev{f.At, func() {
				m.Fail(fmt.Errorf("sim: m%d booting: %w", f.Master, redlock.ErrNotSent))
				m.Restart(false)
				_ = m.SkewClock(f.Jump, 1)
				m.Fail(nil)
				w.record(history.Event{Kind: history.KeysLost, At: w.at(time.Now()), Node: f.Master})
			}})
		case ClockStrobe:
			evs = append(evs, ev{f.At, func() { strobes.Go(func() { w.strobe(m, f.Jump, f.Delay, w.t0.Add(end)) }) }})
		case DiskFull:
			evs = append(evs, ev{f.At, func() { m.SetDiskFull(true) }}, ev{end, func() { m.SetDiskFull(false) }})
		case RestartKeep:
			evs = append(evs, ev{f.At, func() {
				m.Restart(true)
				if w.change != nil {
					w.repair(f.Master)
				}
			}})
		case RestartEmpty:
			evs = append(evs, ev{f.At, func() {
				m.Restart(false)
				if w.change != nil {
					w.repair(f.Master)
				}
				w.record(history.Event{Kind: history.KeysLost, At: w.at(time.Now()), Node: f.Master})
			}})
		case ClockJump:
			evs = append(evs, ev{f.At, func() { _ = m.SkewClock(f.Jump, 1) }})
		case DriftWithin, DriftBeyond:
			evs = append(evs, ev{f.At, func() { _ = m.SkewClock(0, f.Rate) }}, ev{p.Duration, func() { _ = m.SkewClock(0, 1) }})
		case Partition, Isolate:
			set := func(d int) {
				var healed []*link
				w.mu.Lock()
				cut := func(c, m int) {
					if w.cut[c][m] += d; w.cut[c][m] == 0 {
						for _, l := range w.links[c] { // an alias's too
							if l.master == m {
								healed = append(healed, l)
							}
						}
					}
				}
				if f.Kind == Isolate {
					for c := range p.Clients {
						cut(c, f.Master)
					}
				} else {
					for _, mm := range f.Cut {
						cut(f.Client, mm)
					}
				}
				w.mu.Unlock()
				for _, l := range healed {
					l.healed()
				}
			}
			evs = append(evs, ev{f.At, func() { set(1) }}, ev{end, func() { set(-1) }})
		case SlowLink:
			l := w.links[f.Client][f.Master]
			evs = append(evs, ev{f.At, func() { l.setExtra(f.Delay) }}, ev{end, func() { l.setExtra(0) }})
		}
		w.cover(f.Kind)
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return int(a.at - b.at) })
	for _, e := range evs {
		if d := time.Until(w.t0.Add(e.at)); d > 0 {
			time.Sleep(d)
		}
		e.do()
	}
}

// strobe flips m's clock between +offset and -offset (from real time)
// every period until end, then sets it back.
func (w *world) strobe(m *memnode.Node, offset, period time.Duration, end time.Time) {
	_ = m.SkewClock(offset, 1)
	at := offset
	for time.Now().Add(period).Before(end) {
		time.Sleep(period)
		_ = m.SkewClock(-2*at, 1)
		at = -at
	}
	_ = m.SkewClock(-at, 1)
}

var (
	lockErrs   = []error{redlock.ErrNotObtained}
	extendErrs = []error{redlock.ErrLockLost, redlock.ErrNotExtended, redlock.ErrReleased, redlock.ErrClosed}
	unlockErrs = []error{redlock.ErrLockLost, redlock.ErrNotReleased, redlock.ErrReleased}
)

// tried counts a lock attempt and checks its error (checkErr).
func (w *world) tried(op string, err error) {
	w.mu.Lock()
	w.attempts++
	w.mu.Unlock()
	w.checkErr(op, err, lockErrs)
}

func (w *world) checkErr(op string, err error, allowed []error) {
	if err == nil {
		return
	}
	if w.change != nil && errors.Is(err, redlock.ErrConfigStale) {
		return // a master refused the client's configuration: it loads the newest (staleRefusal)
	}
	if len(w.plan.aliases()) > 0 && errors.Is(err, redlock.ErrInvalidConfig) {
		// A server found behind two addresses: the client refuses new
		// work (its releases still go out: checked after Close).
		return
	}
	for _, a := range allowed {
		if errors.Is(err, a) {
			return
		}
	}
	w.violate("%s returned an undocumented error: %v", op, err)
}

// maxGoroutines bounds the process's goroutines while schedules run: the
// largest world (4 clients, 5 masters, 16 calls in flight per master, each
// call with its network goroutine) needs about 700, and a few worlds run at
// once. A leak per operation would cross it; synctest also fails a bubble
// that ends with goroutines left.
const maxGoroutines = 4000

func (w *world) checkStats(c int) {
	g := runtime.NumGoroutine()
	w.mu.Lock()
	w.maxG = max(w.maxG, g)
	w.mu.Unlock()
	{
		if g > maxGoroutines {
			w.violate("%d goroutines in the process, bound %d", g, maxGoroutines)
		}
	}
	st := w.current(c).client.Stats()
	for m := range st.InFlight {
		if st.InFlight[m] > w.plan.MaxIn {
			w.violate("c%d: %d calls in flight on m%d, cap %d", c, st.InFlight[m], m, w.plan.MaxIn)
		}
	}
}

// sleep waits d or until done closes; it reports whether done closed.
func sleep(d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false
	case <-done:
		return true
	}
}

func (w *world) worker(c, id int, rng *rand.Rand) {
	p := w.plan
	end := w.t0.Add(p.Duration)
	sleep(time.Duration(1+rng.Int64N(int64(10*time.Millisecond))), nil) // no two workers start together
	for time.Now().Before(end) {
		ni := rng.IntN(len(p.Names))
		g := w.current(c)
		tryLock, lock := g.mutexes[ni].TryLock, g.mutexes[ni].Lock
		sh := p.shape(ni)
		write := false
		switch sh.Kind {
		case RWLock:
			rw := g.rws[ni]
			tryLock, lock = rw[0].TryLock, rw[0].Lock
			if write = rng.IntN(3) == 0; write {
				tryLock, lock = rw[1].TryLock, rw[1].Lock
			}
		case SemaphoreLock:
			tryLock, lock = g.sems[ni].TryLock, g.sems[ni].Lock
		}
		timeout := time.Duration(300e6 + rng.Int64N(1000e6))
		if p.CancelP > 0 && rng.Float64() < p.CancelP {
			timeout = time.Duration(1e6 + rng.Int64N(80e6))
			w.cover(CallerCancel)
		}
		if p.DoPanicP > 0 && sh.Kind == MutexLock && rng.Float64() < p.DoPanicP {
			w.doPanic(c, id, ni, timeout, rng)
			w.checkStats(c)
			continue
		}
		ctx, cancel := context.WithTimeout(withWorker(context.Background(), id), timeout)
		var lease *redlock.Lease
		var err error
		if p.LockRetry {
			lease, err = lock(ctx) // retries with redlock's own (unseeded) jitter
		} else {
			lease, err = tryLock(ctx)
		}
		cancel()
		w.tried("lock", err)
		w.staleRefusal(c, err)
		w.checkStats(c)
		if err != nil {
			// Back off on the schedule's stream (not redlock's jitter).
			sleep(p.TTL/50+time.Duration(rng.Int64N(int64(p.TTL/5))), nil)
			continue
		}
		w.holdLease(c, id, ni, &hold{write: write, depth: 1, cfg: g.cfg}, lease, rng)
		w.checkStats(c)
		sleep(time.Duration(rng.Int64N(10e6)), nil)
	}
}

// doPanicked is what a DoPanic function panics with.
type doPanicked struct{}

// doPanic runs Mutex.Do with a function that holds the lease a while and
// panics; the worker recovers the panic, as net/http and job runners do.
// Do must have released the lease when it returns: a lease still valid
// after Do returned is held (and renewed) by nobody's code, and its key
// outlives the client's work.
func (w *world) doPanic(c, id, ni int, timeout time.Duration, rng *rand.Rand) {
	p := w.plan
	holdFor := time.Duration(rng.Int64N(int64(p.TTL)))
	backoff := p.TTL/50 + time.Duration(rng.Int64N(int64(p.TTL/5)))
	ctx, cancel := context.WithTimeout(withWorker(context.Background(), id), timeout)
	defer cancel()
	g := w.current(c)
	h := &hold{depth: 1, cfg: g.cfg}
	var lease *redlock.Lease
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(doPanicked); !ok {
					panic(r)
				}
			}
		}()
		return g.mutexes[ni].Do(ctx, func(fctx context.Context, l *redlock.Lease) error {
			lease = l
			w.mu.Lock()
			w.attempts++
			w.mu.Unlock()
			w.acquired(c, ni, h, l)
			w.cover(DoPanic)
			w.log("c%d acquired %s in Do until +%v fence %d", c, h.name, l.Until().Sub(h.start), h.fence)
			w.write(h, ni, l, l.Until())
			sleep(holdFor, fctx.Done())
			// The work stops here: the lease's interval ends now (or at its
			// validity's end), whatever the release then takes.
			w.stopped(h, l)
			w.log("c%d's Do function on %s panics (context: %v)", c, h.name, context.Cause(fctx))
			panic(doPanicked{})
		})
	}()
	if lease == nil {
		w.tried("do", err)
		sleep(backoff, nil)
		return
	}
	valid := lease.Valid()
	w.log("c%d's Do on %s returned (its function panicked), lease valid: %v", c, h.name, valid)
	w.record(history.Event{Client: c, Kind: history.DoReturned, At: w.at(time.Now()), Lock: h.name, Token: lease.Token(),
		Valid: valid, Until: w.at(lease.Until())})
}

// holdLease records and holds one lease; h carries the shape's details
// (write, depth). A reentrant outer lease may re-enter once while held.
func (w *world) holdLease(c, id, ni int, h *hold, lease *redlock.Lease, rng *rand.Rand) {
	p := w.plan
	sh := p.shape(ni)
	w.acquired(c, ni, h, lease)
	w.log("c%d acquired %s%s until +%v fence %d holds %d%s", c, h.name, h.kind(sh), lease.Until().Sub(h.start), h.fence, lease.Holds(), w.epochNote(h))
	if len(p.aliases()) > 0 && lease.Valid() {
		w.covered(h, sh, lease) // granted by a quorum of servers, not of addresses
	}
	w.write(h, ni, lease, lease.Until())
	if sh.Kind == ReentrantLock && h.depth == 1 && rng.IntN(3) == 0 {
		// Re-enter while holding: the same owner must get in at once.
		ctx, cancel := context.WithTimeout(withWorker(context.Background(), id), time.Duration(1e6+rng.Int64N(300e6)))
		g := w.current(c)
		inner, err := g.mutexes[ni].TryLock(ctx)
		cancel()
		w.checkErr("re-entry", err, lockErrs)
		if err == nil {
			w.holdLease(c, id, ni, &hold{depth: 2, cfg: g.cfg}, inner, rng)
		}
	}

	// How long to hold: briefly, up to the validity's end, or past it with
	// renewals or Extends.
	var holdFor time.Duration
	switch rng.IntN(3) {
	case 0:
		holdFor = time.Duration(rng.Int64N(int64(p.TTL / 4)))
	case 1:
		holdFor = time.Until(lease.Until()) - time.Duration(rng.Int64N(int64(5*time.Millisecond)))
	default:
		holdFor = time.Duration(rng.Int64N(int64(p.TTL * 2)))
	}
	stopAt := time.Now().Add(holdFor)
	done := lease.Done()
	for {
		now := time.Now()
		if !now.Before(stopAt) {
			break
		}
		step := stopAt.Sub(now)
		if !p.Renew && rng.IntN(2) == 0 {
			step = min(step, time.Until(lease.Until())*2/3)
		}
		if sleep(step, done) {
			break
		}
		if !p.Renew && time.Now().Before(stopAt) && lease.Valid() {
			ctx, cancel := context.WithTimeout(withWorker(context.Background(), id), time.Duration(20e6+rng.Int64N(200e6)))
			err := lease.Extend(ctx)
			cancel()
			w.checkErr("extend", err, extendErrs)
			if errors.Is(err, redlock.ErrLockLost) {
				break
			}
		}
		if !lease.Valid() {
			break
		}
	}
	if p.PauseP > 0 && rng.Float64() < p.PauseP && lease.Valid() {
		// A holder checks Valid, then stalls (GC, page faults, a stopped VM)
		// past its validity before its write lands.
		w.cover(ClientPause)
		w.record(history.Event{Client: c, Kind: history.Paused, At: w.at(time.Now()), Lock: h.name, Token: lease.Token()})
		time.Sleep(time.Until(lease.Until()) + time.Duration(rng.Int64N(int64(p.TTL))))
		w.write(h, ni, nil, lease.Until())
	}
	if lease.Valid() && time.Now().Before(lease.Until()) {
		w.covered(h, sh, lease)
	}
	w.stopped(h, lease)
	ctx, cancel := context.WithTimeout(withWorker(context.Background(), id), time.Duration(1e6+rng.Int64N(300e6)))
	err := lease.Unlock(ctx)
	cancel()
	w.checkErr("unlock", err, unlockErrs)
	w.log("c%d released %s%s: %v", c, h.name, h.kind(sh), errName(err))
}

func ownerName(i int) string { return fmt.Sprintf("job-%d", i) }

// kind describes a hold of shape sh in the history.
func (h *hold) kind(sh Shape) string {
	switch sh.Kind {
	case RWLock:
		if h.write {
			return " (write)"
		}
		return " (read)"
	case ReentrantLock:
		return fmt.Sprintf(" (%s depth %d)", h.owner, h.depth)
	case SemaphoreLock:
		return " (place)"
	}
	return ""
}

func errName(err error) string {
	for _, e := range []error{redlock.ErrLockLost, redlock.ErrNotReleased, redlock.ErrReleased} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "other"
	}
	return "ok"
}

// finish closes the clients after the faults healed, then looks for orphan
// keys, and checks that every key is gone one TTL later.
func (w *world) finish() {
	p := w.plan
	if d := time.Until(w.t0.Add(p.Duration)); d > 0 {
		time.Sleep(d)
	}
	var retired []*redlock.Client
	if w.change != nil {
		w.mu.Lock()
		w.change.ended = true // no reload from now on
		retired = w.change.retired
		w.mu.Unlock()
	}
	for c, cl := range w.clients {
		w.closeClient(c, cl)
		w.checkStats(c)
	}
	for _, cl := range retired {
		w.closeClient(-1, cl)
	}
	// Let every request still in the network land.
	var slow time.Duration
	for _, f := range p.Faults {
		if f.Kind == SlowLink {
			slow = max(slow, f.Delay)
		}
	}
	time.Sleep(2*(p.Net.SpikeMax+p.Net.BaseMax) + slow + time.Millisecond)
	w.leftovers(history.Leftover)
	after := p.TTL + p.Delay
	if p.Shapes != nil {
		after = max(after, waitTTL)
	}
	time.Sleep(after + time.Millisecond)
	w.leftovers(history.Outlived)
	// Let the network's delivery goroutines end inside the bubble.
	time.Sleep(2 * deliverBound)
	w.deliveries.end()
}

func (w *world) result() Result {
	p := w.plan
	r := Result{Plan: p, Coverage: w.coverage, Holds: len(w.holds), Attempts: w.attempts, Goroutines: w.maxG,
		Queued: w.queued, Notified: w.notified, Lost: w.lost}
	r.Broken = p.Broken()
	r.Events = w.history()
	w.judge(&r, r.Events)
	switch {
	case len(r.Violations) > 0:
		r.Outcome = Fail
	case len(r.Broken) > 0 || len(r.Known) > 0:
		r.Outcome = Classified
	}
	// The digest covers the leases granted, on the virtual clock, in a
	// canonical order.
	var lines []string
	for _, h := range w.holds {
		lines = append(lines, fmt.Sprintf("%s c%d %d %d %d %v %d", h.name, h.client, h.start.Sub(w.t0), h.end.Sub(w.t0), h.fence, h.write, h.depth))
	}
	slices.Sort(lines)
	hash := fnv.New64a()
	for _, l := range lines {
		hash.Write([]byte(l))
	}
	r.Digest = hash.Sum64()
	r.History = w.hist
	return r
}
