package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/faultinject/history"
	"github.com/quorumlock/quorumlock/redlock"
)

// Verdict is the outcome of a scenario against its expectation.
type Verdict string

const (
	// Pass: a safe scenario showed no violation, or an unsafe one showed
	// at least one; and the run completed and left no process, goroutine
	// or lock key that outlives its TTL behind.
	Pass Verdict = "pass"
	// Fail: anything else, including a run that could not complete.
	Fail Verdict = "fail"
)

// Vacuous says whether a run of sc proved nothing, so that it may be run
// again (the short suite and cmd/chaos do, at most twice): an unsafe
// scenario that showed no violation (its fault forces one by timing, and a
// loaded machine can miss every window), or a safe one that locked nothing
// (and so showed none). A violation in a safe run is never vacuous.
func Vacuous(sc Scenario, rep Report) bool {
	if sc.Expect == Unsafe {
		return rep.Violations == 0
	}
	return rep.Acquisitions == 0 && rep.Violations == 0
}

// Report is the result of one scenario run. Its JSON form has exactly the
// fields name, expect, acquisitions, faults, violations,
// stale_writes_accepted, leaked_keys and verdict; the rest is for humans and
// tests.
type Report struct {
	Name                string  `json:"name"`
	Expect              Expect  `json:"expect"`
	Acquisitions        int     `json:"acquisitions"`
	Faults              int     `json:"faults"`
	Violations          int     `json:"violations"`
	StaleWritesAccepted int     `json:"stale_writes_accepted"`
	LeakedKeys          int     `json:"leaked_keys"`
	Verdict             Verdict `json:"verdict"`

	// Backend is where the masters ran; Nodes is how many.
	Backend faultinject.BackendKind `json:"-"`
	Nodes   int                     `json:"-"`
	// Elapsed is the wall time of the whole run, set-up and teardown
	// included.
	Elapsed time.Duration `json:"-"`
	// Findings is the checker's output (package history); Violations
	// counts those the verdict counts.
	Findings Findings `json:"-"`
	// Leaked describes the lock keys found on the masters right after every
	// client unlocked and closed (LeakedKeys counts them).
	Leaked []string `json:"-"`
	// PersistentLeaks are the keys of Leaked still present a TTL later:
	// they would not expire by themselves. They fail the verdict; keys that
	// expire within their TTL are reported but do not.
	PersistentLeaks []string `json:"-"`
	// ProcessesLeft counts redis-server processes or containers of the
	// run's cluster still present after Close; GoroutinesLeft the
	// goroutines left (only with Options.CheckGoroutines).
	ProcessesLeft, GoroutinesLeft int `json:"-"`
	// Err is why the run could not complete (the verdict is then Fail).
	Err error `json:"-"`
	// History is the run's history (only with Options.KeepHistory).
	History []Event `json:"-"`
}

// Options says how Run runs a scenario. The zero value runs the full
// scenario on the Auto backend, quietly.
type Options struct {
	// Backend is where the masters run. Default: faultinject.Auto.
	Backend faultinject.BackendKind
	// Short runs the CI-sized variant (Scenario.ShortDuration).
	Short bool
	// Duration, when positive, overrides the scenario's duration.
	Duration time.Duration
	// Nodes, when positive, overrides the scenario's number of masters
	// (fault targets follow; split scenarios need an odd number), except
	// for a scenario that changes the masters (Scenario.Reconfig), whose
	// change names them.
	Nodes int
	// MaxAcquisitions bounds the acquisitions of a run; the run stops when
	// it is reached. Default (0): 1,000,000.
	MaxAcquisitions int
	// Progress receives a line per second while the scenario runs, and the
	// cluster's log. Nil: quiet.
	Progress io.Writer
	// CheckGoroutines compares the goroutines before and after the run with
	// goleak. Only meaningful when nothing else runs in the process at the
	// same time.
	CheckGoroutines bool
	// KeepHistory puts the history in the Report.
	KeepHistory bool
	// Postgres is the PostgreSQL server of the scenarios whose Resource is
	// PostgreSQL (StartPostgres). Nil: Run starts one for the run and stops
	// it after (a few seconds more).
	Postgres *Postgres
}

// DefaultMaxAcquisitions is the default of Options.MaxAcquisitions.
const DefaultMaxAcquisitions = 1_000_000

// run is the state of one scenario run.
type run struct {
	sc      Scenario
	opt     Options
	cluster *faultinject.Cluster
	clock   *history.RefClock
	hist    *history.Recorder
	reg     resource
	lock    string
	reqs    chan *request
	faults  atomic.Int64
	maxAcq  int64
	acqSeen atomic.Int64
	acqMu   sync.Mutex
	acqNext chan struct{} // closed at the next acquisition
	logf    func(format string, args ...any)
	change  *change        // Scenario.Reconfig (reconfig.go)
	closers []func() error // what the run started besides the cluster

	errMu sync.Mutex
	errs  []error
}

func (r *run) fail(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	r.errs = append(r.errs, err)
}

// Run runs one scenario and checks its history. The error is non-nil only
// when the scenario or the options are invalid; failures during the run
// (a cluster that does not start, a fault that cannot be injected) are in
// Report.Err with verdict Fail. Run stops every process, container, proxy and
// goroutine it started before returning. It is safe to call Run
// concurrently for different scenarios (each has its own cluster).
func Run(ctx context.Context, sc Scenario, opt Options) (Report, error) {
	if opt.Nodes > 0 && sc.Reconfig == nil { // a change of the masters names them: its N is fixed
		sc.Nodes = opt.Nodes
	}
	if opt.Duration < 0 {
		return Report{}, fmt.Errorf("chaos: duration %v must not be negative", opt.Duration)
	}
	if opt.Nodes < 0 {
		return Report{}, fmt.Errorf("chaos: nodes %d must not be negative", opt.Nodes)
	}
	if err := sc.Validate(); err != nil {
		return Report{}, err
	}
	if opt.Backend == "" {
		opt.Backend = faultinject.Auto
	}
	if opt.MaxAcquisitions <= 0 {
		opt.MaxAcquisitions = DefaultMaxAcquisitions
	}
	dur := sc.Duration
	if opt.Short {
		dur = sc.ShortDuration
	}
	if opt.Duration > 0 {
		dur = opt.Duration
	}
	var leakOpt goleak.Option
	if opt.CheckGoroutines {
		leakOpt = goleak.IgnoreCurrent()
	}
	began := time.Now()
	rep := Report{Name: sc.Name, Expect: sc.Expect, Verdict: Fail, Nodes: sc.Nodes}
	logf := func(string, ...any) {}
	if opt.Progress != nil {
		var mu sync.Mutex
		logf = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(opt.Progress, format+"\n", args...)
		}
	}
	r := &run{sc: sc, opt: opt, clock: history.NewRefClock(), hist: &history.Recorder{}, lock: "quorumlock.chaos." + sc.Name,
		reqs: make(chan *request), acqNext: make(chan struct{}), maxAcq: int64(opt.MaxAcquisitions), logf: logf}
	r.reg = history.NewRegister(r.clock, r.hist, sc.Fencing)
	failed := func(err error) (Report, error) {
		rep.Err = err
		rep.Elapsed = time.Since(began)
		return rep, nil
	}
	if err := sc.Missing(); err != nil {
		return failed(fmt.Errorf("chaos: scenario %q cannot run here: %w", sc.Name, err))
	}
	cfg, err := sc.Needs().Apply(faultinject.Config{
		N: sc.Nodes, Backend: opt.Backend, Persistence: []faultinject.Persistence{sc.Persistence},
		Logf: func(format string, args ...any) { logf("  "+format, args...) },
	})
	if err != nil {
		return failed(fmt.Errorf("chaos: scenario %q: %w", sc.Name, err))
	}
	if sc.Knob != "" {
		// Before the clients are made: the coordinator reads its switches
		// then, the nodes on every call.
		k := Knobs()[sc.Knob]
		k.Store(true)
		defer k.Store(false)
		logf("chaos: %s: knob %s: that safety mechanism is switched off", sc.Name, sc.Knob)
	}
	c, err := faultinject.Start(ctx, cfg)
	if err != nil {
		return failed(err)
	}
	r.cluster = c
	rep.Backend = c.Kind()
	label := c.Label()
	var pg *pgResource
	if sc.Resource == PostgreSQL {
		pg, err = r.openPostgres(ctx, label)
		if err != nil {
			r.fail(err)
		} else {
			r.reg = pg
		}
	}
	var runErr error
	if err == nil {
		runErr = r.execute(ctx, dur, &rep, pg)
	}

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		r.fail(fmt.Errorf("closing the cluster: %w", err))
	}
	if pg != nil {
		if err := pg.Close(); err != nil {
			r.fail(err)
		}
	}
	if err := r.closeAll(); err != nil {
		r.fail(err)
	}
	rep.ProcessesLeft = processesLeft(cctx, rep.Backend, label)
	if opt.CheckGoroutines {
		// go-redis dial retries sleep a second before they notice the
		// closed pool: poll for up to 5 s.
		err := goleak.Find(leakOpt)
		for deadline := time.Now().Add(5 * time.Second); err != nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			err = goleak.Find(leakOpt)
		}
		if err != nil {
			rep.GoroutinesLeft = strings.Count(err.Error(), "Goroutine ")
			r.fail(fmt.Errorf("goroutines left: %w", err))
		}
	}
	if runErr != nil {
		r.fail(runErr)
	}
	rep.Err = errors.Join(r.errs...)
	rep.Elapsed = time.Since(began)
	rep.Verdict = verdict(rep)
	return rep, nil
}

func verdict(rep Report) Verdict {
	if rep.Err != nil || len(rep.PersistentLeaks) > 0 || rep.ProcessesLeft > 0 || rep.GoroutinesLeft > 0 {
		return Fail
	}
	if rep.Acquisitions == 0 {
		return Fail // nothing was locked: "no violation" would be vacuous
	}
	if (rep.Expect == Safe) == (rep.Violations == 0) {
		return Pass
	}
	return Fail
}

// execute runs the workload and the schedule on a started cluster, heals,
// stops the clients, scans for leaked keys and checks the history.
func (r *run) execute(ctx context.Context, dur time.Duration, rep *Report, pg *pgResource) error {
	sc := r.sc
	n := sc.Nodes
	q := n/2 + 1
	lockOpts := []redlock.LockOption{redlock.WithTTL(sc.TTL), redlock.WithRetryBackoff(time.Millisecond, 20*time.Millisecond)}
	// Node and release deadlines of a fifth of the TTL by default
	// (Scenario.NodeTimeout): the suite runs under -race on two cores
	// beside Docker and Toxiproxy, where the 50ms default made whole
	// scenarios time out (0 acquisitions); a fifth still leaves most of
	// the TTL as validity.
	nt := sc.nodeTimeout()
	clientOpts := []redlock.ClientOption{redlock.WithNodeTimeout(nt), redlock.WithReleaseTimeout(nt)}
	if sc.DriftFactor > 0 {
		clientOpts = append(clientOpts, redlock.WithDriftFactor(sc.DriftFactor))
	}
	if sc.Quarantine {
		clientOpts = append(clientOpts, redlock.WithRestartQuarantine(0))
	}
	if sc.Fencing {
		lockOpts = append(lockOpts, redlock.WithFencing())
	}
	if sc.Renew {
		lockOpts = append(lockOpts, redlock.WithAutoRenew(0))
	}
	type client struct {
		rc *redlock.Client
		l  locker
	}
	clients := make([]client, sc.Clients)
	if sc.Reconfig != nil {
		build := func(k int, nodes []redlock.Node, quorum []redlock.ClientOption) (*redlock.Client, locker, error) {
			rc, err := redlock.New(nodes, append(append(slices.Clip(clientOpts), quorum...), redlock.WithOwnerLabel(fmt.Sprintf("client%d", k)))...)
			if err != nil {
				return nil, locker{}, err
			}
			lk, err := newLocker(rc, sc.Shape, k, sc.K, r.lock, lockOpts)
			return rc, lk, err
		}
		r.change = newChange(r, build)
		if err := r.change.init(ctx); err != nil {
			return fmt.Errorf("reconfig init: %w", err)
		}
	}
	for k := range clients {
		l, err := r.cluster.NewLink(fmt.Sprintf("client%d", k))
		if err != nil {
			return err
		}
		if r.change != nil {
			rc, lk, err := r.change.client(ctx, k, l)
			if err != nil {
				return err
			}
			clients[k] = client{rc: rc, l: lk}
			continue
		}
		if sc.Split && k < 2 {
			var cut []int
			for i := range n {
				if (k == 0 && i >= q) || (k == 1 && i < n-q) {
					cut = append(cut, i)
				}
			}
			if err := (faultinject.Partition{Nodes: cut, Link: l.Name()}).Inject(ctx, r.cluster); err != nil {
				return err
			}
			r.faults.Add(1)
		}
		rc, err := redlock.New(l.Nodes(), append(clientOpts, redlock.WithOwnerLabel(l.Name()))...)
		if err != nil {
			return err
		}
		lk, err := newLocker(rc, sc.Shape, k, sc.K, r.lock, lockOpts)
		if err != nil {
			return err
		}
		clients[k] = client{rc: rc, l: lk}
	}

	r.logf("chaos: %s: %d masters (%s), %d clients, TTL %v, %v; %s", sc.Name, n, r.cluster.Kind(), sc.Clients, sc.TTL, dur, sc.About)
	if sc.Quarantine {
		// A client counts the votes of a master it meets for the first
		// time only once that master's run is older than the quarantine,
		// by the server's main-thread CPU time (which a clock step cannot
		// inflate, and an idle fresh master gains slowly), or after the
		// quarantine since the client met it. Start the workload once
		// every client has met every master and waited that out.
		r.logf("chaos: %s: the clients meet the masters and wait out the restart quarantine", sc.Name)
		rcs := make([]*redlock.Client, len(clients))
		for k, c := range clients {
			rcs[k] = c.rc
		}
		if err := r.meetMasters(ctx, rcs, sc.TTL); err != nil {
			return err
		}
	}
	if sc.WarmUp {
		for k, cl := range clients {
			if err := r.warmUp(ctx, k, cl.l); err != nil {
				return err
			}
		}
	}
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	schedCtx, stopSched := context.WithTimeout(workCtx, dur)
	defer stopSched()

	var work sync.WaitGroup
	for k, cl := range clients {
		work.Go(func() { r.client(workCtx, stopSched, k, cl.l) })
	}
	var sched sync.WaitGroup
	for _, st := range sc.Schedule {
		sched.Go(func() { r.step(schedCtx, st) })
	}
	if r.change != nil {
		sched.Go(func() { r.change.run(schedCtx) })
	}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-schedCtx.Done():
				return
			case <-t.C:
				r.logf("chaos: %s: %4.0fs/%v  %d acquisitions, %d faults", sc.Name, time.Since(start).Seconds(), dur, r.hist.Acquisitions(), r.faults.Load())
			}
		}
	}()

	// The end: schedules stop and finish what they are doing, every fault
	// is undone, and only then do the clients stop (each unlocks first).
	<-schedCtx.Done()
	sched.Wait()
	<-progressDone
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := r.cluster.HealAll(hctx); err != nil {
		r.fail(fmt.Errorf("healing after the run: %w", err))
	}
	stopWork()
	work.Wait()
	for k, cl := range clients {
		if err := cl.rc.Close(hctx); err != nil {
			r.fail(fmt.Errorf("client %d: %w", k, err))
		}
	}
	if r.change != nil {
		first := make([]*redlock.Client, len(clients))
		for k, cl := range clients {
			first[k] = cl.rc
		}
		r.change.close(hctx, first)
	}
	leaked, err := r.leakedKeys(hctx, history.Leftover)
	if err != nil {
		r.fail(err)
	}
	if len(leaked) > 0 {
		// A key left behind with a TTL expires by itself (a bounded orphan,
		// inherent to RedLock); one still there a TTL later is a real leak.
		r.logf("chaos: %s: %d lock keys left after every client unlocked; checking again in %v", sc.Name, len(leaked), sc.TTL+100*time.Millisecond)
		sleep(hctx, sc.TTL+100*time.Millisecond)
		if _, err := r.leakedKeys(hctx, history.Outlived); err != nil {
			r.fail(err)
		}
	}

	if pg != nil {
		// What PostgreSQL kept, in its own commit order.
		stored, err := pg.Stored(hctx)
		if err != nil {
			r.fail(err)
		}
		for _, e := range stored {
			r.hist.Add(e)
		}
	}
	ev := r.hist.Events()
	f := Check(ev)
	judged := violations(f)
	rep.Findings = f
	rep.Acquisitions = f.Acquisitions
	rep.Faults = int(r.faults.Load())
	rep.Violations = len(judged)
	rep.StaleWritesAccepted = staleWritesAccepted(f)
	rep.Leaked = describeLeaks(leaked)
	rep.LeakedKeys = len(leaked)
	// Keys still there a TTL later: history.KeysExpire's violations.
	for _, v := range f.Of(&history.KeysExpire) {
		rep.PersistentLeaks = append(rep.PersistentLeaks, v.What)
	}
	if r.opt.KeepHistory {
		rep.History = ev
	}
	shown := map[*history.Invariant]int{}
	for _, v := range judged {
		if shown[v.Invariant]++; shown[v.Invariant] <= 3 {
			r.logf("chaos: %s: violation: %v", sc.Name, v)
		}
	}
	for inv, n := range shown {
		if n > 3 {
			r.logf("chaos: %s: ... %d %s violations in all", sc.Name, n, inv.Name)
		}
	}
	return nil
}

// meetMasters has every client take and release a lock of another name
// (not the one the workload and the leak check use), which waits until the
// client counts the votes of a quorum of masters: past their restart
// quarantine, from the client's first contact.
func (r *run) meetMasters(ctx context.Context, clients []*redlock.Client, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 10*ttl+30*time.Second)
	defer cancel()
	errs := make(chan error, len(clients))
	for _, c := range clients {
		go func() {
			m, err := c.NewMutex(r.lock+".meet", redlock.WithTTL(ttl))
			if err != nil {
				errs <- err
				return
			}
			lease, err := m.Lock(ctx)
			if err != nil {
				errs <- fmt.Errorf("meeting the masters: %w", err)
				return
			}
			errs <- lease.Unlock(ctx)
		}()
	}
	var first error
	for range clients {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
