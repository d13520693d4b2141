package memnode

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// The configuration check (docs/reconfig.md), as redisnode runs it
// (node/redisnode/scripts/config_check.lua): a master keeps the record of
// the set it belongs to, and a client that carries a record has its
// acquire, extend and fencing calls refused, in the same atomic step, by a
// master whose record is another.

// recordKey is the context key of a call's record (WithRecord).
type recordKey struct{}

// WithRecord returns a copy of ctx whose calls carry record, a client's
// configuration record (wire.Config.Record), as a redisnode.Node's calls do
// after its SetConfig: Acquire, AcquireFenced, AcquireQueued, AcquireHold,
// Extend, ExtendHold and RaiseFence(Keep) made with it are checked against
// the master's record (SetRecord) before they change anything. A master at
// a later epoch, or at the same epoch with another record (or none that
// equals it: a removed master's), refuses with an error reply that wraps
// redlock.ErrConfigStale; one at an earlier epoch, or with no record of its
// current run, refuses with "QLCONFIG behind ..." or "QLCONFIG none" (a
// failed vote). Such a call whose TTL is above the record's longest key
// life, or with a malformed record, fails with an error wrapping
// redlock.ErrNotSent and redlock.ErrInvalidConfig, sending nothing.
// Releases and LeaveQueue are not checked. "" carries none.
func WithRecord(ctx context.Context, record string) context.Context {
	return context.WithValue(ctx, recordKey{}, record)
}

// SetRecord writes record as the master's configuration record (the
// "cur" of wire.ConfigKey that a step of package reconfig writes), stamped
// with the node's current run; "" deletes it. It is a command like the
// others: a paused node applies it on resume, a failed one refuses it, and
// it errors when ctx ends first (it may still apply). The record is a key
// of the keyspace, wire.ConfigKey: Restart(false) loses it,
// RestartFromCheckpoint brings back the Checkpoint's, and a record of an
// earlier run counts as none (as on Redis; knobs.NoConfigRun trusts it).
func (n *Node) SetRecord(ctx context.Context, record string) error {
	return n.do(ctx, func() {
		if record == "" {
			delete(n.data, wire.ConfigKey)
			return
		}
		n.data[wire.ConfigKey] = &value{str: n.runID + " " + record, role: roleConfig}
	})
}

// callRecord is the record ctx carries (WithRecord), checked against ttl as
// redisnode's keyMillis does, and its epoch (0 without one), which the
// fencing calls read and stamp as redisnode's do: the record is "" when
// none is carried or the check is off (knobs.NoConfigCheck; the epoch
// stays).
func (n *Node) callRecord(ctx context.Context, ttl time.Duration) (string, int64, error) {
	rec, _ := ctx.Value(recordKey{}).(string)
	if rec == "" {
		return "", 0, nil
	}
	epoch, k, err := wire.ParseRecord(rec)
	if err != nil {
		return "", 0, fmt.Errorf("memnode %s: %w: %w: %w", n.addr, redlock.ErrNotSent, redlock.ErrInvalidConfig, err)
	}
	if ttl.Truncate(time.Millisecond) > k {
		return "", 0, fmt.Errorf("memnode %s: %w: %w: key TTL %v is above the configuration's longest key life %v", n.addr, redlock.ErrNotSent, redlock.ErrInvalidConfig, ttl, k)
	}
	if knobs.NoConfigCheck.Load() { // a test-only switch (internal/knobs)
		rec = ""
	}
	return rec, epoch, nil
}

// leadingEpoch is config_check.lua's string.match(rec, '^(%d+) '): the
// digits before the record's first space; ok is false when there are none.
func leadingEpoch(rec string) (int64, bool) {
	digits, _, found := strings.Cut(rec, " ")
	if !found || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil
}

// configLocked is config_check.lua for a call that carries client (""
// carries none: no check): nil when the master's record of its current
// run equals it, else the refusal. n.mu must be held.
func (n *Node) configLocked(client string) error {
	if client == "" {
		return nil
	}
	master := ""
	if v := n.data[wire.ConfigKey]; v != nil {
		run, cur, _ := strings.Cut(v.str, " ")
		if run == n.runID || knobs.NoConfigRun.Load() { // a test-only switch (internal/knobs)
			master = cur
		}
	}
	switch {
	case master == client:
		return nil
	case master == "":
		return fmt.Errorf("QLCONFIG none")
	}
	me, ok1 := leadingEpoch(master)
	ce, ok2 := leadingEpoch(client)
	switch {
	case !ok1 || !ok2 || me > ce:
		return fmt.Errorf("QLCONFIG stale %s: %w", master, redlock.ErrConfigStale)
	case me < ce:
		return fmt.Errorf("QLCONFIG behind %s", master)
	}
	return fmt.Errorf("QLCONFIG differs %s: %w", master, redlock.ErrConfigStale)
}
