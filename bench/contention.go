package bench

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Contention describes the contention measurement: Clients lockers of one
// contender, each with its own clients (as Clients processes would have),
// cycle on one lock with no hold (Lock, then Unlock at once, then Lock
// again) on healthy masters. The contenders take turns in slices of
// Duration/Rounds, in an order shuffled per round.
type Contention struct {
	// Clients is the number of lockers on the lock; 0 (the default) skips
	// the measurement, and otherwise it must be at least 2.
	Clients int
	// Ns are the numbers of masters. Default: 5.
	Ns []int
	// Duration is the time each contender and N runs, over all rounds.
	// Default: 10s.
	Duration time.Duration
	// Rounds is the number of slices Duration is cut into. Default: 5.
	Rounds int
	// Contenders default to the run's contenders that wait for a held
	// lock (not OneNode).
	Contenders []Contender
}

func (c *Contention) defaults(all []Contender) error {
	if c.Clients == 0 {
		return nil
	}
	if len(c.Ns) == 0 {
		c.Ns = []int{5}
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Rounds == 0 {
		c.Rounds = 5
	}
	if len(c.Contenders) == 0 {
		for _, k := range all {
			if !k.OneNode {
				c.Contenders = append(c.Contenders, k)
			}
		}
	}
	switch {
	case c.Clients < 2:
		return fmt.Errorf("bench: Contention.Clients %d: want at least 2 (or 0: none)", c.Clients)
	case c.Duration < 0 || c.Rounds < 0:
		return fmt.Errorf("bench: Contention.Duration (%v) and Rounds (%d) must not be negative", c.Duration, c.Rounds)
	case slices.ContainsFunc(c.Ns, func(n int) bool { return n < 1 }):
		return fmt.Errorf("bench: every contention N must be at least 1 (got %v)", c.Ns)
	}
	return nil
}

// cases returns the contender and N pairs the measurement runs.
func (c *Contention) cases() (out []centry) {
	for _, n := range c.Ns {
		for _, k := range c.Contenders {
			if k.runs(n) {
				out = append(out, centry{c: k, n: n})
			}
		}
	}
	return out
}

// slices returns the number of slices the measurement runs.
func (c *Contention) slices() int { return len(c.cases()) * c.Rounds }

// Name returns the condition name of the contention rows.
func (c *Contention) Name() string { return fmt.Sprintf("contention-%d", c.Clients) }

// centry is one contender with N masters under contention.
type centry struct {
	c       Contender
	n       int
	lockers []Locker
	lctx    context.Context

	tally
	active         time.Duration
	cpu            time.Duration
	srv            serverTally
	mallocs, bytes uint64
	// retries: the lockers' failed attempts after the first (retryCounter),
	// counted is false when they do not count them.
	retries       int64
	counted       bool
	gLoop, gClose int
	err           error
}

func (e *centry) id(cond string) string { return entryID(e.c.Name, e.n, cond) }

// warmContended has the entry's lockers cycle on the lock all at once, up to
// cycles each and for at most a second, so that what a process does once
// in its life under contention (a client's first wait: its release
// notifications' connection to each master, quorumlock's and rueidislock's)
// is done before the slices, as the first contact is by the uncontended
// warm-up. The slices then measure waits that a long-running process
// meets: each slice still starts with every locker arriving at once on a
// lock idle for the other contenders' slices.
func (e *centry) warmContended(cycles int) error {
	end := time.Now().Add(time.Second)
	errs := make([]error, len(e.lockers))
	var wg sync.WaitGroup
	for i, l := range e.lockers {
		wg.Go(func() {
			pprof.SetGoroutineLabels(e.lctx) // what the lockers start is the entry's
			for range cycles {
				if time.Now().After(end) {
					return
				}
				if err := Cycle(e.lctx, l); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// tally adds up the figures of a contender's slices.
type tally struct {
	acquisitions, errors, same, pairs, overlaps int
	waits, handoffs                             []time.Duration
	longest                                     time.Duration
}

// acquisition is one client's turn with the lock.
type acquisition struct {
	client int
	want   time.Time // the client wanted the lock (its previous Unlock returned)
	acq    time.Time // Lock returned
	unlock time.Time // Unlock was called
}

// add counts one slice that ran until stop: its acquisitions (those made by
// stop), the handoffs between them, and the longest wait, the waits still
// running at stop included up to stop (those of acquisitions made after it,
// and pending: when each client that gave up waiting at the end began to).
func (t *tally) add(acqs []acquisition, pending []time.Time, stop time.Time) {
	for _, a := range acqs {
		if a.acq.After(stop) {
			pending = append(pending, a.want)
		}
	}
	acqs = slices.DeleteFunc(slices.Clone(acqs), func(a acquisition) bool { return a.acq.After(stop) })
	slices.SortFunc(acqs, func(a, b acquisition) int { return a.acq.Compare(b.acq) })
	for i, a := range acqs {
		w := a.acq.Sub(a.want)
		t.waits = append(t.waits, w)
		t.longest = max(t.longest, w)
		if i == 0 {
			continue
		}
		prev := acqs[i-1]
		t.pairs++
		if a.client == prev.client {
			t.same++
			continue
		}
		if a.acq.Before(prev.unlock) {
			t.overlaps++
		}
		t.handoffs = append(t.handoffs, max(a.acq.Sub(prev.unlock), 0))
	}
	for _, p := range pending {
		if p.Before(stop) {
			t.longest = max(t.longest, stop.Sub(p))
		}
	}
	t.acquisitions += len(acqs)
}

// runContention runs the contention measurement on the masters.
func runContention(ctx context.Context, cfg *Config, masters []Master, run string, rng *mrand.Rand, progress func()) ([]Row, error) {
	ct := &cfg.Contention
	cond := ct.Name()
	es := ct.cases()
	defer func() {
		for _, e := range es {
			for _, l := range e.lockers {
				l.Close()
			}
		}
	}()
	for i := range es {
		e := &es[i]
		e.lctx = labelled(ctx, e.id(cond))
		t := Target{Masters: masters[:e.n], Key: lockKey(run, e.c.Name, e.n, cond), TTL: cfg.TTL}
		pprof.SetGoroutineLabels(e.lctx)
		for range ct.Clients {
			l, err := e.c.Open(t)
			if err != nil {
				pprof.SetGoroutineLabels(ctx)
				return nil, fmt.Errorf("bench: opening %s: %w", e.id(cond), err)
			}
			e.lockers = append(e.lockers, l)
			for range min(cfg.Warmup, 5) {
				if err := Cycle(e.lctx, l); err != nil && e.err == nil {
					e.err = fmt.Errorf("warm-up: %w", err)
				}
			}
		}
		if err := e.warmContended(cfg.Warmup); err != nil && e.err == nil {
			e.err = fmt.Errorf("contended warm-up: %w", err)
		}
		pprof.SetGoroutineLabels(ctx)
	}
	if cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "contention: %d contender x N entries, %d clients each, %v each in %d slices\n", len(es), ct.Clients, ct.Duration, ct.Rounds)
	}
	meter := newServerMeter(masters[:slices.Max(ct.Ns)])
	defer meter.close()
	slice := ct.Duration / time.Duration(max(ct.Rounds, 1))
	order := make([]*centry, len(es))
	for i := range es {
		order[i] = &es[i]
	}
	for range ct.Rounds {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, e := range order {
			srv0, srvErr := meter.read(ctx, e.n)
			e.runSlice(slice, cfg.CycleTimeout)
			e.srv.add(ctx, meter, e.n, srv0, srvErr)
			progress()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
	}
	for i := range es {
		e := &es[i]
		e.gLoop = goroutinesByLabel()[e.id(cond)]
		for _, l := range e.lockers {
			if err := l.Close(); err != nil && e.err == nil {
				e.err = fmt.Errorf("close: %w", err)
			}
		}
		e.lockers = nil
		e.gClose = settledGoroutines(e.id(cond), closeSettle)
	}
	left, err := leftovers(ctx, masters[:slices.Max(ct.Ns)], run)
	if err != nil {
		return nil, fmt.Errorf("bench: scanning for leftover keys: %w", err)
	}
	var rows []Row
	for i := range es {
		e := &es[i]
		lo := left[e.id(cond)]
		r := Row{Contender: e.c.Name, N: e.n, Condition: cond, Clients: ct.Clients, FailedRetriesPerAcq: -1,
			Cycles: e.acquisitions, Errors: e.errors, Overlaps: e.overlaps,
			OrphanKeys: lo.keys, GuardKeys: lo.guards, QueueKeys: lo.queue, GoroutinesAfterLoop: e.gLoop, GoroutinesAfterClose: e.gClose,
			LongestWaitMs: ms(e.longest)}
		w := slices.Clone(e.waits)
		slices.Sort(w)
		r.P50Ms, r.P90Ms, r.P99Ms, r.MaxMs = ms(percentile(w, 50)), ms(percentile(w, 90)), ms(percentile(w, 99)), ms(percentile(w, 100))
		h := slices.Clone(e.handoffs)
		slices.Sort(h)
		r.HandoffP50Ms, r.HandoffP99Ms = ms(percentile(h, 50)), ms(percentile(h, 99))
		if e.pairs > 0 {
			r.SameClientShare = float64(e.same) / float64(e.pairs)
		}
		if e.active > 0 {
			r.AcquisitionsPerSec = float64(e.acquisitions) / e.active.Seconds()
			r.CyclesPerSec = r.AcquisitionsPerSec
		}
		if e.acquisitions > 0 {
			r.MeanPeriodMs = ms(e.active) / float64(e.acquisitions)
			r.AllocsPerCycle = float64(e.mallocs) / float64(e.acquisitions)
			r.BytesPerCycle = float64(e.bytes) / float64(e.acquisitions)
			r.CPUPerCycleUs = float64(e.cpu.Microseconds()) / float64(e.acquisitions)
			e.srv.fill(&r, e.acquisitions)
			if e.counted {
				r.FailedRetriesPerAcq = float64(e.retries) / float64(e.acquisitions)
			}
		}
		if e.err != nil {
			r.Err = e.err.Error()
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// runSlice runs every client of e for d, then stops them: each finishes
// the Lock it is in (and its Unlock) and returns.
func (e *centry) runSlice(d, cycleTimeout time.Duration) {
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		acqs    []acquisition
		pending []time.Time
		errs    int
		first   error
	)
	ctx, cancel := context.WithTimeout(e.lctx, d+cycleTimeout)
	defer cancel()
	pprof.SetGoroutineLabels(e.lctx)
	defer pprof.SetGoroutineLabels(context.Background())
	retries := func() (n int64, ok bool) {
		for _, l := range e.lockers {
			if rc, is := l.(retryCounter); is {
				n, ok = n+rc.failedRetries(), true
			}
		}
		return n, ok
	}
	retries0, _ := retries()
	defer func() {
		n, ok := retries()
		e.retries += n - retries0
		e.counted = e.counted || ok
	}()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := cpuTime()
	start := time.Now()
	for i, l := range e.lockers {
		wg.Go(func() {
			var mine []acquisition
			var n int
			var ferr error
			want, waiting := start, false
			for !stop.Load() {
				err := l.Lock(ctx)
				got := time.Now()
				if err != nil {
					n++
					ferr = cmp(ferr, err)
					waiting = true
					if ctx.Err() != nil {
						break
					}
					continue
				}
				a := acquisition{client: i, want: want, acq: got, unlock: time.Now()}
				if err := l.Unlock(ctx); err != nil {
					n++
					ferr = cmp(ferr, fmt.Errorf("unlock: %w", err))
				}
				mine = append(mine, a)
				want, waiting = time.Now(), false
			}
			mu.Lock()
			defer mu.Unlock()
			acqs = append(acqs, mine...)
			errs += n
			first = cmp(first, ferr)
			if waiting {
				pending = append(pending, want) // its Lock failed at the end: still waiting
			}
		})
	}
	time.Sleep(d) // the slice's length: the clients run meanwhile
	stopAt := time.Now()
	stop.Store(true)
	wg.Wait()
	e.active += stopAt.Sub(start)
	e.cpu += cpuTime() - cpu0
	runtime.ReadMemStats(&after)
	e.mallocs += after.Mallocs - before.Mallocs
	e.bytes += after.TotalAlloc - before.TotalAlloc
	e.add(acqs, pending, stopAt)
	e.errors += errs
	if e.err == nil {
		e.err = first
	}
}

// cmp returns a unless it is nil, else b.
func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
