// Package reconfig changes the set of masters while clients hold locks,
// without two holders (docs/reconfig.md). Each master keeps a configuration
// record: the epoch it has reached and the set that epoch names. Clients
// send their record with every call that counts a vote
// (redisnode.Node.SetConfig), and a master whose record is newer refuses
// them (redlock.ErrConfigStale), so no client takes a quorum of a set that
// is no longer current. A Changer moves the masters from one configuration
// to the next one step at a time: one master added or removed per step, so
// that quorums of neighbouring sets always share a master, and a wait of
// Config.Wait between steps that the masters enforce by their own clocks, so
// that no lease of a set two steps back is still valid when the new set
// grants one. Only a Changer writes records (reconfig.lua).
package reconfig

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/redisinfo"
	"github.com/quorumlock/quorumlock/internal/wire"
)

// Config is one configuration of the masters: its epoch, the masters'
// addresses (host:port, sorted), the quorum, the longest key life any lock
// may write (its TTL plus its stretched lock-delay) and the largest drift
// factor of any client. Record is what its clients send (to
// redisnode.Node.SetConfig), Wait the time between two steps, Text the
// form WriteFile and the masters' records keep.
type Config = wire.Config

// ErrRefused is wrapped by the error of a step that a quorum of the old or
// of the new set did not take (each master's answer is in the message).
var ErrRefused = errors.New("reconfig: step refused")

//go:embed reconfig.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// Changer drives changes of one deployment's masters. Its fields are set
// before use and not changed after; its methods may be called one at a time.
type Changer struct {
	// Masters reaches every master that a configuration names, by its
	// address in Config.Masters. The clients should apply context deadlines
	// to socket I/O (ContextTimeoutEnabled), as redisnode's do.
	Masters map[string]redis.Cmdable
	// Log receives one line per event: each master's answer, the commit
	// point, the seals and each wait. Nil: no lines.
	Log func(line string)
	// CallTimeout bounds each call to one master. Zero: 2 s.
	CallTimeout time.Duration
}

func (c *Changer) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, args...))
	}
}

// Next returns the configuration that follows from with masters as its set
// (in the clients' order): the next epoch, a majority quorum, from's longest key life
// and drift factor. It errors when the change is not one step: more than
// one master added or removed, so that a quorum of from and one of the
// result could miss each other.
func Next(from Config, masters []string) (Config, error) {
	to := Config{Epoch: from.Epoch + 1, Masters: slices.Clone(masters), MaxKeyTTL: from.MaxKeyTTL, DriftFactor: from.DriftFactor}
	to.Quorum = len(to.Masters)/2 + 1
	if err := to.Check(); err != nil {
		return Config{}, fmt.Errorf("reconfig: next configuration: %w", err)
	}
	if err := oneStep(from, to); err != nil {
		return Config{}, err
	}
	return to, nil
}

// Plan returns the steps that take from to the set masters one master at a
// time: each master to add is added (at the end), then each master to
// remove is removed, so a replacement is two steps and the set never
// shrinks below either end's size. From a joint configuration the first
// step leaves joint mode: to its old set when masters is that set (an
// abort: the change is undone, which needs a quorum of the old set only,
// so it works when the new set is lost), else to its new set.
func Plan(from Config, masters []string) ([]Config, error) {
	target := masters
	var steps []Config
	if from.Joint() {
		out := Config{Epoch: from.Epoch + 1, Masters: slices.Clone(from.Masters), Quorum: from.Quorum, MaxKeyTTL: from.MaxKeyTTL, DriftFactor: from.DriftFactor}
		if wire.SameSet(masters, from.Old) {
			out.Masters, out.Quorum = slices.Clone(masters), from.OldQuorum
		}
		if err := out.Check(); err != nil {
			return nil, fmt.Errorf("reconfig: out of joint mode: %w", err)
		}
		steps, from = append(steps, out), out
	}
	cur := from
	set := slices.Clone(from.Masters)
	for _, m := range target {
		if !slices.Contains(set, m) {
			set = append(set, m)
			next, err := Next(cur, set)
			if err != nil {
				return nil, err
			}
			steps, cur = append(steps, next), next
		}
	}
	for _, m := range from.Masters {
		if !slices.Contains(target, m) {
			set = slices.DeleteFunc(set, func(s string) bool { return s == m })
			next, err := Next(cur, set)
			if err != nil {
				return nil, err
			}
			steps, cur = append(steps, next), next
		}
	}
	return steps, nil
}

// Joint returns the two steps that take from to the set masters (in the
// clients' order) through joint mode, whatever the number of masters added
// and removed: the joint configuration (masters with a majority quorum,
// and from's set as the old one, a lock needing a quorum of each), then
// masters alone. Each is one step (its quorums meet the previous
// configuration's), so Step takes each, with a wait after each: two waits
// for any change, where Plan's single steps take one per master added or
// removed. from must be in single mode.
func Joint(from Config, masters []string) ([]Config, error) {
	if from.Joint() {
		return nil, fmt.Errorf("reconfig: joint: epoch %d is in joint mode already: finish its change first (Plan leaves joint mode)", from.Epoch)
	}
	if wire.SameSet(masters, from.Masters) {
		return nil, nil // nothing to change
	}
	j := Config{Epoch: from.Epoch + 1, Masters: slices.Clone(masters), Quorum: len(masters)/2 + 1, Old: slices.Clone(from.Masters), OldQuorum: from.Quorum, MaxKeyTTL: from.MaxKeyTTL, DriftFactor: from.DriftFactor}
	to := Config{Epoch: from.Epoch + 2, Masters: slices.Clone(masters), Quorum: j.Quorum, MaxKeyTTL: from.MaxKeyTTL, DriftFactor: from.DriftFactor}
	for _, c := range []Config{j, to} {
		if err := c.Check(); err != nil {
			return nil, fmt.Errorf("reconfig: joint configuration: %w", err)
		}
	}
	return []Config{j, to}, nil
}

// oneStep checks the single-step rule: every quorum of from and every
// quorum of to share a master. A configuration's quorum is a quorum of each
// of its sets (Config.Sets), so it holds when some set of from and some
// set of to have quorums that must meet: Q + Q' > |C u C'|.
func oneStep(from, to Config) error {
	for _, a := range from.Sets() {
		for _, b := range to.Sets() {
			union := len(slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(a.Masters), b.Masters...)))))
			if a.Quorum+b.Quorum > union {
				return nil
			}
		}
	}
	return fmt.Errorf("reconfig: epoch %d -> %d is more than one step: a quorum of %s and one of %s need not share a master (add or remove one master per step, or go through joint mode)", from.Epoch, to.Epoch, from.Summary(), to.Summary())
}

// Init writes epoch 1, cfg, on every master of cfg and seals it. Every
// master must answer first (one that does not: nothing is written) and take
// it: one that has another record refuses, but for an unsealed epoch-1
// record, which only a failed Init leaves (never sealed, never published),
// and which cfg replaces. The first Step waits cfg.Wait from this seal. Call it before the clients send records:
// a client with a record is refused by a master without one.
func (c *Changer) Init(ctx context.Context, cfg Config) error {
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("reconfig: init: %w", err)
	}
	if cfg.Epoch != 1 || cfg.Joint() {
		return fmt.Errorf("reconfig: init: epoch %d (%s): the first configuration is epoch 1, single mode", cfg.Epoch, cfg.Mode())
	}
	if err := c.distinct(ctx, cfg.Masters); err != nil {
		return fmt.Errorf("reconfig: init: %w", err)
	}
	for _, m := range cfg.Masters { // every master answers, or nothing is written
		if _, err := c.Read(ctx, m); err != nil {
			return fmt.Errorf("%w: init: %v: nothing written", ErrRefused, err)
		}
	}
	ans := c.install(ctx, cfg.Masters, cfg, "", func(string) string { return "fresh" })
	for _, m := range cfg.Masters {
		if !ans[m].took() {
			return fmt.Errorf("%w: init: %s: %s (the masters that took it keep it, which changes nothing for clients without a record: run init again once every master answers)", ErrRefused, m, ans[m])
		}
	}
	return c.Seal(ctx, cfg)
}

// Step moves the masters from configuration from to to (to.Epoch =
// from.Epoch + 1, one master added or removed, or into or out of joint
// mode (Joint), the longest key life and drift factor not lowered). It
// installs to on every master of both configurations: a
// master of from takes it only over from's own record, sealed, once from's
// wait has passed by its clock (so a step from a configuration the masters
// do not hold is refused); a master the step adds takes it over none or an
// older record; a master the step removes keeps it in a removed form that
// refuses every client's vote. While the masters refuse it only for the
// wait, Step sleeps the time they report left and installs again (until
// ctx ends). It first reads every master of both configurations and
// writes nothing unless the masters it reads can commit the step. Once a
// quorum of from (of its old set, from a joint configuration) and a quorum
// of each set of to hold to (the commit point: no client at from's epoch
// can count a quorum from then on), it
// seals to (Seal) and returns. A step interrupted anywhere can be run
// again: install and seal are idempotent. Errors wrap ErrRefused (with
// every master's answer) or ctx.Err().
func (c *Changer) Step(ctx context.Context, from, to Config) error {
	if err := from.Check(); err != nil {
		return fmt.Errorf("reconfig: step: from: %w", err)
	}
	if err := to.Check(); err != nil {
		return fmt.Errorf("reconfig: step: to: %w", err)
	}
	if to.Epoch != from.Epoch+1 {
		return fmt.Errorf("reconfig: step: epoch %d -> %d: want one more", from.Epoch, to.Epoch)
	}
	if err := oneStep(from, to); err != nil {
		return err
	}
	if to.MaxKeyTTL < from.MaxKeyTTL || to.DriftFactor < from.DriftFactor {
		// The wait after to's seal is reckoned from to's key life: it must
		// also cover the keys written under from.
		return fmt.Errorf("reconfig: step: epoch %d -> %d lowers the longest key life (%v -> %v) or the drift factor (%v -> %v)", from.Epoch, to.Epoch, from.MaxKeyTTL, to.MaxKeyTTL, from.DriftFactor, to.DriftFactor)
	}
	all := slices.Compact(slices.Sorted(slices.Values(append(from.All(), to.All()...))))
	if err := c.distinct(ctx, all); err != nil {
		return fmt.Errorf("reconfig: step: %w", err)
	}
	// Nothing is written unless the step can commit: a quorum of the sets
	// it needs answers a read now (reachable, the credentials right). A
	// step whose new masters are all down would otherwise leave the old
	// set holding an uncommitted record that refuses its own clients.
	readable := map[string]bool{}
	var unreadable []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range all { // at once: a lost set costs one call timeout, not one each
		wg.Go(func() {
			_, err := c.Read(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unreadable = append(unreadable, err.Error())
				return
			}
			readable[m] = true
		})
	}
	wg.Wait()
	slices.Sort(unreadable)
	if !commitSet(from).Reached(func(m string) bool { return readable[m] }) || !to.Reached(func(m string) bool { return readable[m] }) {
		return fmt.Errorf("%w: epoch %d -> %d: fewer than a quorum of %s or of %s can be read, nothing written: %s", ErrRefused, from.Epoch, to.Epoch, commitSet(from).Summary(), to.Summary(), strings.Join(unreadable, "; "))
	}
	part := func(m string) string {
		switch {
		case !from.Has(m):
			return "fresh"
		case !to.Has(m):
			return "removed"
		}
		return "member"
	}
	c.logf("step: epoch %d -> %d, %s -> %s", from.Epoch, to.Epoch, from.Summary(), to.Summary())
	var added []string
	for _, m := range to.All() {
		if part(m) == "fresh" {
			added = append(added, m)
		}
	}
	for {
		// The masters of from first: a master the step adds takes the
		// record only once a quorum of from did, so a step from a
		// configuration the masters do not hold writes nowhere.
		ans := c.install(ctx, from.All(), to, from.Record(), part)
		took := func(m string) bool { return ans[m].took() }
		oldOK := commitSet(from).Reached(took)
		if oldOK {
			maps.Copy(ans, c.install(ctx, added, to, from.Record(), part))
		}
		newOK := to.Reached(took)
		for _, m := range all {
			if a, ok := ans[m]; ok {
				c.logf("  %s %s", m, a)
			}
		}
		if oldOK && newOK {
			c.logf("  commit point: %s old, %s new", count(ans, commitSet(from)), count(ans, to))
			break
		}
		left := time.Duration(0)
		for _, a := range ans {
			left = max(left, a.wait)
		}
		if left == 0 {
			return fmt.Errorf("%w: epoch %d -> %d: %s old and %s new took it (%s)", ErrRefused, from.Epoch, to.Epoch, count(ans, commitSet(from)), count(ans, to), summary(all, ans))
		}
		c.logf("  waiting %v (the masters' wait since epoch %d was sealed)", left, from.Epoch)
		t := time.NewTimer(left + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("reconfig: step epoch %d -> %d: %w", from.Epoch, to.Epoch, ctx.Err())
		case <-t.C:
		}
	}
	return c.Seal(ctx, to)
}

// answer is one master's answer to an install.
type answer struct {
	reply string        // "installed", "already", or the refusal
	err   error         // the call failed (unreachable, a reply other than ours)
	wait  time.Duration // refused for the wait: the time left
}

func (a answer) took() bool { return a.err == nil && (a.reply == "installed" || a.reply == "already") }

func (a answer) String() string {
	if a.err != nil {
		return "unreachable: " + a.err.Error()
	}
	return a.reply
}

// commitSet is the part of from that a step's commit point needs a quorum
// of (with a quorum of each set of the new configuration): from's set, or
// in joint mode its old set. That quorum shuts out from's clients (a joint
// client needs a quorum of the old set too), and any two steps from one
// configuration meet in it, so two changers cannot both commit: a step
// out of joint mode to the new set and one back to the old set (an abort,
// when the new set is lost) exclude each other. docs/reconfig.md, "Joint
// mode"; model/reconfig.pml's commit point.
func commitSet(from Config) Config {
	if from.Joint() {
		return Config{Epoch: from.Epoch, Masters: from.Old, Quorum: from.OldQuorum}
	}
	return from
}

// count says how many of each of cfg's sets took it: "3 of 5", in joint
// mode "3 of 5 and 2 of 3", each of a quorum.
func count(ans map[string]answer, cfg Config) string {
	var parts []string
	for _, s := range cfg.Sets() {
		n := 0
		for _, m := range s.Masters {
			if ans[m].took() {
				n++
			}
		}
		parts = append(parts, fmt.Sprintf("%d of %d (quorum %d)", n, len(s.Masters), s.Quorum))
	}
	return strings.Join(parts, " and ")
}

func summary(all []string, ans map[string]answer) string {
	parts := make([]string, 0, len(all))
	for _, m := range all {
		a, asked := ans[m]
		if !asked {
			parts = append(parts, m+": not asked (a master the step adds is asked once a quorum of the old set took it)")
			continue
		}
		parts = append(parts, m+": "+a.String())
	}
	return strings.Join(parts, "; ")
}

// install asks every master of set, at once, to take cfg over the record
// from; part names each master's part in the step (reconfig.lua's ARGV[5]).
func (c *Changer) install(ctx context.Context, set []string, cfg Config, from string, part func(string) string) map[string]answer {
	var mu sync.Mutex
	out := map[string]answer{}
	var wg sync.WaitGroup
	flags := ""
	if knobs.NoReconfigWait.Load() { // a test-only switch (internal/knobs)
		flags = "nowait"
	}
	for _, m := range set {
		wg.Go(func() {
			reply, err := c.call(ctx, m, "install", cfg.Record(), cfg.Text(), strconv.FormatInt(cfg.Wait().Milliseconds(), 10), part(m), flags, from)
			a := answer{err: err}
			if err == nil {
				a.reply, _ = reply.(string)
			} else if why, ok := refusal(err); ok {
				a = answer{reply: "refused: " + why}
				if ms, ok := strings.CutPrefix(why, "wait "); ok {
					n, _ := strconv.ParseInt(ms, 10, 64)
					a.wait = time.Duration(n) * time.Millisecond
				}
			}
			mu.Lock()
			out[m] = a
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// Seal seals cfg on every master of cfg that holds it (idempotent: a
// master sealed already keeps its seal), and errors, wrapping ErrRefused,
// when fewer than a quorum of cfg are sealed: the next step would then be
// refused. It runs to the end even when ctx ends (each call bounded by
// CallTimeout), so that a step interrupted after its commit point leaves
// its seals. Step and Init call it; call it again on a configuration whose
// step was interrupted before its seals.
func (c *Changer) Seal(ctx context.Context, cfg Config) error {
	ctx = context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	all := cfg.All()
	lines := make([]string, len(all))
	sealed := make([]bool, len(all))
	for i, m := range all {
		wg.Go(func() {
			reply, err := c.call(ctx, m, "seal", cfg.Record())
			switch why, refused := refusal(err); {
			case err == nil:
				lines[i], sealed[i] = fmt.Sprintf("  %s %v", m, reply), true
			case refused:
				lines[i] = fmt.Sprintf("  %s not sealed: %s", m, why)
			default:
				lines[i] = fmt.Sprintf("  %s not sealed: %v", m, err)
			}
		})
	}
	wg.Wait()
	for _, l := range lines {
		c.logf("%s", l)
	}
	if !cfg.Reached(func(m string) bool { return sealed[slices.Index(all, m)] }) {
		return fmt.Errorf("%w: epoch %d (%s) sealed on fewer than a quorum (%s)", ErrRefused, cfg.Epoch, cfg.Summary(), strings.Join(lines, ";"))
	}
	return nil
}

// refusal returns the reason of a reconfig.lua refusal.
func refusal(err error) (string, bool) {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) {
		return "", false
	}
	return strings.CutPrefix(rerr.Error(), "QLRECONFIG ")
}

// timeout is CallTimeout, 2s when not set.
func (c *Changer) timeout() time.Duration {
	if c.CallTimeout <= 0 {
		return 2 * time.Second
	}
	return c.CallTimeout
}

func (c *Changer) call(ctx context.Context, addr, op string, args ...string) (any, error) {
	rdb, ok := c.Masters[addr]
	if !ok || rdb == nil {
		return nil, fmt.Errorf("no client for master %q in Changer.Masters", addr)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	argv := make([]any, 0, 1+len(args))
	argv = append(argv, op)
	for _, a := range args {
		argv = append(argv, a)
	}
	return script.Run(ctx, rdb, []string{wire.ConfigKey}, argv...).Result()
}

// Repair writes cfg, the current configuration, again on the masters of
// cfg that lost it (no record of the server's current run: a restart, a
// failover) or lag behind it, and seals it there anew, so that their next
// step waits a whole Config.Wait. It first checks that a quorum of cfg
// holds cfg, written by their current runs (cfg's commit point has passed
// and nothing later has): otherwise it changes nothing and errors,
// wrapping ErrRefused. A master that holds a later record is left alone.
func (c *Changer) Repair(ctx context.Context, cfg Config) error {
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("reconfig: repair: %w", err)
	}
	var todo []string
	holds := map[string]bool{}
	for _, m := range cfg.All() {
		r, err := c.Read(ctx, m)
		switch {
		case err != nil:
			c.logf("  %s unreadable: %v", m, err)
		case !r.Lost && !r.Removed && r.Config.Record() == cfg.Record():
			holds[m] = true
		default:
			todo = append(todo, m)
		}
	}
	if !cfg.Reached(func(m string) bool { return holds[m] }) {
		return fmt.Errorf("%w: repair: epoch %d is held by %d masters, fewer than a quorum of its %s: its step has not committed, or the masters moved on", ErrRefused, cfg.Epoch, len(holds), cfg.Summary())
	}
	var errs []error
	for _, m := range todo {
		reply, err := c.call(ctx, m, "repair", cfg.Record(), cfg.Text(), strconv.FormatInt(cfg.Wait().Milliseconds(), 10))
		if why, ok := refusal(err); ok {
			c.logf("  %s not repaired: %s", m, why)
			errs = append(errs, fmt.Errorf("%w: %s holds a newer record (%s): epoch %d is not the masters' last configuration", ErrRefused, m, why, cfg.Epoch))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m, err))
			continue
		}
		c.logf("  %s %v", m, reply)
	}
	if len(errs) > 0 {
		return fmt.Errorf("reconfig: repair: %w", errors.Join(errs...))
	}
	return nil
}

// Recover brings cfg's set back when its masters lost the records a
// quorum needs (the whole fleet restarted: each record is of another run,
// or gone without persistence) and Repair is refused: it writes cfg's set
// at a new epoch, one above every record a master of cfg holds (lost or
// not), on every master of cfg, sealed now, and returns that
// configuration, to be published. The set does not change, so every
// quorum of the new epoch meets every quorum of cfg; clients at an older
// epoch are refused as stale and load the new one, and the next step waits
// a whole Config.Wait from the seal.
//
// It reads every master of Changer.Masters, and changes nothing and
// errors, wrapping ErrRefused, when one cannot be read (it may hold a later
// record); when a quorum of some configuration's masters still hold it
// under their current runs (cfg's: Repair is the command; another's: it is
// not lost, and only a step may change it); or when cfg is not the newest
// configuration the masters recorded, lost or not (a step began after it,
// or cfg was edited: recover the newest one, which `quorumlock reconfig
// recover --from-masters` does). A later epoch of cfg's own set, an
// earlier Recover cut short, is taken as the new epoch and written where
// it is missing (one a quorum holds already is returned as it is). It errors, wrapping ErrRefused, when fewer than a quorum
// of cfg took the new record (run it again). When no master holds any
// record (every one restarted without persistence) nothing tells cfg from
// another set: give it the file's configuration as published.
//
// A step that committed after cfg, whose records every master then lost
// (no persistence), cannot be seen: publish each step as set does before
// anything restarts.
func (c *Changer) Recover(ctx context.Context, cfg Config) (Config, error) {
	if err := cfg.Check(); err != nil {
		return Config{}, fmt.Errorf("reconfig: recover: %w", err)
	}
	if err := c.distinct(ctx, cfg.All()); err != nil {
		return Config{}, fmt.Errorf("reconfig: recover: %w", err)
	}
	same := func(a Config) bool {
		a.Epoch = cfg.Epoch
		return a.Record() == cfg.Record()
	}
	next := cfg
	next.Epoch++
	var newest Config                    // the newest configuration any master recorded, lost or not
	var newestAt string                  // a master that holds it
	live := map[string]map[string]bool{} // record: the masters that hold it live
	configs := map[string]Config{}
	for _, m := range slices.Sorted(maps.Keys(c.Masters)) {
		r, err := c.Read(ctx, m)
		if err != nil {
			return Config{}, fmt.Errorf("%w: recover: %v: a master not read may hold a later record", ErrRefused, err)
		}
		if r.Config.Epoch > newest.Epoch {
			newest, newestAt = r.Config, m
		}
		if r.Config.Epoch > cfg.Epoch && same(r.Config) && !r.Removed {
			next.Epoch = max(next.Epoch, r.Config.Epoch) // an earlier Recover's
		}
		if rec := r.Config.Record(); !r.Lost && !r.Removed && r.Config.Has(m) {
			if live[rec] == nil {
				live[rec] = map[string]bool{}
			}
			live[rec][m] = true // a vote its clients still get
			configs[rec] = r.Config
		}
	}
	for rec, on := range live {
		if l := configs[rec]; l.Reached(func(m string) bool { return on[m] }) {
			switch {
			case rec == cfg.Record():
				return Config{}, fmt.Errorf("%w: recover: %d masters hold epoch %d (%s), a quorum: run repair", ErrRefused, len(on), cfg.Epoch, cfg.Summary())
			case l.Epoch > cfg.Epoch && same(l):
				c.logf("recover: a quorum holds epoch %d of this set already (recovered)", l.Epoch)
				return l, nil
			}
			return Config{}, fmt.Errorf("%w: recover: %d masters hold epoch %d (%s) under their current runs, a quorum: that configuration is not lost (status shows it; change it with set)", ErrRefused, len(on), l.Epoch, l.Summary())
		}
	}
	if newest.Epoch > 0 && newest.Record() != cfg.Record() && !(newest.Epoch > cfg.Epoch && same(newest)) {
		return Config{}, fmt.Errorf("%w: recover: the newest configuration the masters recorded is epoch %d (%s, on %s), not epoch %d of these (%s) (recover --from-masters recovers the newest one)", ErrRefused, newest.Epoch, newest.Summary(), newestAt, cfg.Epoch, cfg.Summary())
	}
	if err := next.Check(); err != nil { // an epoch past wire.MaxEpoch
		return Config{}, fmt.Errorf("%w: recover: epoch %d: %v", ErrRefused, next.Epoch, err)
	}
	c.logf("recover: epoch %d's set written as epoch %d (%s)", cfg.Epoch, next.Epoch, next.Summary())
	took := map[string]bool{}
	var errs []error
	for _, m := range next.All() {
		reply, err := c.call(ctx, m, "repair", next.Record(), next.Text(), strconv.FormatInt(next.Wait().Milliseconds(), 10))
		if why, ok := refusal(err); ok {
			c.logf("  %s refused: %s", m, why)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m, err))
			continue
		}
		took[m] = true
		c.logf("  %s %v", m, reply)
	}
	if !next.Reached(func(m string) bool { return took[m] }) {
		return Config{}, fmt.Errorf("%w: recover: epoch %d taken by %d masters, fewer than a quorum of %s; run it again%w", ErrRefused, next.Epoch, len(took), next.Summary(), joinCause(errs))
	}
	return next, nil
}

// joinCause is ": " and the errors joined, or nothing.
func joinCause(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf(": %w", errors.Join(errs...))
}

// distinct errors when two addresses of set reach one server (the same
// run_id): it would vote once per address.
func (c *Changer) distinct(ctx context.Context, set []string) error {
	seen := map[string]string{}
	for _, m := range set {
		rdb, ok := c.Masters[m]
		if !ok || rdb == nil {
			return fmt.Errorf("no client for master %q in Changer.Masters", m)
		}
		cctx, cancel := context.WithTimeout(ctx, c.timeout())
		text, err := rdb.Info(cctx, "server").Result()
		cancel()
		if err != nil {
			continue // unreachable: the step's own calls say so
		}
		info, err := redisinfo.Parse(m, text)
		if err != nil || info.RunID == "" {
			continue
		}
		if other, dup := seen[info.RunID]; dup {
			return fmt.Errorf("%w: %s and %s are one server (run_id %s): it would vote twice", ErrRefused, other, m, info.RunID)
		}
		seen[info.RunID] = m
	}
	return nil
}

// Record is one master's configuration record as Read finds it.
type Record struct {
	// Config is the configuration the record names; zero when the master
	// has none.
	Config Config
	// Removed: the step to Config removed this master (it refuses every
	// client's vote and runs releases only).
	Removed bool
	// Lost: another run of the server wrote the record (it restarted, or
	// a replica took over): the record counts as none until Repair.
	Lost bool
	// Sealed is when the master sealed it, by its clock; zero when not
	// sealed.
	Sealed time.Time
	// Wait is how long after Sealed the master takes the next step.
	Wait time.Duration
	// Now is the master's clock when it was read.
	Now time.Time
}

// Read returns master addr's record.
func (c *Changer) Read(ctx context.Context, addr string) (Record, error) {
	v, err := c.call(ctx, addr, "read")
	if err != nil {
		return Record{}, fmt.Errorf("reconfig: read %s: %w", addr, err)
	}
	f, ok := v.([]any)
	if !ok || len(f) != 6 {
		return Record{}, fmt.Errorf("reconfig: read %s: reply %v, want 6 fields", addr, v)
	}
	str := func(i int) string { s, _ := f[i].(string); return s }
	ms := func(i int) int64 { n, _ := strconv.ParseInt(str(i), 10, 64); return n }
	r := Record{Now: time.UnixMilli(ms(4)), Wait: time.Duration(ms(2)) * time.Millisecond, Lost: str(5) == "1"}
	if str(3) != "" {
		r.Sealed = time.UnixMilli(ms(3))
	}
	if str(1) != "" {
		if r.Config, err = wire.ParseConfig(str(1)); err != nil {
			return Record{}, fmt.Errorf("reconfig: read %s: members: %w", addr, err)
		}
		r.Removed = r.Config.Removed() == str(0)
		if r.Config.Record() != str(0) && !r.Removed {
			return Record{}, fmt.Errorf("reconfig: read %s: the record's cur %q does not match its members", addr, str(0))
		}
	}
	return r, nil
}

// WriteFile writes cfg to path (Config.Text), replacing it in one rename,
// for clients that load their configuration from a file.
func WriteFile(path string, cfg Config) error {
	if err := cfg.Check(); err != nil {
		return fmt.Errorf("reconfig: write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("reconfig: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(cfg.Text()); err != nil {
		tmp.Close()
		return fmt.Errorf("reconfig: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("reconfig: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("reconfig: write %s: %w", path, err)
	}
	return nil
}

// ReadFile reads a configuration WriteFile wrote.
func ReadFile(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reconfig: %w", err)
	}
	cfg, err := wire.ParseConfig(string(b))
	if err != nil {
		return Config{}, fmt.Errorf("reconfig: %s: %w", path, err)
	}
	return cfg, nil
}
