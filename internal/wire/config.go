package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ConfigKey names a master's configuration record (docs/reconfig.md): a
// hash with the fields "cur" (Config.Record: the epoch, mode, longest key
// life and hash), "members" (Config.Text), "wait" (Config.Wait in
// milliseconds: how long after "sealed" the next step may be installed) and
// "sealed" (the master's own time in Unix milliseconds when the step that
// wrote "cur" was sealed; absent until then). Only package reconfig writes
// it; the acquire, extend and fencing scripts of a client that has a record
// read "cur" (node/redisnode/scripts/config_check.lua). It is not in any
// lock's hash slot, so a Redis Cluster master cannot keep it.
const ConfigKey = "quorumlock:config"

// MaxKeyTTL bounds a lock key's life (its TTL plus lock-delay), in
// redlock's options and in a configuration: far beyond any real lock, and
// far from overflowing a time.Duration (Config.Wait adds a third and the
// drift to it) or Redis's milliseconds.
const MaxKeyTTL = 100 * 365 * 24 * time.Hour

// MaxEpoch bounds a configuration's epoch: the scripts read epochs as Lua
// numbers (doubles), exact up to 2^53, and a step adds one.
const MaxEpoch = 1<<53 - 2

// Config is one configuration of the masters: the set that an epoch names,
// as the masters' records and the clients hold it.
type Config struct {
	// Epoch orders the configurations: one more per step, from 1.
	Epoch int64
	// Masters are the masters' addresses, host:port, each once; their
	// order is the clients' order of their nodes (the hash sorts them).
	Masters []string
	// Quorum is the number of masters a lock needs.
	Quorum int
	// Old is, in joint mode, the set the change leaves (Masters is the
	// set it goes to): a lock needs Quorum of Masters and OldQuorum of Old
	// (docs/reconfig.md, "Joint mode"). Empty in single mode.
	Old []string
	// OldQuorum is Old's quorum (joint mode; 0 in single mode).
	OldQuorum int
	// MaxKeyTTL is the longest key life any lock of a client of this
	// configuration may write: its TTL plus its stretched lock-delay
	// (whole milliseconds).
	MaxKeyTTL time.Duration
	// DriftFactor is the largest drift factor of any client.
	DriftFactor float64
}

// Check reports the first thing wrong with c, naming the bad value.
func (c Config) Check() error {
	switch {
	case c.Epoch < 1 || c.Epoch > MaxEpoch:
		return fmt.Errorf("epoch %d: want 1 to %d", c.Epoch, MaxEpoch)
	case len(c.Masters) == 0:
		return errors.New("no masters")
	case c.Quorum <= len(c.Masters)/2 || c.Quorum > len(c.Masters):
		return fmt.Errorf("quorum %d of %d masters: want a majority, at most all", c.Quorum, len(c.Masters))
	case c.MaxKeyTTL < time.Millisecond || c.MaxKeyTTL%time.Millisecond != 0 || c.MaxKeyTTL > MaxKeyTTL:
		return fmt.Errorf("longest key life %v: want whole milliseconds, at least 1ms, at most %v", c.MaxKeyTTL, MaxKeyTTL)
	case c.DriftFactor < 0 || c.DriftFactor >= 0.5 || c.DriftFactor != c.DriftFactor:
		return fmt.Errorf("drift factor %v: want at least 0, below 0.5", c.DriftFactor)
	}
	if err := checkSet("master", c.Masters); err != nil {
		return err
	}
	switch {
	case len(c.Old) == 0 && c.OldQuorum != 0:
		return fmt.Errorf("old quorum %d without an old set (single mode has none)", c.OldQuorum)
	case len(c.Old) == 0:
		return nil
	case c.OldQuorum <= len(c.Old)/2 || c.OldQuorum > len(c.Old):
		return fmt.Errorf("old quorum %d of %d old masters: want a majority, at most all", c.OldQuorum, len(c.Old))
	}
	return checkSet("old master", c.Old)
}

// checkSet checks one set's addresses: each host:port, each once.
func checkSet(what string, set []string) error {
	seen := map[string]int{}
	for i, m := range set {
		if m == "" || strings.ContainsAny(m, " \n@/") || !strings.Contains(m, ":") {
			return fmt.Errorf("%s %d %q: want host:port", what, i+1, bound(m))
		}
		if j, dup := seen[m]; dup {
			return fmt.Errorf("%s %q listed twice (%d and %d)", what, bound(m), j+1, i+1)
		}
		seen[m] = i
	}
	return nil
}

// Joint reports whether c is in joint mode (it has an old set).
func (c Config) Joint() bool { return len(c.Old) > 0 }

// Mode is the record's mode: "joint" or "single".
func (c Config) Mode() string {
	if c.Joint() {
		return "joint"
	}
	return "single"
}

// Set is one set of masters with its quorum.
type Set struct {
	Masters []string
	Quorum  int
}

// Sets are c's sets: Masters with Quorum, then (joint mode) Old with
// OldQuorum. A lock needs a quorum of each.
func (c Config) Sets() []Set {
	sets := []Set{{Masters: c.Masters, Quorum: c.Quorum}}
	if c.Joint() {
		sets = append(sets, Set{Masters: c.Old, Quorum: c.OldQuorum})
	}
	return sets
}

// All is every master of c, each once: Masters in order, then the masters
// of Old that are not in Masters (the clients' order of their nodes).
func (c Config) All() []string { return Union(c.Masters, c.Old) }

// Union is a's elements, then b's that are not in a, each once (a and b
// each name distinct elements).
func Union[T comparable](a, b []T) []T {
	all := slices.Clone(a)
	for _, m := range b {
		if !slices.Contains(all, m) {
			all = append(all, m)
		}
	}
	return all
}

// SameSet reports whether a and b name the same masters, in any order.
func SameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// Has reports whether addr is one of c's masters (of either set).
func (c Config) Has(addr string) bool {
	return slices.Contains(c.Masters, addr) || slices.Contains(c.Old, addr)
}

// Reached reports whether the masters for which has is true make a quorum
// of each of c's sets.
func (c Config) Reached(has func(addr string) bool) bool {
	for _, s := range c.Sets() {
		n := 0
		for _, m := range s.Masters {
			if has(m) {
				n++
			}
		}
		if n < s.Quorum {
			return false
		}
	}
	return true
}

// Summary describes c's sets for people: "5 masters, quorum 3", or in
// joint mode "joint: 5 masters, quorum 3, and the old 5, quorum 3 (7 in
// all)".
func (c Config) Summary() string {
	s := fmt.Sprintf("%d masters, quorum %d", len(c.Masters), c.Quorum)
	if c.Joint() {
		s = fmt.Sprintf("joint: %s, and the old %d, quorum %d (%d in all)", s, len(c.Old), c.OldQuorum, len(c.All()))
	}
	return s
}

// Removed is the "cur" a master that a step removes keeps (the record
// with the mode "removed"): no client's record equals it, so the
// configuration check refuses every vote there.
func (c Config) Removed() string {
	return strings.Replace(c.Record(), " "+c.Mode()+" ", " removed ", 1)
}

// bound is s as an error may quote it: cut at 80 bytes, and not shown at
// all when it holds '@', '/', '?' or '=' (a URL, which may carry a
// password, or a query string's "password=").
func bound(s string) string {
	if strings.ContainsAny(s, "@/?=") {
		return "(not shown: it may hold a password)"
	}
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Text is c in the canonical text the hash covers and the record's
// "members" field holds: one "name value" line each for epoch, mode,
// quorum, maxkeyttl (milliseconds) and drift, then a "master host:port"
// line per master, in Masters' order; in joint mode, then an "oldquorum"
// line and an "old host:port" line per master of Old. The hash (Record) is
// of the same text with each set sorted, so that the order does not change
// it.
func (c Config) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d\nmode %s\nquorum %d\nmaxkeyttl %d\ndrift %s\n", c.Epoch, c.Mode(), c.Quorum, c.MaxKeyTTL.Milliseconds(), strconv.FormatFloat(c.DriftFactor+0, 'g', -1, 64)) // +0: -0 is written 0
	for _, m := range c.Masters {
		b.WriteString("master " + m + "\n")
	}
	if c.Joint() {
		fmt.Fprintf(&b, "oldquorum %d\n", c.OldQuorum)
		for _, m := range c.Old {
			b.WriteString("old " + m + "\n")
		}
	}
	return b.String()
}

// Record is the record's "cur" field, which a client sends with every
// checked call: "<epoch> <mode> <maxkeyttl in ms> <hash>", the mode single
// or joint, the hash being 24 hexadecimal digits of the SHA-256 of Text.
func (c Config) Record() string {
	c.Masters = slices.Sorted(slices.Values(c.Masters))
	c.Old = slices.Sorted(slices.Values(c.Old))
	sum := sha256.Sum256([]byte(c.Text()))
	return fmt.Sprintf("%d %s %d %s", c.Epoch, c.Mode(), c.MaxKeyTTL.Milliseconds(), hex.EncodeToString(sum[:12]))
}

// Wait is how long after a step's seal the next step may begin:
// W = K + K*DriftFactor + 2ms + K/3, K the longest key life (docs/reconfig.md,
// "The single-step rule and the wait"), in whole milliseconds.
func (c Config) Wait() time.Duration {
	k := c.MaxKeyTTL
	w := k + time.Duration(float64(k)*c.DriftFactor) + 2*time.Millisecond + k/3
	return w.Truncate(time.Millisecond) + time.Millisecond
}

// ParseConfig reads Text's form back and checks it.
func ParseConfig(text string) (Config, error) {
	var c Config
	seen := map[string]bool{}
	mode := ""
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			return Config{}, fmt.Errorf("line %d %q: want \"name value\"", i+1, bound(line))
		}
		if name != "master" && name != "old" && seen[name] {
			return Config{}, fmt.Errorf("line %d: %s given twice", i+1, name)
		}
		seen[name] = true
		var err error
		switch name {
		case "epoch":
			c.Epoch, err = strconv.ParseInt(val, 10, 64)
		case "mode":
			mode = val
			if val != "single" && val != "joint" {
				err = errors.New("want single or joint")
			}
		case "oldquorum":
			c.OldQuorum, err = strconv.Atoi(val)
		case "old":
			c.Old = append(c.Old, val)
		case "quorum":
			c.Quorum, err = strconv.Atoi(val)
		case "maxkeyttl":
			var ms int64
			ms, err = strconv.ParseInt(val, 10, 64)
			if err == nil && (ms < 1 || ms > MaxKeyTTL.Milliseconds()) {
				err = fmt.Errorf("want 1 to %d milliseconds", MaxKeyTTL.Milliseconds())
			}
			c.MaxKeyTTL = time.Duration(ms) * time.Millisecond
		case "drift":
			c.DriftFactor, err = strconv.ParseFloat(val, 64)
		case "master":
			c.Masters = append(c.Masters, val)
		default:
			err = errors.New("unknown name")
		}
		if err != nil {
			return Config{}, fmt.Errorf("line %d %q: %v", i+1, bound(line), err)
		}
	}
	for _, name := range []string{"epoch", "mode", "quorum", "maxkeyttl", "drift"} {
		if !seen[name] {
			return Config{}, fmt.Errorf("no %s line", name)
		}
	}
	if mode != c.Mode() {
		return Config{}, fmt.Errorf("mode %s with %d old masters: joint mode has old masters, single mode none", mode, len(c.Old))
	}
	if err := c.Check(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ParseRecord checks a record's "cur" form and returns its epoch and
// longest key life.
func ParseRecord(rec string) (epoch int64, maxKeyTTL time.Duration, err error) {
	f := strings.Split(rec, " ")
	if len(f) != 4 || f[1] != "single" && f[1] != "joint" || len(f[3]) != 24 {
		return 0, 0, fmt.Errorf("configuration record %q: want \"<epoch> single|joint <ms> <24 hex digits>\"", bound(rec))
	}
	if _, err := hex.DecodeString(f[3]); err != nil {
		return 0, 0, fmt.Errorf("configuration record %q: hash: %v", bound(rec), err)
	}
	epoch, err = strconv.ParseInt(f[0], 10, 64)
	if err != nil || epoch < 1 || epoch > MaxEpoch || !digits(f[0]) { // digits only, as config_check.lua reads it
		return 0, 0, fmt.Errorf("configuration record %q: epoch %q: want a positive integer", bound(rec), bound(f[0]))
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || ms < 1 || ms > MaxKeyTTL.Milliseconds() {
		return 0, 0, fmt.Errorf("configuration record %q: longest key life %q: want 1 to %d milliseconds", bound(rec), bound(f[2]), MaxKeyTTL.Milliseconds())
	}
	return epoch, time.Duration(ms) * time.Millisecond, nil
}
