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
	seen := map[string]int{}
	for i, m := range c.Masters {
		if m == "" || strings.ContainsAny(m, " \n@/") || !strings.Contains(m, ":") {
			return fmt.Errorf("master %d %q: want host:port", i+1, bound(m))
		}
		if j, dup := seen[m]; dup {
			return fmt.Errorf("master %q listed twice (%d and %d)", bound(m), j+1, i+1)
		}
		seen[m] = i
	}
	return nil
}

// bound is s as an error may quote it: cut at 80 bytes, and not shown at
// all when it holds '@' or '/' (a URL, which may carry a password).
func bound(s string) string {
	if strings.ContainsAny(s, "@/") {
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
// line per master, in Masters' order. The hash (Record) is of the same text
// with the masters sorted, so that the order does not change it.
func (c Config) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d\nmode single\nquorum %d\nmaxkeyttl %d\ndrift %s\n", c.Epoch, c.Quorum, c.MaxKeyTTL.Milliseconds(), strconv.FormatFloat(c.DriftFactor+0, 'g', -1, 64)) // +0: -0 is written 0
	for _, m := range c.Masters {
		b.WriteString("master " + m + "\n")
	}
	return b.String()
}

// Record is the record's "cur" field, which a client sends with every
// checked call: "<epoch> single <maxkeyttl in ms> <hash>", the hash being 24
// hexadecimal digits of the SHA-256 of Text.
func (c Config) Record() string {
	c.Masters = slices.Sorted(slices.Values(c.Masters))
	sum := sha256.Sum256([]byte(c.Text()))
	return fmt.Sprintf("%d single %d %s", c.Epoch, c.MaxKeyTTL.Milliseconds(), hex.EncodeToString(sum[:12]))
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
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			return Config{}, fmt.Errorf("line %d %q: want \"name value\"", i+1, bound(line))
		}
		if name != "master" && seen[name] {
			return Config{}, fmt.Errorf("line %d: %s given twice", i+1, name)
		}
		seen[name] = true
		var err error
		switch name {
		case "epoch":
			c.Epoch, err = strconv.ParseInt(val, 10, 64)
		case "mode":
			if val != "single" {
				err = errors.New("only single is known")
			}
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
	if err := c.Check(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ParseRecord checks a record's "cur" form and returns its epoch and
// longest key life.
func ParseRecord(rec string) (epoch int64, maxKeyTTL time.Duration, err error) {
	f := strings.Split(rec, " ")
	if len(f) != 4 || f[1] != "single" || len(f[3]) != 24 {
		return 0, 0, fmt.Errorf("configuration record %q: want \"<epoch> single <ms> <24 hex digits>\"", bound(rec))
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
