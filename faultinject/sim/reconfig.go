package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/reconfig"
	"github.com/quorumlock/quorumlock/redlock"
)

// Change is a change of the masters during a schedule (family Reconfig;
// docs/simulation.md, "Changing the masters"). The first configuration,
// epoch 1, is masters [0, Masters-Spares); the change goes to To one
// master per step (reconfig.Plan: adds, then removes), or, Joint, in the
// two steps of joint mode (reconfig.Joint), as package reconfig
// drives it on real masters: each step's record goes to the masters of the
// old set first (a removed master gets its removed form, which refuses
// every vote), to the masters it adds once a quorum of the old set took
// it, and is published once a quorum of the new set holds it; the next
// step starts the configuration's Wait after that (knobs.NoReconfigWait:
// at once). The clients' calls carry their configuration's record
// (memnode.WithRecord, as redisnode's after SetConfig); a client loads a
// published configuration Lags after it is published, and the newest at
// once when a master refuses it as stale (redlock.ErrConfigStale). A
// master that restarts gets the record it held written again (an operator's
// `quorumlock reconfig repair`).
type Change struct {
	Spares int
	// To is the last configuration's masters, by index.
	To []int
	// At is when the first step starts, from the workload's start.
	At time.Duration
	// Lags: how long after step s's configuration is published client c
	// loads it, Lags[s][c].
	Lags [][]time.Duration
	// Never is a client that loads a configuration only when a master
	// refuses it as stale (a host the published file does not reach), -1
	// for none.
	Never int
	// Joint: the change goes through joint mode (two steps) instead of
	// one master per step.
	Joint bool
}

func (ch *Change) String() string {
	return fmt.Sprintf("change: %d spares, to masters %v from %v%s, never-told client %d, lags %v", ch.Spares, ch.To, ch.At, map[bool]string{true: " through joint mode"}[ch.Joint], ch.Never, ch.Lags)
}

// masterAddr is master m's address in a configuration (a record names
// host:port; the links name m%d).
func masterAddr(m int) string { return fmt.Sprintf("m%d:6379", m) }

// masterIndex is masterAddr's inverse (-1 for another form).
func masterIndex(a string) int {
	var m int
	if _, err := fmt.Sscanf(a, "m%d:6379", &m); err != nil {
		return -1
	}
	return m
}

// configs returns the configurations of plan p's change, epoch 1 first:
// the longest key life is the plan's TTL (no lock-delay in family
// Reconfig), the drift factor the plan's.
func (p Plan) configs() ([]wire.Config, error) {
	first := wire.Config{Epoch: 1, Quorum: (p.Masters-p.Change.Spares)/2 + 1, MaxKeyTTL: (p.TTL + p.Delay).Truncate(time.Millisecond), DriftFactor: p.Drift}
	for m := range p.Masters - p.Change.Spares {
		first.Masters = append(first.Masters, masterAddr(m))
	}
	var to []string
	for _, m := range p.Change.To {
		to = append(to, masterAddr(m))
	}
	plan := reconfig.Plan
	if p.Change.Joint {
		plan = reconfig.Joint
	}
	steps, err := plan(first, to)
	if err != nil {
		return nil, err
	}
	return append([]wire.Config{first}, steps...), nil
}

// changeRun is a run's change: its configurations, which one is published,
// each client's, and the clients replaced by a reload (closed at the end).
type changeRun struct {
	cfgs []wire.Config
	// Under world.mu:
	published int   // index in cfgs
	loaded    []int // [client]: index in cfgs of its client's configuration
	retired   []*redlock.Client
	held      []string // [master]: the record it last took (repairs write it again)
	ended     bool     // finish began: no more reloads
	step      int      // the step the changer is at: a write of an earlier one stops
	// unchecked: no records (a Script without Records): the clients'
	// lists alone.
	unchecked bool
}

func (w *world) newChange() *changeRun {
	cfgs, err := w.plan.configs()
	if err != nil {
		panic(err)
	}
	return &changeRun{cfgs: cfgs, loaded: make([]int, w.plan.Clients), held: make([]string, w.plan.Masters)}
}

// index returns the masters of cfg by index, in its clients' order
// (Config.All: both sets in joint mode).
func (ch *changeRun) index(cfg wire.Config) []int {
	all := cfg.All()
	out := make([]int, len(all))
	for i, a := range all {
		for m := range ch.held {
			if masterAddr(m) == a {
				out[i] = m
			}
		}
	}
	return out
}

// initRecords writes the first configuration's record on its masters
// (reconfig.Changer.Init), before the clients start; none without
// records. In a fenced plan each spare holds every lock's fencing counter
// at token 1 first, unstamped, as from a time before the records when it
// was a master (reconfig.pml's PRIOR_FENCE): the epoch stamp must keep a
// quorum that meets such counters from repeating a token.
func (w *world) initRecords() {
	ch := w.change
	if w.plan.Change != nil && w.plan.Fencing {
		first := ch.index(ch.cfgs[0])
		for m := range w.plan.Masters {
			if !slices.Contains(first, m) {
				for _, name := range w.plan.Names {
					priorCounter(w.masters[m], name, 1, w.plan.TTL)
				}
			}
		}
	}
	if ch.unchecked {
		return
	}
	for _, m := range ch.index(ch.cfgs[0]) {
		if err := w.masters[m].SetRecord(context.Background(), ch.cfgs[0].Record()); err != nil {
			panic(err)
		}
		ch.held[m] = ch.cfgs[0].Record()
	}
}

// writeRecord writes step s's record rec on master m, again every 20ms
// until it takes it (a paused master applies it on resume), the workload
// ends, or a later step began (whose record must not be overwritten: on
// real masters reconfig.lua refuses a write of an older step); it reports
// whether it did.
func (w *world) writeRecord(m int, rec string, s int, end time.Time) bool {
	for time.Now().Before(end) {
		w.mu.Lock()
		later := w.change.step > s
		w.mu.Unlock()
		if later {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
		err := w.masters[m].SetRecord(ctx, rec)
		cancel()
		if err == nil {
			w.mu.Lock()
			w.change.held[m] = rec
			w.mu.Unlock()
			return true
		}
		sleep(20*time.Millisecond, nil)
	}
	return false
}

// changer runs the change's steps, publishes each, and tells the clients
// after their lags; it returns by the workload's end.
func (w *world) changer() {
	ch, spec := w.change, w.plan.Change
	end := w.t0.Add(w.plan.Duration)
	var bg sync.WaitGroup // writes to stragglers, and the clients' reloads
	defer bg.Wait()
	time.Sleep(time.Until(w.t0.Add(spec.At)))
	for s := 1; s < len(ch.cfgs); s++ {
		from, to := ch.cfgs[s-1], ch.cfgs[s]
		w.mu.Lock()
		ch.step = s
		w.mu.Unlock()
		if !w.step(&bg, s, from, to, end) {
			w.log("change: step to epoch %d not done by the end", to.Epoch)
			return
		}
		w.mu.Lock()
		ch.published = s
		w.mu.Unlock()
		w.log("change: epoch %d published: %v", to.Epoch, to.Masters)
		for c := range w.plan.Clients {
			if c == spec.Never {
				continue
			}
			lag := spec.Lags[s-1][c]
			bg.Go(func() {
				time.Sleep(lag)
				w.reload(c, s)
			})
		}
		if s+1 < len(ch.cfgs) && !knobs.NoReconfigWait.Load() { // a test-only switch (internal/knobs)
			time.Sleep(to.Wait())
		}
	}
}

// step installs to over from: the masters of from first (a removed one
// gets the removed form), the masters to adds once a quorum of from took
// it; it returns once a quorum of to holds it (the commit point), false if
// the workload ended first. Writes to the other masters go on in bg.
func (w *world) step(bg *sync.WaitGroup, s int, from, to wire.Config, end time.Time) bool {
	ch := w.change
	old, neu := ch.index(from), ch.index(to)
	took := make(chan int, w.plan.Masters)
	write := func(m int, rec string) {
		bg.Go(func() {
			if w.writeRecord(m, rec, s, end) {
				took <- m
			}
		})
	}
	for _, m := range old {
		if slices.Contains(neu, m) {
			write(m, to.Record())
		} else {
			write(m, to.Removed())
		}
	}
	have := map[int]bool{}
	timeout := time.NewTimer(time.Until(end))
	defer timeout.Stop()
	until := func(cfg wire.Config) bool { // a quorum of each of cfg's sets took it
		for {
			if cfg.Reached(func(a string) bool { return have[masterIndex(a)] }) {
				return true
			}
			select {
			case m := <-took:
				have[m] = true
			case <-timeout.C:
				return false
			}
		}
	}
	if !until(from) {
		return false
	}
	for _, m := range neu {
		if !slices.Contains(old, m) {
			write(m, to.Record())
		}
	}
	return until(to)
}

// reload moves client c to configuration s unless it is there or later,
// or the run is ending: a new client on s's masters, with their records;
// the old one goes on for the leases it holds and is closed at the end.
func (w *world) reload(c, s int) {
	w.mu.Lock()
	skip := w.change.ended || w.change.loaded[c] >= s
	w.mu.Unlock()
	if skip {
		return
	}
	ns, q := w.nodes(c, s)
	g := w.build(c, ns, q)
	w.mu.Lock()
	if w.change.ended || w.change.loaded[c] >= s {
		w.mu.Unlock()
		w.closeClient(c, g.client)
		return
	}
	w.change.retired = append(w.change.retired, w.clients[c])
	w.change.loaded[c] = s
	w.clients[c], w.mutexes[c], w.rws[c], w.sems[c] = g.client, g.mutexes, g.rws, g.sems
	w.mu.Unlock()
	w.log("c%d loads epoch %d", c, w.change.cfgs[s].Epoch)
}

// epochNote is ", epoch E" for a hold granted on a Change's configuration
// (the history's lines say on which), "" without a change.
func (w *world) epochNote(h *hold) string {
	if w.change == nil {
		return ""
	}
	return fmt.Sprintf(", epoch %d", w.change.cfgs[h.cfg].Epoch)
}

// staleRefusal is a worker's reaction to err: a master said its configuration
// is stale, so client c loads the newest published one.
func (w *world) staleRefusal(c int, err error) {
	if w.change == nil || !errors.Is(err, redlock.ErrConfigStale) {
		return
	}
	w.mu.Lock()
	s := w.change.published
	w.mu.Unlock()
	w.reload(c, s)
}

// repair writes again the record master m held before it restarted (a
// restart's record is of another run: it votes for nobody until then), as
// an operator's `quorumlock reconfig repair` does.
func (w *world) repair(m int) {
	w.mu.Lock()
	rec := w.change.held[m]
	w.mu.Unlock()
	if rec != "" {
		_ = w.masters[m].SetRecord(context.Background(), rec) // it just restarted: it takes it at once
	}
}

// closeClient closes cl (client c's) with the world's bound.
func (w *world) closeClient(c int, cl *redlock.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Close(ctx); err != nil {
		w.violate("c%d: Close: %v", c, err)
	}
}

// configured is a link as a client of one configuration sees it: the
// calls that count a vote carry the configuration's record to the master
// (memnode.WithRecord), as a redisnode.Node's do after SetConfig. The
// link's other calls (releases, LeaveQueue, Info, Watch) are its own.
type configured struct {
	simNode
	rec string
}

// simNode is a link (or a script's link) as the coordinator uses it.
type simNode interface {
	redlock.FencingNode
	redlock.ShapeNode
	redlock.QueueNode
}

// recordKey is the context key of a call's record on its way through a
// link (carried).
type recordKey struct{}

// carried returns d, the context a link's delivery runs the master's
// command on, with the record the call's context carries.
func carried(call, d context.Context) context.Context {
	if rec, ok := call.Value(recordKey{}).(string); ok {
		return memnode.WithRecord(d, rec)
	}
	return d
}

func (c configured) with(ctx context.Context) context.Context {
	return context.WithValue(ctx, recordKey{}, c.rec)
}

func (c configured) Acquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return c.simNode.Acquire(c.with(ctx), key, value, ttl)
}

func (c configured) AcquireFenced(ctx context.Context, key, value string, ttl time.Duration) (bool, int64, error) {
	return c.simNode.AcquireFenced(c.with(ctx), key, value, ttl)
}

func (c configured) AcquireQueued(ctx context.Context, key, value string, ttl time.Duration, wt redlock.Waiter) (bool, int64, error) {
	return c.simNode.AcquireQueued(c.with(ctx), key, value, ttl, wt)
}

func (c configured) RaiseFence(ctx context.Context, key, value string, token int64) (bool, error) {
	return c.simNode.RaiseFence(c.with(ctx), key, value, token)
}

func (c configured) Extend(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	return c.simNode.Extend(c.with(ctx), key, value, ttl)
}

func (c configured) AcquireHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (int, error) {
	return c.simNode.AcquireHold(c.with(ctx), key, h, ttl)
}

func (c configured) ExtendHold(ctx context.Context, key string, h redlock.Hold, ttl time.Duration) (bool, error) {
	return c.simNode.ExtendHold(c.with(ctx), key, h, ttl)
}

// changeStream seeds the random stream a Reconfig plan's Change is drawn
// from.
const changeStream = 0xc4a9

// drawChange draws a Reconfig plan's change: two of the five first masters
// (of seven) replaced by the two spares, starting in the workload's first
// half second, one master per step in half the plans and through joint
// mode in the other half; each client loads each step up to three TTLs
// late, and in half the plans one client is never told.
func (p *Plan) drawChange(seed uint64) {
	if p.Family != Reconfig {
		return
	}
	r := rand.New(rand.NewPCG(seed, changeStream))
	out := r.Perm(5)[:2]
	ch := &Change{Spares: 2, At: time.Duration(r.Int64N(int64(500 * time.Millisecond))), Never: -1}
	for m := range 5 {
		if !slices.Contains(out, m) {
			ch.To = append(ch.To, m)
		}
	}
	ch.To = append(ch.To, 5, 6)
	for range 4 { // the steps: two adds, two removes
		lags := make([]time.Duration, p.Clients)
		for c := range lags {
			lags[c] = time.Duration(r.Int64N(int64(3 * p.TTL)))
		}
		ch.Lags = append(ch.Lags, lags)
	}
	if r.IntN(2) == 0 {
		ch.Never = r.IntN(p.Clients)
	}
	ch.Joint = r.IntN(2) == 0 // drawn last: the draws above are as before joint mode
	p.Change = ch
}

// change is the changeRun of a Script with Configs: its epochs as
// configurations (the masters named as in a Change, the key life the
// TTL).
func (s Script) change(p Plan) *changeRun {
	ch := &changeRun{loaded: make([]int, p.Clients), held: make([]string, p.Masters), unchecked: !s.Records}
	for e, sc := range s.Configs {
		cfg := wire.Config{Epoch: int64(e + 1), Quorum: sc.Quorum, OldQuorum: sc.OldQuorum, MaxKeyTTL: (p.TTL + p.Delay + time.Millisecond - 1).Truncate(time.Millisecond), DriftFactor: p.Drift}
		for _, m := range sc.Masters {
			cfg.Masters = append(cfg.Masters, masterAddr(m))
		}
		for _, m := range sc.Old {
			cfg.Old = append(cfg.Old, masterAddr(m))
		}
		if err := cfg.Check(); err != nil {
			panic(fmt.Sprintf("sim: script %s: epoch %d: %v", s.Name, e+1, err))
		}
		ch.cfgs = append(ch.cfgs, cfg)
	}
	return ch
}

// install writes configuration s's record on master m (its removed form
// when s's set leaves m out), as a step does.
func (w *world) install(m, s int) {
	cfg := w.change.cfgs[s]
	rec := cfg.Record()
	if !slices.Contains(w.change.index(cfg), m) {
		rec = cfg.Removed()
	}
	if err := w.masters[m].SetRecord(context.Background(), rec); err != nil {
		w.violate("install epoch %d on m%d: %v", cfg.Epoch, m, err)
		return
	}
	w.mu.Lock()
	w.change.held[m] = rec
	w.mu.Unlock()
	w.log("m%d takes epoch %d%s", m, cfg.Epoch, map[bool]string{true: " (removed)"}[rec != cfg.Record()])
}
