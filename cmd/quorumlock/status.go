package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/ctxerr"
	"github.com/quorumlock/quorumlock/internal/lockkey"
	"github.com/quorumlock/quorumlock/internal/nodecheck"
	"github.com/quorumlock/quorumlock/internal/redisinfo"
	"github.com/quorumlock/quorumlock/internal/wire"
)

const statusUsageText = `usage: quorumlock status [flags] NAME|PATTERN

Shows, per master, whether it answers (and its role, uptime and run), and for
the lock NAME (or every lock matching the glob PATTERN: a name with *, ? or
[) its holders with their owner (token, host, pid, label) and TTL left, its
fencing counter, and which holder has a quorum. A read-write lock's or a
semaphore's holders are shown one per line. A lock taken by quorumlock run
--cooldown is shown in its cooldown once run is gone (its pid no longer
runs on this host, or its keys were not renewed for half the TTL).

Masters: --nodes, --nodes-file, $QUORUMLOCK_NODES or $QUORUMLOCK_NODES_FILE,
as for quorumlock run.

Exit status: 0; 1 when a lock's state is unknown (too few masters answered);
64 usage (as run; also a NAME no lock can have, such as "{x}", whose derived
keys are those of "x").

Flags:
`

type statusConfig struct {
	pattern    string
	json       bool
	watch      time.Duration
	timeout    time.Duration
	quarantine time.Duration
	limit      int
	nodes      nodeList
}

func statusCmd(ctx context.Context, args []string, e *env) int {
	fs := flag.NewFlagSet("quorumlock status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sc := &statusConfig{}
	nf := addNodeFlags(fs)
	fs.BoolVar(&sc.json, "json", false, "print JSON (one object per refresh)")
	fs.DurationVar(&sc.watch, "watch", 0, "refresh every D until interrupted (0: once)")
	fs.DurationVar(&sc.timeout, "timeout", 2*time.Second, "deadline of one reading of every master")
	fs.DurationVar(&sc.quarantine, "quarantine", 0, "the clients' restart quarantine: say which masters are younger (0: do not judge)")
	fs.IntVar(&sc.limit, "limit", 100, "show at most this many locks matching a PATTERN")
	usageErr := func(err error) int {
		fmt.Fprintf(e.stderr, "quorumlock status: %v (quorumlock status -h for help)\n", err)
		return exitUsage
	}
	if help, err := parseFlags(fs, args, statusUsageText, e.stdout); help {
		return exitOK
	} else if err != nil {
		return usageErr(err)
	}
	switch {
	case fs.NArg() != 1:
		return usageErr(fmt.Errorf("want exactly one lock name or pattern, got %d", fs.NArg()))
	case fs.Arg(0) == "":
		return usageErr(errors.New("the lock name is empty"))
	case sc.timeout <= 0:
		return usageErr(fmt.Errorf("--timeout %v must be positive", sc.timeout))
	case sc.watch < 0:
		return usageErr(fmt.Errorf("--watch %v must not be negative", sc.watch))
	case sc.quarantine < 0:
		return usageErr(fmt.Errorf("--quarantine %v must not be negative", sc.quarantine))
	case sc.limit < 1:
		return usageErr(fmt.Errorf("--limit %d must be at least 1", sc.limit))
	}
	sc.pattern = fs.Arg(0)
	if !lockkey.Pattern(sc.pattern) {
		// A name no lock can have (redlock refuses it) would be shown
		// free, with the derived keys of the lock it is an alias of.
		if inner, ok := wire.BareTag(sc.pattern); ok {
			return usageErr(fmt.Errorf("lock name %q is a hash tag and nothing else, which no lock is named (its derived keys are those of the lock %q): ask for %q", bounded(sc.pattern), bounded(inner), bounded(inner)))
		}
		if !wire.HasTag(sc.pattern) && strings.ContainsAny(sc.pattern, "{}") {
			return usageErr(fmt.Errorf("lock name %q has '{' or '}' but no valid hash tag (a non-empty {...}), which no lock is named", bounded(sc.pattern)))
		}
	}
	nl, err := nf.resolve(e.getenv)
	if err != nil {
		return usageErr(err)
	}
	sc.nodes = nl
	cs, err := nl.rawClients(sc.timeout)
	if err != nil {
		return usageErr(err)
	}
	defer closeRaw(cs)
	// Each master's failure is printed below; go-redis's own log of failed
	// dials would only repeat it.
	lockkey.DiscardClientLog()
	seen := map[string]time.Time{}
	for first := true; ; first = false {
		snap := readStatus(ctx, sc, cs)
		if sc.watch > 0 {
			snap.track(seen, first)
		}
		code := exitOK
		if sc.json {
			b, err := json.Marshal(snap)
			if err != nil {
				fmt.Fprintf(e.stderr, "quorumlock status: %v\n", err)
				return exitFail
			}
			fmt.Fprintf(e.stdout, "%s\n", b)
		} else {
			if sc.watch > 0 {
				fmt.Fprintf(e.stdout, "-- %s --\n", snap.Time.Format("15:04:05.000"))
			}
			snap.print(e.stdout)
		}
		for _, l := range snap.Locks {
			if l.State == "unknown" {
				code = exitFail
			}
		}
		if snap.answered == 0 {
			code = exitFail
		}
		if sc.watch == 0 {
			return code
		}
		t := time.NewTimer(sc.watch)
		select {
		case <-ctx.Done():
			t.Stop()
			return exitOK
		case <-t.C:
		}
	}
}

// statusSnap is one reading of every master.
type statusSnap struct {
	Time     time.Time    `json:"time"`
	Pattern  string       `json:"pattern"`
	Nodes    []nodeStatus `json:"nodes"`
	Locks    []lockStatus `json:"locks"`
	More     bool         `json:"more,omitempty"` // more locks matched than --limit
	answered int
}

type nodeStatus struct {
	Addr     string  `json:"addr"`
	Error    string  `json:"error,omitempty"`
	Role     string  `json:"role,omitempty"`
	Version  string  `json:"version,omitempty"`
	RunID    string  `json:"run_id,omitempty"`
	UptimeS  float64 `json:"uptime_s"`
	Promoted bool    `json:"promoted,omitempty"`
	// QuarantineS is how much longer the node stays in the restart
	// quarantine (--quarantine) of a client that meets it now, 0 when it
	// is out of it: the quarantine less the server's age as clients read
	// it (its main thread's CPU time, which an idle server gains slowly).
	QuarantineS float64 `json:"quarantine_left_s,omitempty"`
}

type lockStatus struct {
	Name string `json:"name"`
	// Kind is "mutex", "read-write", "semaphore", "reentrant", "none"
	// (no master has the key) or "unknown" (the masters disagree on the type,
	// or none answered), or another Redis type for a key that is no lock.
	Kind string `json:"kind"`
	// State is "held" (a holder has a quorum), "free" (none has) or
	// "unknown" (too few masters answered to tell).
	State   string       `json:"state"`
	Quorum  int          `json:"quorum"`
	Holders []holderStat `json:"holders"`
	Nodes   []lockOnNode `json:"nodes"`
}

type holderStat struct {
	Kind   string `json:"kind"` // "holder" (mutex), "reader", "writer", ...
	Token  string `json:"token"`
	Host   string `json:"host,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Label  string `json:"label,omitempty"`
	On     int    `json:"on"`     // masters that hold it
	Quorum bool   `json:"quorum"` // On reaches the quorum
	// Since is when its acquisition began, as the holder's clock read it
	// (the value's "at"); absent for values written before quorumlock
	// stored it.
	Since *time.Time `json:"since,omitempty"`
	// SeenSince is when --watch first saw it.
	SeenSince *time.Time `json:"seen_since,omitempty"`
	// Cooldown is set for a holder that quorumlock run took with
	// --cooldown (its label carries the mark; Label is then without it):
	// whether run is gone and the cooldown alone keeps the lock.
	Cooldown *cooldownStat `json:"cooldown,omitempty"`
	id       string
}

type lockOnNode struct {
	Addr    string     `json:"addr"`
	Error   string     `json:"error,omitempty"`
	Type    string     `json:"type,omitempty"`
	Value   string     `json:"value,omitempty"`
	TTLms   int64      `json:"ttl_ms,omitempty"`
	Fence   *int64     `json:"fence,omitempty"`
	Holds   []holdStat `json:"holds,omitempty"`
	Waiting int        `json:"waiting_writers,omitempty"`
}

type holdStat struct {
	Kind  string `json:"kind"`
	ID    string `json:"id"`
	TTLms int64  `json:"ttl_ms"`
}

// readStatus reads every master at once, each bounded by sc.timeout.
func readStatus(ctx context.Context, sc *statusConfig, cs []rawClient) *statusSnap {
	ctx, cancel := context.WithTimeout(ctx, sc.timeout)
	defer cancel()
	snap := &statusSnap{Time: time.Now(), Pattern: sc.pattern, Nodes: make([]nodeStatus, len(cs))}
	type perNode struct {
		names []string
		more  bool
		locks map[string]lockkey.Lock
		errs  map[string]error
	}
	per := make([]perNode, len(cs))
	pattern := lockkey.Pattern(sc.pattern)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			ns := &snap.Nodes[i]
			ns.Addr = c.addr
			info, age, err := readInfo(ctx, c.addr, c.c)
			if err != nil {
				ns.Error = err.Error()
				return
			}
			ns.fill(info, age, sc.quarantine)
			p := &per[i]
			p.names = []string{sc.pattern}
			if pattern {
				p.names, p.more, err = lockkey.Scan(ctx, c.c, sc.pattern, sc.limit)
				if err != nil {
					ns.Error = "SCAN: " + err.Error()
					return
				}
			}
			p.locks = map[string]lockkey.Lock{}
			p.errs = map[string]error{}
			for _, name := range p.names {
				l, err := lockkey.Read(ctx, c.c, name)
				if err != nil {
					p.errs[name] = err
					continue
				}
				p.locks[name] = l
			}
		})
	}
	wg.Wait()
	names := map[string]bool{}
	if !pattern {
		names[sc.pattern] = true
	}
	for i := range cs {
		if snap.Nodes[i].Error == "" {
			snap.answered++
		}
		for _, n := range per[i].names {
			names[n] = true
		}
		snap.More = snap.More || per[i].more
	}
	var sorted []string
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	if len(sorted) > sc.limit {
		sorted, snap.More = sorted[:sc.limit], true
	}
	for _, name := range sorted {
		ls := lockStatus{Name: name}
		for i := range cs {
			ln := lockOnNode{Addr: cs[i].addr}
			l, ok := per[i].locks[name]
			switch {
			case snap.Nodes[i].Error != "":
				ln.Error = "no answer"
			case per[i].errs[name] != nil:
				ln.Error = per[i].errs[name].Error()
			case !ok: // a pattern matched the name on other masters only
				ln.Type = "none"
			default:
				ln.fill(l)
			}
			ls.Nodes = append(ls.Nodes, ln)
		}
		ls.judge()
		snap.Locks = append(snap.Locks, ls)
	}
	return snap
}

// readInfo reads INFO server, replication and cpu as a map (plain INFO on
// a server that takes one section per call), and the server's age as the
// clients judge it for the restart quarantine (internal/redisinfo: its
// main thread's CPU time, which no clock step inflates).
func readInfo(ctx context.Context, addr string, c *redis.Client) (map[string]string, time.Duration, error) {
	text, err := c.Info(ctx, "server", "replication", "cpu").Result()
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.Contains(rerr.Error(), "wrong number of arguments") {
		text, err = c.Info(ctx).Result()
	}
	if err != nil {
		return nil, 0, ctxerr.Wrap(ctx, err)
	}
	si, err := redisinfo.Parse(addr, text)
	if err != nil {
		return nil, 0, err
	}
	return parseInfo(text), si.Uptime, nil
}

func parseInfo(text string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

func (ns *nodeStatus) fill(info map[string]string, age, quarantine time.Duration) {
	ns.Role = info["role"]
	ns.Version = nodecheck.Version(info)
	ns.RunID = info["run_id"]
	up, _ := strconv.ParseFloat(info["uptime_in_seconds"], 64)
	ns.UptimeS = up
	ns.Promoted = ns.Role == "master" && info["master_replid2"] != "" && info["master_replid2"] != nodecheck.NoReplID
	if quarantine > 0 {
		// As redlock judges a server it meets for the first time: its age
		// is its main thread's CPU time (at most its uptime less one
		// second; 0 for a promoted master, which the client meets as new).
		if left := quarantine - age; left > 0 {
			ns.QuarantineS = left.Seconds()
		}
	}
}

func (ln *lockOnNode) fill(l lockkey.Lock) {
	ln.Type = l.Type
	ln.Waiting = l.Waiting
	if l.HasFence {
		f := l.Fence
		ln.Fence = &f
	}
	switch l.Type {
	case "string":
		ln.Value = l.Value
		ln.TTLms = l.TTL.Milliseconds()
	case "zset":
		for _, h := range l.Holds {
			ln.Holds = append(ln.Holds, holdStat{Kind: h.Kind(), ID: h.ID, TTLms: h.TTL.Milliseconds()})
		}
	}
}

// judge sets the lock's kind, quorum, holders and state from its nodes.
func (ls *lockStatus) judge() {
	n := len(ls.Nodes)
	ls.Quorum = n/2 + 1
	answered := 0
	types := map[string]bool{}
	type count struct {
		h  holderStat
		on int
	}
	counts := map[string]*count{}
	var order []string
	add := func(kind, id string) {
		key := kind + "\n" + id
		c, ok := counts[key]
		if !ok {
			o := wire.ParseOwner(id)
			c = &count{h: holderStat{Kind: kind, Token: o.Token, Host: o.Host, PID: o.PID, Label: o.Label, id: id}}
			if !o.Since.IsZero() {
				c.h.Since = &o.Since
			}
			counts[key] = c
			order = append(order, key)
		}
		c.on++
	}
	semK := 0
	for _, ln := range ls.Nodes {
		if ln.Error != "" {
			continue
		}
		answered++
		if ln.Type != "none" {
			types[ln.Type] = true
		}
		if ln.Type == "string" {
			add("holder", ln.Value)
		}
		for _, h := range ln.Holds {
			add(h.Kind, h.ID)
			if k, ok := strings.CutPrefix(h.Kind, "semaphore holder (k="); ok {
				semK, _ = strconv.Atoi(strings.TrimSuffix(k, ")"))
			}
		}
	}
	switch {
	case len(types) == 0:
		ls.Kind = "none"
	case len(types) > 1:
		ls.Kind = "unknown"
	case types["string"]:
		ls.Kind = "mutex"
	case types["zset"]:
		ls.Kind = shapeKind(ls.Nodes)
	default:
		for t := range types {
			ls.Kind = t
		}
	}
	if semK > 1 {
		// A semaphore of k places needs max(majority, n*k/(k+1)+1) masters.
		ls.Quorum = max(ls.Quorum, n*semK/(semK+1)+1)
	}
	host := localHostname()
	for _, key := range order {
		c := counts[key]
		c.h.On = c.on
		c.h.Quorum = c.on >= ls.Quorum
		c.h.judgeCooldown(ls.ttlLeft(c.h.Kind, c.h.id), host)
		ls.Holders = append(ls.Holders, c.h)
	}
	sort.SliceStable(ls.Holders, func(i, j int) bool { return ls.Holders[i].On > ls.Holders[j].On })
	ls.State = "free"
	for _, h := range ls.Holders {
		if h.Quorum {
			ls.State = "held"
		}
	}
	if ls.State == "free" && n-answered >= ls.Quorum {
		// The masters that did not answer could hold a quorum.
		ls.State = "unknown"
	}
}

// ttlLeft is the longest TTL left of the holder (kind, id) on the masters.
func (ls *lockStatus) ttlLeft(kind, id string) time.Duration {
	var most int64
	for _, ln := range ls.Nodes {
		if ln.Type == "string" && kind == "holder" && ln.Value == id {
			most = max(most, ln.TTLms)
		}
		for _, h := range ln.Holds {
			if h.Kind == kind && h.ID == id {
				most = max(most, h.TTLms)
			}
		}
	}
	return time.Duration(most) * time.Millisecond
}

// shapeKind names a lock shape by its holds' groups: "read-write",
// "semaphore", "reentrant", or "shared" when it has no live hold to tell.
func shapeKind(nodes []lockOnNode) string {
	for _, ln := range nodes {
		for _, h := range ln.Holds {
			switch {
			case h.Kind == "reader" || h.Kind == "writer":
				return "read-write"
			case strings.HasPrefix(h.Kind, "semaphore"):
				return "semaphore"
			case strings.HasPrefix(h.Kind, "reentrant"):
				return "reentrant"
			}
		}
	}
	return "shared"
}

// track stamps each holder with when --watch first saw it: not on the
// first reading, which cannot tell.
func (s *statusSnap) track(seen map[string]time.Time, first bool) {
	live := map[string]bool{}
	for i := range s.Locks {
		for j := range s.Locks[i].Holders {
			h := &s.Locks[i].Holders[j]
			key := s.Locks[i].Name + "\n" + h.Kind + "\n" + h.id
			live[key] = true
			t, ok := seen[key]
			if !ok {
				t = s.Time
				if first {
					t = time.Time{}
				}
				seen[key] = t
			}
			if !t.IsZero() {
				h.SeenSince = &t
			}
		}
	}
	for k := range seen {
		if !live[k] {
			delete(seen, k)
		}
	}
}

func (s *statusSnap) print(w io.Writer) {
	width := 0
	for _, n := range s.Nodes {
		width = max(width, len(n.Addr))
	}
	for _, n := range s.Nodes {
		fmt.Fprintf(w, "%-*s  %s\n", width, n.Addr, n.describe())
	}
	if len(s.Locks) == 0 {
		fmt.Fprintf(w, "no lock matches %q\n", s.Pattern)
	}
	for _, l := range s.Locks {
		if l.Kind == "none" {
			fmt.Fprintf(w, "lock %q\n", l.Name)
		} else {
			fmt.Fprintf(w, "lock %q (%s)\n", l.Name, l.Kind)
		}
		for _, ln := range l.Nodes {
			fmt.Fprintf(w, "  %-*s  %s\n", width, ln.Addr, ln.describe())
			for _, h := range ln.Holds {
				fmt.Fprintf(w, "  %-*s    %s %s, TTL %v\n", width, ln.Addr, h.Kind, owner(wire.ParseOwner(h.ID)), time.Duration(h.TTLms)*time.Millisecond)
			}
		}
		l.printSummary(w, s.Time)
	}
	if s.More {
		fmt.Fprintln(w, "(more locks match: raise --limit)")
	}
}

func (ns nodeStatus) describe() string {
	if ns.Error != "" {
		return "error: " + ns.Error
	}
	up := time.Duration(ns.UptimeS * float64(time.Second))
	s := fmt.Sprintf("%s, %s, up %v, run %s", ns.Role, ns.Version, up, short(ns.RunID))
	if ns.Promoted {
		s += ", promoted from a replica"
	}
	if ns.QuarantineS > 0 {
		s += fmt.Sprintf(", in restart quarantine for %v more", time.Duration(ns.QuarantineS*float64(time.Second)).Round(time.Second))
	}
	return s
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func owner(o wire.Owner) string {
	if label, cd, _, ok := parseCooldownLabel(o.Label); ok {
		return fmt.Sprintf("%s (host %q, pid %d, label %q, --cooldown %v)", o.Token, o.Host, o.PID, label, cd)
	}
	return fmt.Sprintf("%s (host %q, pid %d, label %q)", o.Token, o.Host, o.PID, o.Label)
}

func (ln lockOnNode) describe() string {
	var s string
	switch {
	case ln.Error != "":
		return "error: " + ln.Error
	case ln.Type == "none":
		s = "free"
	case ln.Type == "string":
		ttl := "no expiry"
		if ln.TTLms >= 0 {
			ttl = "TTL " + (time.Duration(ln.TTLms) * time.Millisecond).String()
		}
		s = fmt.Sprintf("held by %s, %s", owner(wire.ParseOwner(ln.Value)), ttl)
	case ln.Type == "zset" && len(ln.Holds) == 0:
		s = "free (no live hold)"
	case ln.Type == "zset":
		s = plural(len(ln.Holds), "hold")
	default:
		s = fmt.Sprintf("a %s key, not a lock", ln.Type)
	}
	if ln.Fence != nil {
		s += fmt.Sprintf(", fence %d", *ln.Fence)
	}
	if ln.Waiting > 0 {
		s += ", " + plural(ln.Waiting, "waiting writer")
	}
	return s
}

func (ls lockStatus) printSummary(w io.Writer, now time.Time) {
	answered := 0
	for _, ln := range ls.Nodes {
		if ln.Error == "" {
			answered++
		}
	}
	n := len(ls.Nodes)
	switch {
	case ls.State == "unknown":
		fmt.Fprintf(w, "lock %q: unknown (%d of %d masters did not answer)\n", ls.Name, n-answered, n)
	case ls.Kind == "mutex" && ls.State == "held":
		h := ls.Holders[0]
		fmt.Fprintf(w, "lock %q: held by %s on a quorum (%d of %d)%s%s\n", ls.Name, h.Token, h.On, n, sinceNote(h, now), seenNote(h))
		if h.Cooldown != nil {
			fmt.Fprintf(w, "  %s\n", h.cooldownNote())
		}
	case ls.State == "held":
		k := 0
		for _, h := range ls.Holders {
			if h.Quorum {
				k++
			}
		}
		each := ", each"
		if k == 1 {
			each = ""
		}
		fmt.Fprintf(w, "lock %q: %s%s on a quorum (at least %d of %d masters)\n", ls.Name, plural(k, "holder"), each, ls.Quorum, n)
	default:
		fmt.Fprintf(w, "lock %q: not held by any quorum\n", ls.Name)
	}
	for _, h := range ls.Holders {
		if ls.Kind == "mutex" && ls.State == "held" && h.Quorum {
			continue // said above
		}
		q := ""
		if !h.Quorum {
			q = " (not a quorum)"
		}
		fmt.Fprintf(w, "  %s %s on %d of %d%s%s%s\n", h.Kind, owner(h.owner()), h.On, n, q, sinceNote(h, now), seenNote(h))
		if h.Cooldown != nil {
			fmt.Fprintf(w, "    %s\n", h.cooldownNote())
		}
	}
}

// owner is the holder's metadata as parsed.
func (h holderStat) owner() wire.Owner {
	return wire.Owner{Token: h.Token, Host: h.Host, PID: h.PID, Label: h.Label}
}

// sinceNote is ", held since ... (... ago)" when the holder's value says
// when its acquisition began.
func sinceNote(h holderStat, now time.Time) string {
	if h.Since == nil {
		return ""
	}
	return fmt.Sprintf(", held since %s (%s ago)", h.Since.Format("2006-01-02 15:04:05.000 MST"), max(now.Sub(*h.Since), 0).Round(time.Millisecond))
}

func seenNote(h holderStat) string {
	if h.SeenSince == nil {
		return ""
	}
	return fmt.Sprintf(", first seen by this watch at %s", h.SeenSince.Format("15:04:05"))
}

// plural is "1 hold", "2 holds".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
