package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/reconfig"
)

const reconfigUsage = `usage: quorumlock reconfig <init|set|status|repair|recover> [flags]

  init   --config-file F --max-key-ttl D [--drift-factor 0.01]
         write epoch 1 (the masters of --nodes) on every master and to F
  set    --config-file F [--joint] HOST:PORT,...
         change the masters to this set, one master added or removed per
         step, each step waiting what the masters require; --joint: in
         two steps through joint mode whatever the change (a lock needs a
         quorum of the old set and of the new while joint); run it again
         after an interruption: it resumes from the masters' records
  status --config-file F
         show every master's record, its seal and the wait left; exits 1
         when fewer than a quorum of F's masters hold F's record of their
         current run (checked clients get no quorum)
  repair --config-file F
         write F's configuration again on its masters that lost it (a
         restart, a failover) and seal it anew; refused unless a quorum
         of them holds it
  recover --config-file F [--from-masters]
         after the masters lost the records a quorum needs (the whole
         fleet restarted) and repair is refused: write F's set at the next
         epoch on every master of F, seal it, and publish it to F; refused
         when a master cannot be read or holds a later configuration.
         --from-masters recovers the newest configuration a master holds
         instead of F's when it is later (a step that began after F), after
         waiting that configuration's wait when its set is not F's

--nodes (or --nodes-file, $QUORUMLOCK_NODES, $QUORUMLOCK_NODES_FILE) names
every master the change touches, old and new, with its credentials; F holds
the current configuration (host:port only) for the clients to load.
`

// maxReconfigKeyTTL bounds init's --max-key-ttl: a step waits the key life
// plus its drift and a third, so a larger one would hold a change for days.
const maxReconfigKeyTTL = 24 * time.Hour

// reconfigCmd runs quorumlock reconfig (docs/reconfig.md): exit 0 when done,
// 1 when a step was refused or a master could not be read, 64 for a usage
// error.
func reconfigCmd(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, reconfigUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	sub := args[0]
	if !slices.Contains([]string{"init", "set", "status", "repair", "recover"}, sub) {
		shown := fmt.Sprintf(" %q", bounded(sub))
		if strings.ContainsAny(sub, "@/?=") {
			shown = "" // a URL may hold a password: never echo it
		}
		fmt.Fprintf(e.stderr, "quorumlock reconfig: unknown subcommand%s (want init, set, status, repair or recover)\n", shown)
		return exitUsage
	}
	fs := flag.NewFlagSet("quorumlock reconfig "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nf := addNodeFlags(fs)
	file := fs.String("config-file", "", "the file holding the current configuration, which clients load (required)")
	keyTTL := fs.Duration("max-key-ttl", 0, "init: the longest key life of any lock: its TTL plus its lock-delay (required for init)")
	drift := fs.Float64("drift-factor", 0.01, "init: the largest drift factor of any client")
	fromMasters := fs.Bool("from-masters", false, "recover: recover the newest configuration a master holds when it is later than the file's")
	joint := fs.Bool("joint", false, "set: change the masters in two steps through joint mode instead of one master per step")
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(e.stderr, "quorumlock reconfig %s: %s\n", sub, fmt.Sprintf(format, a...))
		return exitUsage
	}
	if help, err := parseFlags(fs, args[1:], reconfigUsage, e.stdout); help {
		return exitOK
	} else if err != nil {
		return usageErr("%v", err)
	}
	if *file == "" {
		return usageErr("--config-file is required")
	}
	nl, err := nf.resolve(e.getenv)
	if err != nil {
		return usageErr("%v", err)
	}
	cs, err := nl.rawClients(2 * time.Second)
	if err != nil {
		return usageErr("%v", err)
	}
	defer closeRaw(cs)
	masters := map[string]redis.Cmdable{}
	var addrs []string
	for _, c := range cs {
		masters[c.addr] = c.c
		addrs = append(addrs, c.addr)
	}
	ch := &reconfig.Changer{Masters: masters, Log: func(l string) { fmt.Fprintln(e.stdout, l) }}
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "quorumlock reconfig %s: %v\n", sub, err)
		return exitFail
	}
	// unnamed is the first master of cfg that --nodes does not name: the
	// command cannot reach it (a current member left out of --nodes).
	unnamed := func(cfg reconfig.Config) error {
		for _, m := range cfg.All() {
			if _, ok := masters[m]; !ok {
				return fmt.Errorf("master %s of %s's epoch %d is not among --nodes (%s): name every master of the current configuration and of the new one", m, *file, cfg.Epoch, strings.Join(addrs, ", "))
			}
		}
		return nil
	}
	switch sub {
	case "init":
		if fs.NArg() != 0 {
			return usageErr("takes no arguments, %d given (not shown: one may hold a password)", fs.NArg())
		}
		switch {
		case *keyTTL == 0:
			return usageErr("--max-key-ttl is required (the longest TTL plus lock-delay of any lock)")
		case *keyTTL < 0 || *keyTTL%time.Millisecond != 0 || *keyTTL > maxReconfigKeyTTL:
			return usageErr("--max-key-ttl %v: want whole milliseconds, positive, at most %v (each step of a change waits about 1.35 times it)", *keyTTL, maxReconfigKeyTTL)
		}
		cfg := reconfig.Config{Epoch: 1, Masters: addrs, Quorum: len(addrs)/2 + 1, MaxKeyTTL: keyTTL.Truncate(time.Millisecond), DriftFactor: *drift}
		if err := cfg.Check(); err != nil {
			return usageErr("%v", err)
		}
		// The file must be writable before the masters are written: a
		// record the clients cannot load is no use.
		probe, err := os.CreateTemp(filepath.Dir(*file), "."+filepath.Base(*file)+".*")
		if err != nil {
			return usageErr("--config-file %s cannot be written: %v", *file, err)
		}
		probe.Close()
		os.Remove(probe.Name())
		if err := ch.Init(ctx, cfg); err != nil {
			return fail(err)
		}
		if err := reconfig.WriteFile(*file, cfg); err != nil {
			return fail(err)
		}
		fmt.Fprintf(e.stdout, "published: %s (epoch 1, %d masters, quorum %d)\n", *file, len(addrs), cfg.Quorum)
		return exitOK
	case "set":
		if fs.NArg() != 1 {
			hint := ""
			if slices.ContainsFunc(fs.Args(), func(a string) bool { return strings.HasPrefix(a, "-") }) {
				hint = " (flags go before it)"
			}
			return usageErr("want one argument, the masters' new set: HOST:PORT,...%s", hint)
		}
		target := strings.Split(fs.Arg(0), ",")
		for i, t := range target {
			target[i] = strings.TrimSpace(t)
			if _, ok := masters[target[i]]; !ok {
				shown := fmt.Sprintf("%q", target[i])
				if strings.ContainsAny(target[i], "@/?=") || len(target[i]) > 100 {
					shown = "" // a URL may hold a password: never echo it
				}
				return usageErr("master %d%s of the new set is not among --nodes (%s); name it host:port as --nodes' masters are", i+1, strings.TrimSuffix(" "+shown, " "), strings.Join(addrs, ", "))
			}
		}
		if cur, err := reconfig.ReadFile(*file); err == nil {
			if err := unnamed(cur); err != nil {
				return usageErr("%v", err)
			}
		}
		return reconfigSet(ctx, ch, *file, addrs, target, *joint, e.stdout, fail)
	case "status":
		if fs.NArg() != 0 {
			return usageErr("takes no arguments, %d given (not shown: one may hold a password)", fs.NArg())
		}
		cur, err := reconfig.ReadFile(*file)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(e.stdout, "%s: epoch %d, %s, longest key life %v, wait between steps %v\n", *file, cur.Epoch, cur.Summary(), cur.MaxKeyTTL, cur.Wait())
		code := exitOK
		if err := unnamed(cur); err != nil {
			fmt.Fprintf(e.stdout, "%v\n", err)
			code = exitFail
		}
		holds := map[string]bool{}
		var lacking []string
		for _, a := range addrs {
			rec, err := ch.Read(ctx, a)
			if err != nil {
				fmt.Fprintf(e.stdout, "  %s  unreadable: %v\n", a, err)
				code = exitFail
				continue
			}
			switch {
			case cur.Has(a) && !rec.Lost && !rec.Removed && rec.Config.Record() == cur.Record():
				holds[a] = true
			case cur.Has(a) && (rec.Config.Epoch < cur.Epoch || rec.Lost):
				lacking = append(lacking, a)
			}
			fmt.Fprintf(e.stdout, "  %s  %s\n", a, describeRecord(a, rec))
		}
		if !cur.Reached(func(a string) bool { return holds[a] }) {
			fmt.Fprintf(e.stdout, "only %d of %d masters hold epoch %d of their current run (%s): clients of that epoch get no quorum. A change in progress: run set again; masters restarted: run repair, or recover if repair is refused\n", len(holds), len(cur.All()), cur.Epoch, cur.Summary())
			code = exitFail
		} else if len(lacking) > 0 {
			fmt.Fprintf(e.stdout, "%d of epoch %d's masters lack its record (%s): each refuses its clients, so fewer failures are tolerated; run repair\n", len(lacking), cur.Epoch, strings.Join(lacking, ", "))
		}
		return code
	case "repair":
		if fs.NArg() != 0 {
			return usageErr("takes no arguments, %d given (not shown: one may hold a password)", fs.NArg())
		}
		cur, err := reconfig.ReadFile(*file)
		if err != nil {
			return fail(err)
		}
		if err := unnamed(cur); err != nil {
			return usageErr("%v", err)
		}
		if err := ch.Repair(ctx, cur); err != nil {
			return fail(err)
		}
		fmt.Fprintf(e.stdout, "repaired: epoch %d\n", cur.Epoch)
		return exitOK
	case "recover":
		if fs.NArg() != 0 {
			return usageErr("takes no arguments, %d given (not shown: one may hold a password)", fs.NArg())
		}
		cur, err := reconfig.ReadFile(*file)
		if err != nil {
			return fail(err)
		}
		if *fromMasters {
			newest, err := newestHeld(ctx, ch, addrs, cur)
			if err != nil {
				return fail(err)
			}
			if newest.Epoch > cur.Epoch {
				fmt.Fprintf(e.stdout, "the masters hold epoch %d (%s), %s has %d: recovering epoch %d\n", newest.Epoch, newest.Summary(), *file, cur.Epoch, newest.Epoch)
				same := newest
				same.Epoch = cur.Epoch
				if same.Record() != cur.Record() {
					// Its step may not have committed: wait as a step does,
					// so that every lease of the epochs before it has ended.
					fmt.Fprintf(e.stdout, "  waiting %v (epoch %d's wait: its set is not %s's)\n", newest.Wait(), newest.Epoch, *file)
					t := time.NewTimer(newest.Wait())
					select {
					case <-ctx.Done():
						t.Stop()
						return fail(ctx.Err())
					case <-t.C:
					}
				}
				cur = newest
			}
		}
		next, err := ch.Recover(ctx, cur)
		if err != nil {
			return fail(err)
		}
		if err := publish(*file, next, e.stdout); err != nil {
			return fail(err)
		}
		fmt.Fprintf(e.stdout, "recovered: epoch %d's %s as epoch %d; clients of an older epoch are refused as stale and load it\n", cur.Epoch, next.Summary(), next.Epoch)
		return exitOK
	}
	return usageErr("unknown subcommand (want init, set, status, repair or recover)")
}

// newestHeld returns the configuration of the highest epoch any master
// holds (lost, removed or not), or cur when none is later.
func newestHeld(ctx context.Context, ch *reconfig.Changer, addrs []string, cur reconfig.Config) (reconfig.Config, error) {
	newest := cur
	for _, a := range addrs {
		rec, err := ch.Read(ctx, a)
		if err != nil {
			return reconfig.Config{}, err
		}
		if rec.Config.Epoch > newest.Epoch {
			newest = rec.Config
		}
	}
	return newest, nil
}

// describeRecord is one master's record for status.
func describeRecord(addr string, r reconfig.Record) string {
	if r.Config.Epoch == 0 {
		return "no record"
	}
	rec := r.Config.Record()
	s := fmt.Sprintf("epoch %d (%s, %s)", r.Config.Epoch, r.Config.Summary(), rec[len(rec)-8:]) // the hash tells two configurations of one epoch apart
	if r.Lost {
		return s + ", written by another run of the server (it restarted or failed over): counts as none; run repair (recover if a quorum lost it)"
	}
	if r.Removed || !r.Config.Has(addr) {
		return s + ", removed: it refuses every vote and runs releases only; shut it down once the masters are ready for the next step"
	}
	if r.Sealed.IsZero() {
		return s + ", not sealed"
	}
	left := r.Sealed.Add(r.Wait).Sub(r.Now)
	if left > 0 {
		return s + fmt.Sprintf(", sealed %v ago, next step in %v", r.Now.Sub(r.Sealed).Round(time.Millisecond), left.Round(time.Millisecond))
	}
	return s + fmt.Sprintf(", sealed %v ago, ready for the next step", r.Now.Sub(r.Sealed).Round(time.Millisecond))
}

// reconfigSet moves the masters from the file's configuration, or from a
// later one the masters already hold (an interrupted run), to target.
func reconfigSet(ctx context.Context, ch *reconfig.Changer, file string, addrs, target []string, joint bool, out io.Writer, fail func(error) int) int {
	cur, err := reconfig.ReadFile(file)
	if err != nil {
		return fail(err)
	}
	// An interrupted run may have installed the next epoch after the file's
	// on some masters: finish that step first (install and seal are
	// idempotent), then publish it. Two different records of that epoch
	// (two operators) stop the command.
	var ahead *reconfig.Config
	for _, a := range addrs {
		rec, err := ch.Read(ctx, a)
		if err != nil {
			fmt.Fprintf(out, "  %s unreadable: %v\n", a, err)
			continue
		}
		if rec.Config.Epoch != cur.Epoch+1 || rec.Lost {
			continue // a lost record (another run's) proves nothing
		}
		if ahead != nil && ahead.Record() != rec.Config.Record() {
			return fail(fmt.Errorf("the masters hold two configurations of epoch %d (%s has one, another master another): finish or undo the other change by hand", ahead.Epoch, a))
		}
		ahead = &rec.Config
	}
	if ahead != nil && ahead.Joint() && !cur.Joint() && wire.SameSet(target, ahead.Old) {
		// A step into joint mode that was not published (interrupted, or
		// its new set lost before it could be), and the old set asked
		// for: abort it from where the masters are. Sealing it where it is
		// lets the old set take the abort (after the wait); its new set,
		// unreachable, is not sealed, so no source gives it.
		fmt.Fprintf(out, "epoch %d (joint) is on the masters, %s has %d: aborting it, back to its old set\n", ahead.Epoch, file, cur.Epoch)
		if err := ch.Seal(ctx, *ahead); err != nil {
			fmt.Fprintf(out, "  epoch %d: %v (going on: the old set's seals are what the abort needs)\n", ahead.Epoch, err)
		}
		cur, ahead = *ahead, nil
	}
	if ahead == nil {
		// The file's own step may have been interrupted before its seals:
		// seal it where it can be. Fewer than a quorum sealed (masters
		// lost: the new set of a joint configuration, which an abort leaves)
		// stops nothing here; a master not sealed refuses the next step.
		fmt.Fprintf(out, "%s: epoch %d, sealing it where it is not sealed yet\n", file, cur.Epoch)
		if err := ch.Seal(ctx, cur); err != nil {
			fmt.Fprintf(out, "  %s's epoch %d: %v (going on: a master not sealed refuses the next step)\n", file, cur.Epoch, err)
		}
	}
	if ahead != nil {
		fmt.Fprintf(out, "resuming: epoch %d is on the masters, %s has %d\n", ahead.Epoch, file, cur.Epoch)
		if err := ch.Step(ctx, cur, *ahead); err != nil {
			return fail(err)
		}
		if err := publish(file, *ahead, out); err != nil {
			return fail(err)
		}
		cur = *ahead
	}
	plan := reconfig.Plan // from a joint configuration: out of joint mode first
	switch {
	case joint && !cur.Joint():
		plan = reconfig.Joint
	case cur.Joint():
		fmt.Fprintf(out, "epoch %d is joint: leaving joint mode first, to %s\n", cur.Epoch, map[bool]string{true: "its old set (an abort)", false: "its new set"}[wire.SameSet(target, cur.Old)])
	}
	steps, err := plan(cur, target)
	if err != nil {
		return fail(err)
	}
	if len(steps) == 0 {
		fmt.Fprintf(out, "done: epoch %d, %s (nothing to change)\n", cur.Epoch, cur.Summary())
		return exitOK
	}
	for i, to := range steps {
		fmt.Fprintf(out, "step %d of %d:\n", i+1, len(steps))
		if err := ch.Step(ctx, cur, to); err != nil {
			return fail(err)
		}
		if err := publish(file, to, out); err != nil {
			return fail(err)
		}
		cur = to
	}
	fmt.Fprintf(out, "done: epoch %d, %s; the next change waits %v from now\n", cur.Epoch, cur.Summary(), cur.Wait())
	var lacking []string
	for _, m := range cur.All() {
		if rec, err := ch.Read(ctx, m); err != nil || rec.Lost || rec.Config.Record() != cur.Record() {
			lacking = append(lacking, m)
		}
	}
	if len(lacking) > 0 {
		fmt.Fprintf(out, "warning: %s do not hold epoch %d (unreachable, or refused): fewer failures are tolerated until `quorumlock reconfig repair` writes it there\n", strings.Join(lacking, ", "), cur.Epoch)
	}
	return exitOK
}

func publish(file string, cfg reconfig.Config, out io.Writer) error {
	if err := reconfig.WriteFile(file, cfg); err != nil {
		return err
	}
	fmt.Fprintf(out, "  published: %s (epoch %d)\n", file, cfg.Epoch)
	return nil
}
