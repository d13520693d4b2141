package redisnode

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/knobs"
	"github.com/quorumlock/quorumlock/internal/wire"
	"github.com/quorumlock/quorumlock/redlock"
)

// SetConfig makes n's acquire, extend and fencing calls carry record, the
// configuration record of the masters' current set (its "cur", as package
// reconfig publishes it; docs/reconfig.md), checked by the master in the
// same atomic step (scripts/config_check.lua): a master whose record is at
// a later epoch, or at the same epoch but for another configuration, refuses
// the call with an error that wraps redlock.ErrConfigStale (Lock and Do then
// stop retrying: the client must load the current configuration); a master
// at an earlier epoch, or with no record, refuses it with its reply as it
// is ("QLCONFIG behind ...", "QLCONFIG none": a failed vote). Releases and
// LeaveQueue are not checked: a client may always delete its own keys. ""
// removes the record (no check, as without SetConfig).
//
// The check reads the key wire.ConfigKey ("quorumlock:config") and the
// server's run (a record written by another run counts as none): an ACL
// user needs "~quorumlock:config" (EVAL asks for read and write on every
// key a script names) and +hmget on top of the minimal ACL (which has
// +info). It errors, changing nothing, for a malformed record and for a
// Cluster client (the record is in no lock's hash slot). It is safe to call
// while other calls run (each call reads the record once, for its check,
// its key life bound and its fencing epoch), but the
// redlock.Client over the nodes must list exactly the masters of the
// record's configuration, with its quorum (reconfig.Config's Masters and
// Quorum): the masters check the record, not the list a client counts
// votes over. To move to a new configuration, build a new client.
func (n *Node) SetConfig(record string) error {
	if record == "" {
		n.config.Store(nil)
		return nil
	}
	if _, ok := n.client.(*redis.ClusterClient); ok {
		return fmt.Errorf("redisnode: %s: a Redis Cluster master cannot check a configuration record (it is in no lock's hash slot)", n.addr)
	}
	epoch, k, err := wire.ParseRecord(record)
	if err != nil {
		return fmt.Errorf("redisnode: %s: %w", n.addr, err)
	}
	n.config.Store(&nodeConfig{record: record, keyTTL: k.Milliseconds(), epoch: epoch})
	return nil
}

// nodeConfig is a Node's configuration record (SetConfig), the longest key
// life it allows, in milliseconds, and its epoch.
type nodeConfig struct {
	record string
	keyTTL int64
	epoch  int64
}

// noEpoch is the fencing scripts' epoch argument without a record, boxed
// once.
var noEpoch any = int64(0)

// epochArg is the configuration epoch the fencing scripts read and stamp
// (acquire_fenced.lua, acquire_queued.lua, raise_fence.lua): c's epoch, 0
// without a record. A call takes its record and its epoch from one load of
// the Node's configuration, so that the two agree.
func (c *nodeConfig) epochArg() any {
	if c != nil {
		return c.epoch
	}
	return noEpoch
}

// keyMillis is ttlMillis for a key's TTL, refused without being sent when
// it is above the longest key life of configuration c, the call's (the
// wait between two steps of a change is reckoned from it).
func (n *Node) keyMillis(c *nodeConfig, ttl time.Duration) (int64, error) {
	ms, err := ttlMillis(ttl)
	if err != nil {
		return 0, err
	}
	if c != nil && ms > c.keyTTL {
		return 0, fmt.Errorf("redisnode: %s: %w: %w: key TTL %v is above the configuration's longest key life %v", n.addr, redlock.ErrNotSent, redlock.ErrInvalidConfig, ttl, time.Duration(c.keyTTL)*time.Millisecond)
	}
	return ms, nil
}

// configCheckSrc is the chunk that checked scripts run first.
var configCheckSrc = mustRead("scripts/config_check.lua")

// checkedScript is the checked twin of one of the scripts that count a
// vote: config_check.lua followed by the script, with one more key.
type checkedScript struct {
	s    *redis.Script
	fast *script
	keys int // the unchecked script's number of keys
}

var (
	checkedByScript = map[*redis.Script]*checkedScript{}
	checkedByFast   = map[*script]*checkedScript{}
)

func init() {
	for _, c := range []struct {
		name string
		s    *redis.Script
		fast *script
	}{
		{"acquire.lua", acquireScript, acquireFast},
		{"extend.lua", extendScript, extendFast},
		{"acquire_queued.lua", acquireQueuedScript, queuedFast},
		{"acquire_fenced.lua", fencedScript, nil},
		{"raise_fence.lua", raiseScript, nil},
		{"acquire_hold.lua", acquireHoldScript, nil},
		{"extend_hold.lua", extendHoldScript, nil},
	} {
		src := configCheckSrc + mustRead("scripts/"+c.name)
		cs := &checkedScript{s: redis.NewScript(src)}
		checkedByScript[c.s] = cs
		if c.fast != nil {
			cs.keys, _ = strconv.Atoi(c.fast.keysArg.(string))
			cs.fast = newScript(cs.s, src, cs.keys+1)
			checkedByFast[c.fast] = cs
		}
		checkedNames[cs.s.Hash()] = checkedSource{name: "config_check.lua+" + c.name, src: src}
	}
}

// checkedSource names a checked script for a denial's message (denied.go).
type checkedSource struct{ name, src string }

var checkedNames = map[string]checkedSource{}

// configKeyArg is wire.ConfigKey boxed once.
var configKeyArg any = wire.ConfigKey

// checked returns s, keys and args as n sends them with configuration rec
// (n.config's, loaded once by the call): the checked twin with the
// record's key, the record and the check's flags appended when rec is not
// nil and s counts a vote; unchanged otherwise.
func (n *Node) checked(rec *nodeConfig, s *redis.Script, keys []string, args []any) (*redis.Script, []string, []any) {
	if rec == nil || knobs.NoConfigCheck.Load() { // a test-only switch (internal/knobs)
		return s, keys, args
	}
	c := checkedByScript[s]
	if c == nil {
		return s, keys, args
	}
	return c.s, append(slices.Clip(keys), wire.ConfigKey), append(slices.Clip(args), rec.record, configFlags())
}

// checkedEval is checked for eval's arguments (EVALSHA's: command, digest,
// number of keys, keys, arguments).
func (n *Node) checkedEval(rec *nodeConfig, s *script, args []any) (*script, []any) {
	if rec == nil || knobs.NoConfigCheck.Load() { // a test-only switch (internal/knobs)
		return s, args
	}
	c := checkedByFast[s]
	if c == nil {
		return s, args
	}
	keys := c.keys
	out := make([]any, 0, len(args)+3)
	out = append(out, args[0], c.fast.hashArg, c.fast.keysArg)
	out = append(out, args[3:3+keys]...)
	out = append(out, configKeyArg)
	out = append(out, args[3+keys:]...)
	return c.fast, append(out, rec.record, configFlags())
}

// configFlags is config_check.lua's test-only flags argument: "anyrun"
// trusts a record whatever server run wrote it (knobs.NoConfigRun); "" in
// production.
func configFlags() any { return testFlags(knobs.NoConfigRun.Load(), "anyrun") }

// staleConfig reports whether rerr is a master's refusal that says the
// client's record is not current (QLCONFIG stale or differs).
func staleConfig(rerr redis.Error) bool {
	msg := rerr.Error()
	return strings.HasPrefix(msg, "QLCONFIG stale ") || strings.HasPrefix(msg, "QLCONFIG differs ")
}

// configError is a master's refusal of a stale record: it wraps
// redlock.ErrConfigStale and the reply, and names the node.
type configError struct {
	addr  string
	reply error
}

func (e *configError) Error() string {
	return fmt.Sprintf("%v: %s: %v", redlock.ErrConfigStale, e.addr, e.reply)
}

func (e *configError) Unwrap() []error { return []error{redlock.ErrConfigStale, e.reply} }
