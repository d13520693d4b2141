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
	"slices"
	"strings"
	"time"
)

// Config describes a side-by-side run. The zero value of a field selects
// its default.
type Config struct {
	// Addrs are the Redis masters to run against (host:port), at least as
	// many as the largest N. The run's keys are named "qlbench:<run id>:..."
	// and are left on the servers only as far as a contender left them.
	// Default: start that many redis-server processes and stop them at the
	// end.
	Addrs []string
	// Ns are the numbers of masters. Default: 1, 3, 5.
	Ns []int
	// Conditions are the networks. Default: Healthy.
	Conditions []Condition
	// Contenders default to Contenders().
	Contenders []Contender
	// Cycles is the number of measured lock+unlock cycles per contender, N
	// and condition. Default: 2000.
	Cycles int
	// Slice is the number of cycles one contender runs per round before
	// the next takes over. Default: 50.
	Slice int
	// Warmup is the number of unmeasured cycles each locker runs first
	// (connections, script loads). Default: 20.
	Warmup int
	// TTL is every contender's lock TTL. Default: 8s.
	TTL time.Duration
	// Seed seeds the order of the contenders within each round. Default: 1.
	Seed uint64
	// Log, when not nil, receives progress lines.
	Log io.Writer
}

// maxConsecutiveErrors ends a contender's measurement: it is broken, and
// each failing cycle may be slow.
const maxConsecutiveErrors = 10

func (cfg *Config) defaults() error {
	if len(cfg.Ns) == 0 {
		cfg.Ns = []int{1, 3, 5}
	}
	if len(cfg.Conditions) == 0 {
		cfg.Conditions = []Condition{Healthy}
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
	if cfg.TTL == 0 {
		cfg.TTL = 8 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	switch {
	case cfg.Cycles < 0 || cfg.Slice < 0 || cfg.Warmup < 0:
		return errors.New("bench: Cycles, Slice and Warmup must not be negative")
	case slices.ContainsFunc(cfg.Ns, func(n int) bool { return n < 1 }):
		return fmt.Errorf("bench: every N must be at least 1 (got %v)", cfg.Ns)
	case cfg.Addrs != nil && len(cfg.Addrs) < slices.Max(cfg.Ns):
		return fmt.Errorf("bench: %d addresses for N up to %d", len(cfg.Addrs), slices.Max(cfg.Ns))
	}
	for _, c := range cfg.Contenders {
		if c.Name == "" || strings.ContainsAny(c.Name, ":{}*?[]") || c.Open == nil {
			return fmt.Errorf("bench: contender %q needs a name without ':{}*?[]' and an Open", c.Name)
		}
	}
	for _, c := range cfg.Conditions {
		if c.Name == "" || strings.ContainsAny(c.Name, ":{}*?[]") {
			return fmt.Errorf("bench: condition %q needs a name without ':{}*?[]'", c.Name)
		}
	}
	return nil
}

// entry is one contender with N masters under one condition.
type entry struct {
	c    Contender
	n    int
	cond Condition
	l    Locker

	lat            []time.Duration
	errors         int
	consecutive    int
	attempts       int
	busy           time.Duration
	mallocs, bytes uint64
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
	if e.err == nil {
		e.err = err
	}
}

// Run runs every contender with every N under every condition, interleaved:
// in each round every (contender, N, condition) runs Slice cycles from one
// goroutine, in an order shuffled per round, until each has run Cycles.
// Every locker is opened (and warmed up) before the first round and closed
// after the last, then the servers are scanned for the keys each left. It
// returns one Row per contender, N and condition, ordered by condition, N
// and contender. Cycles that fail are counted in the row; Run itself fails
// only when a server cannot be started, a locker cannot be opened, the
// servers cannot be scanned, or ctx ends (nothing bounds one cycle but ctx).
func Run(ctx context.Context, cfg Config) (rows []Row, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	addrs := cfg.Addrs
	if addrs == nil {
		var stop func() error
		addrs, stop, err = StartServers(slices.Max(cfg.Ns))
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	run, err := runID()
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}

	var entries []*entry
	closeAll := func() {
		for _, e := range entries {
			if e.l == nil {
				continue
			}
			if err := e.l.Close(); err != nil && e.err == nil {
				e.err = fmt.Errorf("close: %w", err)
			}
			e.l = nil
		}
	}
	defer closeAll()
	for _, cond := range cfg.Conditions {
		for _, n := range cfg.Ns {
			for _, c := range cfg.Contenders {
				if !c.runs(n) {
					continue
				}
				e := &entry{c: c, n: n, cond: cond, lat: make([]time.Duration, 0, cfg.Cycles)}
				t := Target{Addrs: addrs[:n], Key: lockKey(run, c.Name, n, cond.Name), TTL: cfg.TTL, Dial: cond.Dialer()}
				if e.l, err = c.Open(t); err != nil {
					return nil, fmt.Errorf("bench: opening %s: %w", e.id(), err)
				}
				entries = append(entries, e)
			}
		}
	}
	logf("run %s: %d contenders x N x conditions, %d masters, %d warm-up + %d cycles each in slices of %d",
		run, len(entries), slices.Max(cfg.Ns), cfg.Warmup, cfg.Cycles, cfg.Slice)

	for _, e := range entries {
		for range cfg.Warmup {
			if err := e.l.Cycle(ctx); err != nil && e.err == nil {
				e.err = fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	rng := mrand.New(mrand.NewPCG(cfg.Seed, 0))
	order := slices.Clone(entries)
	rounds := 0
	if cfg.Slice > 0 {
		rounds = (cfg.Cycles + cfg.Slice - 1) / cfg.Slice
	}
	var before, after runtime.MemStats
	for r := range rounds {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, e := range order {
			k := min(cfg.Slice, e.remaining(cfg.Cycles))
			if k <= 0 {
				continue
			}
			runtime.ReadMemStats(&before)
			start := time.Now()
			for range k {
				t0 := time.Now()
				err := e.l.Cycle(ctx)
				d := time.Since(t0)
				e.attempts++
				if err != nil {
					e.fail(err)
					if e.consecutive >= maxConsecutiveErrors || ctx.Err() != nil {
						break
					}
					continue
				}
				e.consecutive = 0
				e.lat = append(e.lat, d)
			}
			e.busy += time.Since(start)
			runtime.ReadMemStats(&after)
			e.mallocs += after.Mallocs - before.Mallocs
			e.bytes += after.TotalAlloc - before.TotalAlloc
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if rounds >= 10 && (r+1)%(rounds/10) == 0 {
			logf("round %d/%d", r+1, rounds)
		}
	}

	closeAll()
	left, err := leftovers(ctx, addrs[:slices.Max(cfg.Ns)], run)
	if err != nil {
		return nil, fmt.Errorf("bench: scanning for leftover keys: %w", err)
	}
	for _, e := range entries {
		row := Row{Contender: e.c.Name, N: e.n, Condition: e.cond.Name, Cycles: len(e.lat), Errors: e.errors, OrphanKeys: left[e.id()]}
		summarise(&row, e.lat, e.busy)
		if e.attempts > 0 {
			row.AllocsPerCycle = float64(e.mallocs) / float64(e.attempts)
			row.BytesPerCycle = float64(e.bytes) / float64(e.attempts)
		}
		if e.err != nil {
			row.Err = e.err.Error()
		}
		rows = append(rows, row)
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
