package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/ctxerr"
	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/internal/nodecheck"
)

const doctorUsageText = `usage: quorumlock doctor [flags]

Checks, per master, the settings that decide whether the lock's assumptions
hold, and prints one line per finding with its advice: reachability, the
server version and the commands it has, maxmemory-policy (eviction of keys
with a TTL, as lock keys are), appendonly and appendfsync (must the restart
quarantine cover it?), the disk (a failed AOF write or RDB snapshot: Redis
then refuses writes with MISCONF), the role (a replica; a master with
replicas that a failover could promote), tcp-backlog; and for the set, the
number of masters and one server listed twice.

It reads INFO, CONFIG GET (appendfsync, save, tcp-backlog) and COMMAND INFO;
an ACL user needs +info +config|get +command|info. A check that could not
be read (CONFIG GET or COMMAND INFO refused) is "unknown", says what was not
read and what grant reads it, and is never reported as a milder level than
it could have: without CONFIG GET a master with appendonly no may keep RDB
snapshots (bad). Without COMMAND INFO, doctor asks EVALSHA and EVAL
themselves (a script that returns 1).

Masters: --nodes, --nodes-file, $QUORUMLOCK_NODES or $QUORUMLOCK_NODES_FILE,
as for quorumlock run.

Exit status: 0 when nothing is "bad" or "unknown"; 1 when something is (a
master that does not answer is "bad"); 64 usage (as run).

Flags:
`

// Levels of a finding.
const (
	levelOK   = nodecheck.OK
	levelInfo = nodecheck.Info
	levelWarn = nodecheck.Warn
	levelBad  = nodecheck.Bad
	// levelUnknown: the check could not be read (a command refused), and
	// what it did not read could make it bad. It counts as bad for the
	// exit status: doctor cannot vouch for what it could not see.
	levelUnknown = nodecheck.Unknown
)

// finding is one line of doctor's report.
type finding struct {
	// Node is the master's host:port, or "masters" for a finding about
	// the whole set.
	Node  string `json:"node"`
	Level string `json:"level"`
	// Check names what was checked: reachable, version, commands,
	// maxmemory-policy, persistence, disk, role, tcp-backlog, cluster,
	// count, identity.
	Check string `json:"check"`
	// Text is the finding and its advice, one line.
	Text string `json:"text"`
}

func doctorCmd(ctx context.Context, args []string, e *env) int {
	fs := flag.NewFlagSet("quorumlock doctor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nf := addNodeFlags(fs)
	jsonOut := fs.Bool("json", false, "print the findings as a JSON array")
	timeout := fs.Duration("timeout", 3*time.Second, "deadline of the whole check")
	usageErr := func(err error) int {
		fmt.Fprintf(e.stderr, "quorumlock doctor: %v (quorumlock doctor -h for help)\n", err)
		return exitUsage
	}
	if help, err := parseFlags(fs, args, doctorUsageText, e.stdout); help {
		return exitOK
	} else if err != nil {
		return usageErr(err)
	}
	if fs.NArg() > 0 {
		return usageErr(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if *timeout <= 0 {
		return usageErr(fmt.Errorf("--timeout %v must be positive", *timeout))
	}
	nl, err := nf.resolve(e.getenv)
	if err != nil {
		return usageErr(err)
	}
	cs, err := nl.rawClients(*timeout)
	if err != nil {
		return usageErr(err)
	}
	defer closeRaw(cs)
	lockkey.DiscardClientLog()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	facts := make([]nodeFacts, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { facts[i] = readFacts(ctx, c) })
	}
	wg.Wait()
	fs2 := diagnose(facts)
	code := exitOK
	for _, f := range fs2 {
		if f.Level == levelBad || f.Level == levelUnknown {
			code = exitFail
		}
	}
	if *jsonOut {
		b, err := json.MarshalIndent(fs2, "", "  ")
		if err != nil {
			fmt.Fprintf(e.stderr, "quorumlock doctor: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return code
	}
	width, lw, cw := len("masters"), len(levelWarn), 0
	for _, f := range fs2 {
		width, lw, cw = max(width, len(f.Node)), max(lw, len(f.Level)), max(cw, len(f.Check))
	}
	for _, f := range fs2 {
		fmt.Fprintf(e.stdout, "%-*s  %-*s  %-*s  %s\n", width, f.Node, lw, f.Level, cw, f.Check, f.Text)
	}
	return code
}

// nodeFacts is what doctor read from one master.
type nodeFacts struct {
	Addr string
	Err  error
	// Info is INFO's default sections (server, memory, persistence,
	// replication, cluster among them).
	Info map[string]string
	// Config holds the CONFIG GET values read; ConfigErr is set when
	// CONFIG GET was refused (managed services often rename or deny it).
	Config    map[string]string
	ConfigErr error
	// Commands maps the commands asked about to whether the server has
	// them; CommandsErr is set when COMMAND INFO failed. Probed then holds
	// what EVALSHA and EVAL answered when asked themselves: whether each
	// exists, or (absent) the error that left it unknown (ProbeErr).
	Commands    map[string]bool
	CommandsErr error
	Probed      map[string]bool
	ProbeErr    map[string]error
}

// configParams are the settings doctor reads with CONFIG GET (one per call:
// servers before 7.0 take one parameter).
var configParams = []string{"appendfsync", "save", "tcp-backlog"}

// probedCommands are the commands doctor asks COMMAND INFO about: the
// lock's scripts run with EVALSHA (EVAL loads them), and native commands a
// lock could use instead of a script.
var probedCommands = []string{"evalsha", "eval", "waitaof", "delifeq", "delex"}

func readFacts(ctx context.Context, c rawClient) nodeFacts {
	f := nodeFacts{Addr: c.addr, Config: map[string]string{}, Commands: map[string]bool{}}
	text, err := c.c.Info(ctx).Result()
	if err != nil {
		f.Err = ctxerr.Wrap(ctx, err)
		return f
	}
	f.Info = parseInfo(text)
	for _, p := range configParams {
		m, err := c.c.ConfigGet(ctx, p).Result()
		if err != nil {
			f.ConfigErr = ctxerr.Wrap(ctx, err)
			break
		}
		if v, ok := m[p]; ok {
			f.Config[p] = v
		}
	}
	args := []any{"command", "info"}
	for _, name := range probedCommands {
		args = append(args, name)
	}
	res, err := c.c.Do(ctx, args...).Slice()
	if err != nil {
		f.CommandsErr = ctxerr.Wrap(ctx, err)
		f.Probed, f.ProbeErr = probeScripts(ctx, c.c)
		return f
	}
	for i, name := range probedCommands {
		f.Commands[name] = i < len(res) && res[i] != nil
	}
	return f
}

// diagnose turns what was read into findings: per master in the order
// given, then the set's.
func diagnose(facts []nodeFacts) []finding {
	var out []finding
	add := func(node, level, check, format string, args ...any) {
		out = append(out, finding{Node: node, Level: level, Check: check, Text: fmt.Sprintf(format, args...)})
	}
	runs := map[string][]string{}
	for _, f := range facts {
		a := f.Addr
		if f.Err != nil {
			add(a, levelBad, "reachable", "%v: this master cannot vote; fix the address, the network or the credentials", f.Err)
			continue
		}
		in := f.Info
		if id := in["run_id"]; id != "" {
			runs[id] = append(runs[id], a)
		}

		for _, c := range nodecheck.Server(in, f.Config, f.ConfigErr) {
			add(a, c.Level, c.Check, "%s", c.Text)
		}
		f.commandsFinding(add)
	}

	// The set.
	n := len(facts)
	switch {
	case n == 1:
		add("masters", levelWarn, "count", "1 master: no failure is tolerated, and a restart of it loses every lock; use 3 or 5 independent masters")
	case n == 2:
		add("masters", levelBad, "count", "2 masters: both are the quorum, so one failure stops every lock (quorumlock run refuses it); use 3")
	case n%2 == 0:
		add("masters", levelWarn, "count", "%d masters: an even number tolerates no more failures (%d) than %d do; use an odd number", n, (n-1)/2, n-1)
	default:
		add("masters", levelOK, "count", "%d masters: a quorum of %d, %d may fail", n, n/2+1, (n-1)/2)
	}
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if addrs := runs[id]; len(addrs) > 1 {
			add("masters", levelBad, "identity", "%s are one server (run %s): it would vote %d times; list each master once", strings.Join(addrs, " and "), short(id), len(addrs))
		}
	}
	return out
}

// probeScripts asks EVALSHA (with a digest no script has: NOSCRIPT says
// it exists) and EVAL (a script that returns 1) whether they exist, for a
// user that may not run COMMAND INFO. An unknown command is missing; any
// other error (NOPERM, a timeout) leaves the command unknown.
func probeScripts(ctx context.Context, c *redis.Client) (map[string]bool, map[string]error) {
	have, errs := map[string]bool{}, map[string]error{}
	for name, args := range map[string][]any{
		"evalsha": {"evalsha", "0000000000000000000000000000000000000000", 0},
		"eval":    {"eval", "return 1", 0},
	} {
		err := c.Do(ctx, args...).Err()
		switch {
		case err == nil, strings.HasPrefix(err.Error(), "NOSCRIPT"):
			have[name] = true
		case strings.Contains(strings.ToLower(err.Error()), "unknown command"):
			have[name] = false
		default:
			errs[name] = ctxerr.Wrap(ctx, err)
		}
	}
	return have, errs
}

// commandsFinding adds the finding on the commands the master has.
func (f nodeFacts) commandsFinding(add func(node, level, check, format string, args ...any)) {
	if f.CommandsErr != nil {
		var missing, unknown []string
		for _, name := range probedCommands[:2] {
			have, asked := f.Probed[name]
			switch {
			case !asked:
				unknown = append(unknown, fmt.Sprintf("%s (%v)", strings.ToUpper(name), f.ProbeErr[name]))
			case !have:
				missing = append(missing, strings.ToUpper(name))
			}
		}
		switch {
		case len(missing) > 0:
			add(f.Addr, levelBad, "commands", "%s missing (renamed or disabled; asked directly, as COMMAND INFO was refused: %v): the lock runs Lua scripts and cannot work here", strings.Join(missing, " and "), f.CommandsErr)
		case len(unknown) > 0:
			add(f.Addr, levelUnknown, "commands", "COMMAND INFO refused (%v) and %s could not be asked: whether the lock's scripts can run here is unknown; grant +command|info to check", f.CommandsErr, strings.Join(unknown, " and "))
		default:
			add(f.Addr, levelOK, "commands", "EVALSHA and EVAL present (the lock's scripts; asked directly, as COMMAND INFO was refused: %v); the native WAITAOF, DELIFEQ, DELEX not checked (grant +command|info)", f.CommandsErr)
		}
	} else {
		var have []string
		for _, c := range probedCommands[2:] {
			if f.Commands[c] {
				have = append(have, strings.ToUpper(c))
			}
		}
		native := "native: " + listOr(have, "none") + " of WAITAOF, DELIFEQ, DELEX (the lock does not use them; it runs Lua scripts)"
		if !f.Commands["evalsha"] || !f.Commands["eval"] {
			add(f.Addr, levelBad, "commands", "EVALSHA or EVAL is missing (renamed or disabled): the lock runs Lua scripts and cannot work here; %s", native)
		} else {
			add(f.Addr, levelOK, "commands", "EVALSHA and EVAL present (the lock's scripts); %s", native)
		}
	}
}

func listOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ", ")
}
