package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/faultinject"
	"github.com/quorumlock/quorumlock/reconfig"
	"github.com/quorumlock/quorumlock/redlock"
)

// Reconfig is a change of the masters during a scenario's run
// (package reconfig, docs/reconfig.md). The clients start on the first
// configuration, masters [0, Nodes-Spares); the change goes to To. Each
// client reloads the configuration when it is published (as a client
// watching the file would) and when a master refuses it as stale.
type Reconfig struct {
	// Spares is how many of the last masters the first configuration
	// leaves out.
	Spares int
	// To is the last configuration's masters, by index.
	To []int
	// At is when the change begins, from the start of the workload.
	At time.Duration
	// Swap is the unsafe twin: no records, and the configuration goes to
	// To in one swap at At, which every client but client 0 loads (client
	// 0's list is never updated: a host the new file did not reach).
	// Without Swap the masters get records (reconfig.Changer.Init before
	// the workload), the clients send them, and the change runs one master
	// per step (reconfig.Plan) with the waits the masters enforce,
	// publishing each step.
	Swap bool
	// Joint: the change goes through joint mode (reconfig.Joint: two
	// steps, a quorum of the old set and of the new while joint) instead
	// of one master per step.
	Joint bool
	// Cut names, per client, the masters its links cannot reach for the
	// whole run (a partition).
	Cut map[int][]int
	// Restart: no steps. At At every master of the first configuration
	// restarts at once with its AOF (appendfsync always: the lock keys and
	// the records come back, the records of another run, so no master
	// votes for a checked client), and once they are back the operator
	// runs reconfig.Changer.Recover and publishes the configuration it
	// returns (the same set, the next epoch). To must be the first
	// configuration's masters; Spares may be 0.
	Restart bool
}

// validate checks the change against a scenario of n masters and k
// clients.
func (rc *Reconfig) validate(n, k int) error {
	first := n - rc.Spares
	switch {
	case rc.Restart && (rc.Swap || rc.Joint || rc.Spares < 0 || first < 1 || !slices.Equal(rc.To, seq(first))):
		return fmt.Errorf("reconfig: a restart of every master with %d spares of %d masters, to %v: want no swap or joint change, and To the first configuration's masters %v", rc.Spares, n, rc.To, seq(first))
	case rc.Swap && rc.Joint:
		return errors.New("reconfig: Swap and Joint: the swap has no records, joint mode needs them")
	case rc.Restart:
	case rc.Spares < 1 || first < 1:
		return fmt.Errorf("reconfig: %d spares of %d masters: want at least one spare and one master", rc.Spares, n)
	case len(rc.To) == 0:
		return errors.New("reconfig: no masters to change to")
	case rc.At < 0:
		return fmt.Errorf("reconfig: at %v is negative", rc.At)
	}
	for j, i := range rc.To {
		if i < 0 || i >= n || slices.Contains(rc.To[:j], i) {
			return fmt.Errorf("reconfig: master %d of To: want distinct indexes below %d", i, n)
		}
	}
	for c, cut := range rc.Cut {
		if c < 0 || c >= k {
			return fmt.Errorf("reconfig: cut of client %d: have %d clients", c, k)
		}
		for _, i := range cut {
			if i < 0 || i >= n {
				return fmt.Errorf("reconfig: client %d's cut master %d: have %d masters", c, i, n)
			}
		}
	}
	return nil
}

// change is a run's change of the masters: the published configuration,
// the clients built on it, and the changer.
type change struct {
	r       *run
	spec    *Reconfig
	records bool
	addrs   []string // the masters' addresses, by index
	build   func(k int, nodes []redlock.Node, quorum []redlock.ClientOption) (*redlock.Client, locker, error)

	mu        sync.Mutex
	published reconfig.Config
	clients   map[int]*changeClient
	all       []*redlock.Client // every client built, to close at the end
	admins    []*redis.Client
	done      bool // the change finished
}

// changeClient is one workload client's view: its link and the epoch it
// loaded.
type changeClient struct {
	link  *faultinject.Link
	epoch int64
}

func newChange(r *run, build func(k int, nodes []redlock.Node, quorum []redlock.ClientOption) (*redlock.Client, locker, error)) *change {
	sc := r.sc
	ch := &change{r: r, spec: sc.Reconfig, records: !sc.Reconfig.Swap, build: build, clients: map[int]*changeClient{}}
	for i := range r.cluster.N() {
		ch.addrs = append(ch.addrs, r.cluster.ServerAddr(i))
	}
	r.closers = append(r.closers, ch.closeAdmins) // also when the run fails before its end
	first := ch.addrs[:r.cluster.N()-sc.Reconfig.Spares]
	ch.published = reconfig.Config{Epoch: 1, Masters: slices.Clone(first), Quorum: len(first)/2 + 1,
		MaxKeyTTL: sc.TTL.Truncate(time.Millisecond), DriftFactor: cmpOr(sc.DriftFactor, 0.01)}
	return ch
}

func cmpOr(f, def float64) float64 {
	if f > 0 {
		return f
	}
	return def
}

// changer returns a reconfig.Changer on every master, by its server
// address (not through a proxy: the operator's connection).
func (ch *change) changer() *reconfig.Changer {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	masters := map[string]redis.Cmdable{}
	if ch.admins == nil {
		for _, a := range ch.addrs {
			ch.admins = append(ch.admins, redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true, Protocol: 2, DisableIdentity: true, MaxRetries: -1}))
		}
	}
	for i, a := range ch.addrs {
		masters[a] = ch.admins[i]
	}
	return &reconfig.Changer{Masters: masters, Log: func(l string) { ch.r.logf("chaos: %s: %s", ch.r.sc.Name, l) }}
}

// closeAdmins closes the changer's connections (a run's closer).
func (ch *change) closeAdmins() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var errs []error
	for _, a := range ch.admins {
		errs = append(errs, a.Close())
	}
	ch.admins = nil
	return errors.Join(errs...)
}

// init writes the first record on its masters (not for Swap).
func (ch *change) init(ctx context.Context) error {
	if !ch.records {
		return nil
	}
	return ch.changer().Init(ctx, ch.published)
}

// client builds client k's lock client on the published configuration,
// over link, with the partition of Reconfig.Cut injected once.
func (ch *change) client(ctx context.Context, k int, link *faultinject.Link) (*redlock.Client, locker, error) {
	if cut := ch.spec.Cut[k]; len(cut) > 0 {
		if err := (faultinject.Partition{Nodes: cut, Link: link.Name()}).Inject(ctx, ch.r.cluster); err != nil {
			return nil, locker{}, err
		}
		ch.r.faults.Add(1)
	}
	ch.mu.Lock()
	ch.clients[k] = &changeClient{link: link}
	ch.mu.Unlock()
	return ch.load(k)
}

// load builds client k's client on the published configuration.
func (ch *change) load(k int) (*redlock.Client, locker, error) {
	ch.mu.Lock()
	cfg, cc := ch.published, ch.clients[k]
	ch.mu.Unlock()
	nodes := make([]redlock.Node, 0, len(cfg.All()))
	for _, a := range cfg.All() {
		n := cc.link.Node(slices.Index(ch.addrs, a))
		if ch.records {
			if err := n.SetConfig(cfg.Record()); err != nil {
				return nil, locker{}, err
			}
		}
		nodes = append(nodes, n)
	}
	rc, l, err := ch.build(k, nodes, reconfig.QuorumOptions(cfg))
	if err != nil {
		return nil, locker{}, err
	}
	ch.mu.Lock()
	cc.epoch = cfg.Epoch
	ch.all = append(ch.all, rc)
	ch.mu.Unlock()
	return rc, l, nil
}

// refresh returns client k's locker for its next attempt: l, or one built
// on a newer published configuration (for Swap, never for client 0). After
// a refusal as stale (err) it waits, polling every 10 ms until ctx ends,
// for the configuration that the refusal says exists to be published.
func (ch *change) refresh(ctx context.Context, k int, l locker, err error) locker {
	if ch.spec.Swap && k == 0 {
		return l
	}
	stale := errors.Is(err, redlock.ErrConfigStale)
	for ctx.Err() == nil {
		ch.mu.Lock()
		newer := ch.published.Epoch > ch.clients[k].epoch
		ch.mu.Unlock()
		if newer {
			_, nl, err := ch.load(k)
			if err != nil {
				ch.r.fail(fmt.Errorf("client %d: reload: %w", k, err))
				return l
			}
			return nl
		}
		if !stale {
			return l
		}
		sleep(ctx, 10*time.Millisecond)
	}
	return l
}

// run makes the change At after the workload starts: one swap, or the
// steps of reconfig.Plan (reconfig.Joint), each published once it is
// committed and sealed.
func (ch *change) run(ctx context.Context) {
	sleep(ctx, ch.spec.At)
	if ctx.Err() != nil {
		return
	}
	ch.mu.Lock()
	from := ch.published
	ch.mu.Unlock()
	var to []string
	for _, i := range ch.spec.To {
		to = append(to, ch.addrs[i])
	}
	if ch.spec.Restart {
		ch.restartAndRecover(ctx, from)
		return
	}
	if ch.spec.Swap {
		next := reconfig.Config{Epoch: from.Epoch + 1, Masters: to, Quorum: len(to)/2 + 1, MaxKeyTTL: from.MaxKeyTTL, DriftFactor: from.DriftFactor}
		ch.publish(next)
		ch.r.faults.Add(1)
		ch.finish()
		return
	}
	plan := reconfig.Plan
	if ch.spec.Joint {
		plan = reconfig.Joint
	}
	steps, err := plan(from, to)
	if err != nil {
		ch.r.fail(err)
		return
	}
	c := ch.changer()
	for _, next := range steps {
		if err := c.Step(ctx, from, next); err != nil {
			if ctx.Err() == nil {
				ch.r.fail(fmt.Errorf("reconfig step to epoch %d: %w", next.Epoch, err))
			}
			return
		}
		ch.publish(next)
		ch.r.faults.Add(1)
		from = next
	}
	ch.finish()
}

// restartAndRecover restarts every master of from at once with its AOF,
// then recovers: Recover until the masters answer (a master still loading
// its AOF may refuse), and publishes the configuration it returns.
func (ch *change) restartAndRecover(ctx context.Context, from reconfig.Config) {
	var nodes []int
	for _, a := range from.Masters {
		nodes = append(nodes, slices.Index(ch.addrs, a))
	}
	if err := (faultinject.Restart{Nodes: nodes, Persistence: faultinject.AOFAlways}).Inject(ctx, ch.r.cluster); err != nil {
		if ctx.Err() == nil {
			ch.r.fail(fmt.Errorf("restart every master: %w", err))
		}
		return
	}
	ch.r.faults.Add(1)
	ch.r.logf("chaos: %s: every master restarted: their records are of another run", ch.r.sc.Name)
	c := ch.changer()
	for {
		next, err := c.Recover(ctx, from)
		if err == nil {
			ch.publish(next)
			ch.finish()
			return
		}
		if ctx.Err() != nil {
			return
		}
		ch.r.logf("chaos: %s: recover: %v (again in 100ms)", ch.r.sc.Name, err)
		sleep(ctx, 100*time.Millisecond)
	}
}

func (ch *change) publish(cfg reconfig.Config) {
	ch.mu.Lock()
	ch.published = cfg
	ch.mu.Unlock()
	ch.r.logf("chaos: %s: published epoch %d: %s", ch.r.sc.Name, cfg.Epoch, cfg.Summary())
}

func (ch *change) finish() {
	ch.mu.Lock()
	ch.done = true
	ch.mu.Unlock()
}

// close closes every client built after the first ones (the run closes
// those); it reports a change that did not finish within the run.
func (ch *change) close(ctx context.Context, first []*redlock.Client) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, rc := range ch.all {
		if !slices.Contains(first, rc) {
			if err := rc.Close(ctx); err != nil {
				ch.r.fail(fmt.Errorf("reloaded client: %w", err))
			}
		}
	}
	if !ch.done {
		ch.r.fail(fmt.Errorf("the change of the masters did not finish within the run (at epoch %d)", ch.published.Epoch))
	}
}

// seq returns 0, 1, ..., n-1.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
