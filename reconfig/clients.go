package reconfig

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// Source returns the current configuration: a file (FileSource), a key
// (KeySource), the masters' records (MastersSource), a service the caller
// asks. It must give only configurations whose step committed: what
// `quorumlock reconfig` and Step's caller publish after the commit point,
// or what is sealed on a quorum (MastersSource). A step that never
// committed may be one of two records of its epoch (it was aborted by
// another), whose clients would not meet.
type Source func(ctx context.Context) (Config, error)

// FileSource reads the file WriteFile (and quorumlock reconfig) writes.
func FileSource(path string) Source {
	return func(context.Context) (Config, error) { return ReadFile(path) }
}

// KeySource reads the configuration published at key on rdb (WriteKey):
// for clients that share a Redis, not a file. It fails when the key is
// absent or holds no configuration.
func KeySource(rdb redis.Cmdable, key string) Source {
	return func(ctx context.Context) (Config, error) {
		text, err := rdb.Get(ctx, key).Result()
		if errors.Is(err, redis.Nil) {
			return Config{}, fmt.Errorf("reconfig: key %q holds no configuration", key)
		}
		if err != nil {
			return Config{}, fmt.Errorf("reconfig: read key %q: %w", key, err)
		}
		cfg, err := wire.ParseConfig(text)
		if err != nil {
			return Config{}, fmt.Errorf("reconfig: key %q: %w", key, err)
		}
		return cfg, nil
	}
}

//go:embed publish.lua
var publishSrc string

var publishScript = redis.NewScript(publishSrc)

// WriteKey publishes cfg at key on rdb for KeySource (Config.Text, the
// file's form), in one step that never goes back: it changes nothing and
// errors, wrapping ErrRefused, when the key holds a later epoch or another
// configuration of cfg's epoch. Publishing the same configuration again is
// not an error.
func WriteKey(ctx context.Context, rdb redis.Cmdable, key string, cfg Config) error {
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("reconfig: publish at %q: %w", key, err)
	}
	// The same configuration, its masters in another order, is published
	// already (its record, which sorts them, is the same).
	if cur, err := KeySource(rdb, key)(ctx); err == nil && cur.Record() == cfg.Record() {
		return nil
	}
	err := publishScript.Run(ctx, rdb, []string{key}, cfg.Text(), cfg.Epoch).Err()
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "QLPUBLISH ") {
		return fmt.Errorf("%w: publish epoch %d at %q: the key holds %s", ErrRefused, cfg.Epoch, key, strings.TrimPrefix(rerr.Error(), "QLPUBLISH "))
	}
	if err != nil {
		return fmt.Errorf("reconfig: publish at %q: %w", key, err)
	}
	return nil
}

// MastersSource reads the configuration from the masters' own records: the
// newest configuration that a quorum of its own masters (of each set, in
// joint mode) hold sealed (written by their current server runs), so a
// step counts once it has committed and been sealed (Step seals right
// after its commit point), whether or not it was published. A record that
// is installed but not sealed is not given: a step that never committed
// (an operator's step cut short, then aborted by another step of its
// epoch) leaves such records, and clients on them would not meet the
// clients of the step that did commit. masters reaches every master a
// configuration may name, by address, as Changer.Masters does (clients
// that apply context deadlines to socket I/O; a removed master's record is
// not read as its configuration). It fails when no
// configuration is held by a quorum of its masters.
func MastersSource(masters map[string]redis.Cmdable) Source {
	ch := &Changer{Masters: masters}
	return func(ctx context.Context) (Config, error) {
		held := map[string]map[string]bool{} // record: the masters that hold it
		configs := map[string]Config{}
		var errs []error
		for addr := range masters {
			r, err := ch.Read(ctx, addr)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if r.Config.Epoch == 0 || r.Lost || r.Removed || !r.Config.Has(addr) || r.Sealed.IsZero() {
				continue
			}
			rec := r.Config.Record()
			if held[rec] == nil {
				held[rec] = map[string]bool{}
			}
			held[rec][addr] = true
			configs[rec] = r.Config
		}
		var best Config
		for rec, on := range held {
			if c := configs[rec]; c.Epoch > best.Epoch && c.Reached(func(m string) bool { return on[m] }) {
				best = c
			}
		}
		if best.Epoch == 0 {
			err := fmt.Errorf("reconfig: no configuration is held sealed by a quorum of its masters (%d of %d masters read)", len(masters)-len(errs), len(masters))
			if len(errs) > 0 {
				err = fmt.Errorf("%w: %w", err, errors.Join(errs...))
			}
			return Config{}, err
		}
		return best, nil
	}
}

// Clients keeps a redlock.Client on the newest configuration its Source
// gives, each of its nodes sending that configuration's record
// (redisnode.Node.SetConfig), with the configuration's quorum: in joint
// mode its nodes are both sets' masters (Config.All) and a lock needs a
// quorum of each (QuorumOptions). When a
// lock's call fails with redlock.ErrConfigStale, Reload gives the client of
// the configuration that replaced it. A client it replaced stays open, so
// that its leases can still be extended and released, until Close. It is
// safe for concurrent use.
type Clients struct {
	src  Source
	dial func(addr string) (*redisnode.Node, error)
	opts []redlock.ClientOption

	building sync.Mutex // one client built at a time (use)
	mu       sync.Mutex
	cur      *redlock.Client
	cfg      Config
	built    []built // every client built, to close
	closed   bool
}

type built struct {
	c     *redlock.Client
	nodes redisnode.Nodes
}

// NewClients loads the configuration from src and builds its client.
// dial makes a master's node from its address in Config.All (nil:
// redisnode.Dial; give one that adds credentials or TLS); opts are the
// client's options (the configuration's quorum, QuorumOptions, is set
// after them and replaces any WithQuorum or WithQuorumOf among them).
// It fails when src fails or the client cannot be built.
func NewClients(ctx context.Context, src Source, dial func(addr string) (*redisnode.Node, error), opts ...redlock.ClientOption) (*Clients, error) {
	if src == nil {
		return nil, errors.New("reconfig: NewClients: nil source")
	}
	if dial == nil {
		dial = redisnode.Dial
	}
	c := &Clients{src: src, dial: dial, opts: opts}
	cfg, err := src(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconfig: load the configuration: %w", err)
	}
	if err := c.use(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Client returns the client of the newest configuration loaded, and that
// configuration.
func (c *Clients) Client() (*redlock.Client, Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur, c.cfg
}

// Reload loads the source until it gives a configuration of a later epoch
// than the one in use (a master refuses a client when a step has committed,
// which can come before the step is published), every 100 ms until ctx
// ends, and returns the client built on it. Concurrent calls share the
// newest client. Errors wrap ctx.Err(), or say why the client could not be
// built.
func (c *Clients) Reload(ctx context.Context) (*redlock.Client, error) {
	c.mu.Lock()
	epoch := c.cfg.Epoch
	c.mu.Unlock()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		cfg, err := c.src(ctx)
		c.mu.Lock()
		if c.cfg.Epoch > epoch { // another call reloaded meanwhile
			cur := c.cur
			c.mu.Unlock()
			return cur, nil
		}
		c.mu.Unlock()
		if err == nil && cfg.Epoch > epoch {
			if err := c.use(cfg); err != nil {
				return nil, err
			}
			cur, _ := c.Client()
			return cur, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return nil, fmt.Errorf("reconfig: reload: %w (the source: %v)", ctx.Err(), err)
			}
			return nil, fmt.Errorf("reconfig: reload: %w (the source still gives epoch %d)", ctx.Err(), epoch)
		case <-t.C:
		}
	}
}

// use builds cfg's client and makes it the current one, unless one of cfg's
// epoch or later is in use already (concurrent Reloads build one client).
func (c *Clients) use(cfg Config) error {
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("reconfig: configuration: %w", err)
	}
	c.building.Lock()
	defer c.building.Unlock()
	c.mu.Lock()
	closed, have := c.closed, c.cur != nil && c.cfg.Epoch >= cfg.Epoch
	c.mu.Unlock()
	switch {
	case closed:
		return errors.New("reconfig: Clients closed")
	case have:
		return nil
	}
	var nodes redisnode.Nodes
	fail := func(err error) error {
		_ = nodes.Close()
		return err
	}
	for _, a := range cfg.All() {
		n, err := c.dial(a)
		if err != nil {
			return fail(fmt.Errorf("reconfig: dial %s: %w", a, err))
		}
		nodes = append(nodes, n)
		if err := n.SetConfig(cfg.Record()); err != nil {
			return fail(err)
		}
	}
	rc, err := redlock.New(nodes.Redlock(), append(c.opts[:len(c.opts):len(c.opts)], QuorumOptions(cfg)...)...)
	if err != nil {
		return fail(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.built = append(c.built, built{c: rc, nodes: nodes})
	c.cur, c.cfg = rc, cfg
	return nil
}

// Close closes every client built (redlock.Client.Close, bounded by ctx)
// and their nodes; Reload fails after it.
func (c *Clients) Close(ctx context.Context) error {
	c.building.Lock() // a client being built is kept, then closed here
	defer c.building.Unlock()
	c.mu.Lock()
	all := c.built
	c.built, c.cur, c.closed = nil, nil, true
	c.mu.Unlock()
	var errs []error
	for _, b := range all {
		errs = append(errs, b.c.Close(ctx), b.nodes.Close())
	}
	return errors.Join(errs...)
}

// QuorumOptions are the redlock options of cfg's quorum for a client whose
// nodes are cfg.All(), in that order: WithQuorum(cfg.Quorum) in single
// mode; in joint mode WithQuorumOf for each set (a quorum of the new set
// and one of the old).
func QuorumOptions(cfg Config) []redlock.ClientOption {
	if !cfg.Joint() {
		return []redlock.ClientOption{redlock.WithQuorum(cfg.Quorum)}
	}
	all := cfg.All()
	opts := []redlock.ClientOption{redlock.WithQuorum(0)} // drops the caller's quorum options
	for _, s := range cfg.Sets() {
		idx := make([]int, len(s.Masters))
		for i, m := range s.Masters {
			idx[i] = slices.Index(all, m)
		}
		opts = append(opts, redlock.WithQuorumOf(s.Quorum, idx...))
	}
	return opts
}
