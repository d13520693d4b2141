package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// Config describes a side-by-side run. The zero value of a field selects
// its default.
type Config struct {
	// Masters are the Redis masters to run against (ParseMasters), at
	// least as many as the largest N. The run's keys are named
	// "qlbench:<run id>:..."; on masters given here they are deleted at the
	// end (after the orphans were counted), fencing counters included.
	// Default: start that many redis-server processes and stop them at
	// the end.
	Masters []Master
	// Ns are the numbers of masters. Default: 1, 3, 5.
	Ns []int
	// Conditions are the networks, each with the Ns of its Case. Default:
	// Healthy with Ns. A condition that treats one master apart (Slow or
	// Fault) runs only with N >= 3.
	Conditions []Case
	// Contenders default to Contenders().
	Contenders []Contender
	// Cycles is the number of measured lock+unlock cycles per contender, N
	// and condition. Default: 2000.
	Cycles int
	// Slice is the number of cycles one contender runs per round before
	// the next takes over. Default: 50.
	Slice int
	// Warmup is the number of unmeasured cycles each locker runs first
	// (connections, script loads), before any fault; the contention
	// measurement's lockers then run up to as many more at once on their
	// lock (for at most a second). Default: 20.
	Warmup int
	// Budget bounds the time one contender, N and condition spends in its
	// measured cycles: each of its slices ends once Budget/rounds has
	// passed, so a slow contender runs fewer cycles. Default: 0, no bound.
	Budget time.Duration
	// CycleTimeout bounds a slice (through its cycles' context): it ends
	// CycleTimeout after the slice's share of the Budget, or after Slice
	// times CycleTimeout without a Budget. It only keeps a broken
	// contender from stalling the run; cycles cut short count as errors.
	// Default: 10s.
	CycleTimeout time.Duration
	// TTL is every contender's lock TTL. Default: 8s.
	TTL time.Duration
	// Seed seeds the order of the contenders within each round. Default: 1.
	Seed uint64
	// Contention, when Clients > 0, adds the contention measurement.
	Contention Contention
	// Progress, when not nil, is called after every slice with the slices
	// done and the total.
	Progress func(done, total int)
	// Log, when not nil, receives progress lines.
	Log io.Writer
}

// A Case is a condition and the numbers of masters it runs with.
type Case struct {
	Condition Condition
	// Ns default to Config.Ns.
	Ns []int
}

// maxConsecutiveErrors ends a contender's measurement: it is broken, and
// each failing cycle may be slow.
const maxConsecutiveErrors = 10

// closeSettle is how long a closed locker's goroutines get to end before
// the ones left are counted: go-redis's dial probe, started after a pool's
// dials failed, sleeps 1s between dials before it sees the pool closed.
const closeSettle = 1500 * time.Millisecond

func (cfg *Config) defaults() error {
	if len(cfg.Ns) == 0 {
		cfg.Ns = []int{1, 3, 5}
	}
	if len(cfg.Conditions) == 0 {
		cfg.Conditions = []Case{{Condition: Healthy}}
	}
	for i := range cfg.Conditions {
		if len(cfg.Conditions[i].Ns) == 0 {
			cfg.Conditions[i].Ns = cfg.Ns
		}
	}
	if len(cfg.Contenders) == 0 {
		cfg.Contenders = Contenders()
	}
	if cfg.Cycles == 0 {
		cfg.Cycles = 2000
	}
	if cfg.Slice == 0 {
		cfg.Slice = 50
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = 20
	}
	if cfg.CycleTimeout == 0 {
		cfg.CycleTimeout = 10 * time.Second
	}
	if cfg.TTL == 0 {
		cfg.TTL = 8 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if err := cfg.Contention.defaults(cfg.Contenders); err != nil {
		return err
	}
	switch {
	case cfg.Cycles < 0 || cfg.Slice < 0 || cfg.Warmup < 0:
		return fmt.Errorf("bench: Cycles (%d), Slice (%d) and Warmup (%d) must not be negative", cfg.Cycles, cfg.Slice, cfg.Warmup)
	case cfg.Budget < 0 || cfg.CycleTimeout < 0:
		return fmt.Errorf("bench: Budget (%v) and CycleTimeout (%v) must not be negative", cfg.Budget, cfg.CycleTimeout)
	case cfg.Masters != nil && len(cfg.Masters) < cfg.maxN():
		return fmt.Errorf("bench: %d masters for N up to %d", len(cfg.Masters), cfg.maxN())
	}
	for _, cs := range cfg.Conditions {
		if slices.ContainsFunc(cs.Ns, func(n int) bool { return n < 1 }) {
			return fmt.Errorf("bench: every N must be at least 1 (got %v)", cs.Ns)
		}
		if c := cs.Condition; c.Name == "" || strings.ContainsAny(c.Name, ":{}*?[]") {
			return fmt.Errorf("bench: condition %q needs a name without ':{}*?[]'", c.Name)
		}
	}
	for _, c := range append(slices.Clone(cfg.Contenders), cfg.Contention.Contenders...) {
		if c.Name == "" || strings.ContainsAny(c.Name, ":{}*?[]") || c.Open == nil {
			return fmt.Errorf("bench: contender %q needs a name without ':{}*?[]' and an Open", c.Name)
		}
	}
	return nil
}

// maxN is the largest number of masters the run needs.
func (cfg *Config) maxN() int {
	n := 0
	for _, cs := range cfg.Conditions {
		n = max(n, slices.Max(cs.Ns))
	}
	if cfg.Contention.Clients > 0 {
		n = max(n, slices.Max(cfg.Contention.Ns))
	}
	return n
}

// entry is one contender with N masters under one condition.
type entry struct {
	c     Contender
	n     int
	cond  Condition
	l     Locker
	links []*link
	lctx  context.Context // labelled: goroutines started under it are the entry's

	started        bool
	lat            []time.Duration
	first          time.Duration
	errors         int
	consecutive    int
	attempts       int
	busy           time.Duration
	cpu            time.Duration
	srv            serverTally
	mallocs, bytes uint64
	gLoop, gClose  int
	err            error
}

func (e *entry) id() string { return entryID(e.c.Name, e.n, e.cond.Name) }

func (e *entry) remaining(cycles int) int {
	if e.consecutive >= maxConsecutiveErrors {
		return 0
	}
	return cycles - e.attempts
}

func (e *entry) fail(err error) {
	e.errors++
	e.consecutive++
	e.note(err)
}

func (e *entry) note(err error) {
	if e.err == nil && err != nil {
		e.err = err
	}
}

// Run runs every contender with every N under every condition, interleaved:
// in each round every (contender, N, condition) runs Slice cycles from one
// goroutine, in an order shuffled per round, until each has run Cycles (or
// its Budget). Every locker is opened and warmed up before the first
// round; a condition's fault starts just before the locker's first measured
// slice and ends after the last round, when the faulted master returns.
// Then every locker is closed and the masters are scanned for the keys each
// left. The contention measurement, if any, follows on the same masters.
//
// It returns one Row per contender, N and condition, ordered by condition,
// N and contender, then the contention rows. Cycles that fail are counted
// in the row; Run itself fails only when a server cannot be started, a
// locker cannot be opened, the masters cannot be scanned, or ctx ends.
func Run(ctx context.Context, cfg Config) (rows []Row, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	masters := cfg.Masters
	if masters == nil {
		addrs, stop, err := StartServers(cfg.maxN())
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, stop()) }()
		masters = mastersAt(addrs)
	}
	run, err := runID()
	if err != nil {
		return nil, err
	}
	if cfg.Masters != nil {
		defer func() {
			if derr := deleteRun(context.WithoutCancel(ctx), masters, run); derr != nil {
				err = errors.Join(err, fmt.Errorf("bench: deleting the run's keys: %w", derr))
			}
		}()
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}

	var entries []*entry
	defer func() {
		for _, e := range entries {
			if e.l != nil {
				e.l.Close()
			}
		}
	}()
	for _, cs := range cfg.Conditions {
		cond := cs.Condition
		for _, n := range cs.Ns {
			if cond.faulted() && n < 3 {
				continue
			}
			for _, c := range cfg.Contenders {
				if !c.runs(n) {
					continue
				}
				e := &entry{c: c, n: n, cond: cond, lat: make([]time.Duration, 0, cfg.Cycles)}
				e.links = links(cond, masters[:n])
				t := Target{Masters: masters[:n], Key: lockKey(run, c.Name, n, cond.Name), TTL: cfg.TTL, Dial: dialFuncs(e.links)}
				e.lctx = labelled(ctx, e.id())
				pprof.SetGoroutineLabels(e.lctx)
				e.l, err = c.Open(t)
				pprof.SetGoroutineLabels(ctx)
				if err != nil {
					return nil, fmt.Errorf("bench: opening %s: %w", e.id(), err)
				}
				entries = append(entries, e)
			}
		}
	}
	rounds := 0
	if cfg.Slice > 0 {
		rounds = (cfg.Cycles + cfg.Slice - 1) / cfg.Slice
	}
	total := len(entries) * rounds
	if cfg.Contention.Clients > 0 {
		total += cfg.Contention.slices()
	}
	done := 0
	progress := func() {
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, total)
		}
	}
	logf("run %s: %d contender x N x condition entries on %d masters, %d warm-up + %d cycles each in slices of %d",
		run, len(entries), cfg.maxN(), cfg.Warmup, cfg.Cycles, cfg.Slice)

	for _, e := range entries {
		pprof.SetGoroutineLabels(e.lctx)
		for range cfg.Warmup {
			if err := Cycle(e.lctx, e.l); err != nil {
				e.note(fmt.Errorf("warm-up: %w", err))
			}
		}
		pprof.SetGoroutineLabels(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	meter := newServerMeter(masters[:cfg.maxN()])
	defer func() { err = errors.Join(err, meter.close()) }()

	var sliceCap time.Duration
	if cfg.Budget > 0 && rounds > 0 {
		sliceCap = cfg.Budget / time.Duration(rounds)
	}
	rng := mrand.New(mrand.NewPCG(cfg.Seed, 0))
	order := slices.Clone(entries)
	var before, after runtime.MemStats
	for r := range rounds {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, e := range order {
			k := min(cfg.Slice, e.remaining(cfg.Cycles))
			if k <= 0 {
				progress()
				continue
			}
			if !e.started {
				e.started = true
				for _, l := range e.links {
					l.start()
				}
			}
			limit := sliceCap + cfg.CycleTimeout
			if sliceCap == 0 {
				limit = time.Duration(k) * cfg.CycleTimeout
			}
			sctx, cancel := context.WithTimeout(e.lctx, limit)
			pprof.SetGoroutineLabels(e.lctx)
			srv0, srvErr := meter.read(ctx, e.n)
			runtime.ReadMemStats(&before)
			cpu0 := cpuTime()
			start := time.Now()
			for range k {
				t0 := time.Now()
				err := Cycle(sctx, e.l)
				d := time.Since(t0)
				if e.attempts == 0 && e.cond.Fault == Dead {
					e.first = d
				}
				e.attempts++
				if err != nil {
					e.fail(err)
					if e.consecutive >= maxConsecutiveErrors || sctx.Err() != nil {
						break
					}
				} else {
					e.consecutive = 0
					e.lat = append(e.lat, d)
				}
				if sliceCap > 0 && time.Since(start) >= sliceCap {
					break
				}
			}
			e.busy += time.Since(start)
			e.cpu += cpuTime() - cpu0
			runtime.ReadMemStats(&after)
			e.srv.add(ctx, meter, e.n, srv0, srvErr)
			pprof.SetGoroutineLabels(ctx)
			cancel()
			e.mallocs += after.Mallocs - before.Mallocs
			e.bytes += after.TotalAlloc - before.TotalAlloc
			if r == rounds-1 || e.remaining(cfg.Cycles) <= 0 {
				e.gLoop = goroutinesByLabel()[e.id()]
			}
			progress()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if rounds >= 10 && (r+1)%(rounds/10) == 0 {
			logf("round %d/%d", r+1, rounds)
		}
	}

	// The faulted masters return, then every locker is closed.
	for _, e := range entries {
		for _, l := range e.links {
			if err := l.stop(ctx); err != nil {
				e.note(err)
			}
		}
	}
	for _, e := range entries {
		if err := e.l.Close(); err != nil {
			e.note(fmt.Errorf("close: %w", err))
		}
		e.l = nil
		e.gClose = settledGoroutines(e.id(), closeSettle)
	}
	left, err := leftovers(ctx, masters[:cfg.maxN()], run)
	if err != nil {
		return nil, fmt.Errorf("bench: scanning for leftover keys: %w", err)
	}
	for _, e := range entries {
		lo := left[e.id()]
		row := Row{Contender: e.c.Name, N: e.n, Condition: e.cond.Name, Cycles: len(e.lat), Errors: e.errors,
			OrphanKeys: lo.keys, GuardKeys: lo.guards, QueueKeys: lo.queue, GoroutinesAfterLoop: e.gLoop, GoroutinesAfterClose: e.gClose}
		summarise(&row, e.lat, e.busy)
		if e.attempts > 0 {
			row.AllocsPerCycle = float64(e.mallocs) / float64(e.attempts)
			row.BytesPerCycle = float64(e.bytes) / float64(e.attempts)
			row.CPUPerCycleUs = float64(e.cpu.Microseconds()) / float64(e.attempts)
			e.srv.fill(&row, e.attempts)
		}
		if e.cond.Fault == Dead {
			row.FirstLockMs = ms(e.first)
		}
		if e.err != nil {
			row.Err = e.err.Error()
		}
		rows = append(rows, row)
	}
	entries = nil

	if cfg.Contention.Clients > 0 {
		crows, err := runContention(ctx, &cfg, masters, run, rng, progress)
		if err != nil {
			return nil, err
		}
		rows = append(rows, crows...)
	}
	return rows, nil
}

// runID returns a fresh random name for a run's keys.
func runID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
