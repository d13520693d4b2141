package redisnode

import (
	"context"
	"errors"
	"hash/maphash"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/wire"
)

// The lock's hot path (Acquire, Extend, Release) does per attempt what does
// not change between the attempt's node calls: one attempt calls every
// node of the quorum with the same key and value, and its release sends
// them again. The release-guard key (a SHA-256 and two concatenations) and
// the boxed script arguments are built once per (key, value) and kept in a
// small cache shared by every Node of the process; each node call then
// costs one argument slice and go-redis's command. A value that misses the
// cache (evicted by another lock's attempt) is simply built again.

// lockArgs is what the calls of one acquisition share: the lock key, the
// value, the release-guard key, the waiting line's keys, the release
// channel (release.lua's) and the fencing counter (acquire_queued.lua's),
// and their boxed forms. It is never changed once
// published in argCache.
type lockArgs struct {
	key, value string
	guard      string
	queue      string // {key}:queue
	queueTTL   string // {key}:queue:ttl
	queueVal   string // {key}:queue:val
	grant      string // {key}:grant
	channel    string // {key}:released
	fence      string // {key}:fence
	ttl        int64  // TTL in ms boxed in ttlArg
	keyArg     any
	guardArg   any
	valueArg   any
	ttlArg     any
	queueArg   any
	qttlArg    any
	qvalArg    any
	grantArg   any
	chanArg    any
	fenceArg   any
}

// argCacheSize slots: more than the acquisitions one process has in flight
// at once in the common case; a collision only costs a rebuild.
const argCacheSize = 64

var (
	argCache [argCacheSize]atomic.Pointer[lockArgs]
	argSeed  = maphash.MakeSeed()
)

// argsFor returns the shared arguments of key and value; ttl is the TTL in
// milliseconds the caller will send most often (boxed once).
func argsFor(key, value string, ttl int64) (*lockArgs, error) {
	slot := &argCache[maphash.String(argSeed, value)%argCacheSize]
	if a := slot.Load(); a != nil && a.value == value && a.key == key {
		return a, nil
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	a := &lockArgs{key: key, value: value, ttl: ttl, ttlArg: ttl}
	k := wire.LockKeys(key, value) // one allocation
	a.guard, a.queue, a.queueTTL, a.queueVal, a.grant, a.channel, a.fence = k.Guard, k.Queue, k.QueueTTL, k.QueueVal, k.Grant, k.Channel, k.Fence
	// Pointers to a's own strings box without an allocation (go-redis
	// writes a *string as the string).
	a.keyArg, a.guardArg, a.valueArg = &a.key, &a.guard, &a.value
	a.queueArg, a.qttlArg, a.chanArg, a.fenceArg = &a.queue, &a.queueTTL, &a.channel, &a.fence
	a.qvalArg, a.grantArg = &a.queueVal, &a.grant
	slot.Store(a)
	return a, nil
}

// lineArgs is what LeaveQueue sends for a lock key whatever the waiter:
// the key, its line's three keys, its grant record and its release
// channel, boxed. It is never changed once published in lineCache.
type lineArgs struct {
	key, queue, queueTTL, queueVal, grant               string
	channel                                             string
	keyArg, queueArg, qttlArg, qvalArg, grantArg, chArg any
}

var lineCache [argCacheSize]atomic.Pointer[lineArgs]

// lineArgsFor returns the shared LeaveQueue arguments of key.
func lineArgsFor(key string) (*lineArgs, error) {
	slot := &lineCache[maphash.String(argSeed, key)%argCacheSize]
	if a := slot.Load(); a != nil && a.key == key {
		return a, nil
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	k := wire.LockKeys(key, "")
	a := &lineArgs{key: key, queue: k.Queue, queueTTL: k.QueueTTL, queueVal: k.QueueVal, grant: k.Grant, channel: k.Channel}
	a.keyArg, a.queueArg, a.qttlArg, a.chArg = &a.key, &a.queue, &a.queueTTL, &a.channel
	a.qvalArg, a.grantArg = &a.queueVal, &a.grant
	slot.Store(a)
	return a, nil
}

// waiterArgs is a waiter's boxed arguments to acquire_queued.lua, which its
// Lock call's attempts send to every node unchanged: its ID, arrival (Unix
// milliseconds), entry TTL (milliseconds) and mode. It is never changed
// once published in waiterCache.
type waiterArgs struct {
	id              string
	arrival, ttl    int64
	fair            bool
	idArg, arrArg   any
	ttlArg, modeArg any
}

var waiterCache [argCacheSize]atomic.Pointer[waiterArgs]

// The modes of acquire_queued.lua, boxed once.
var (
	modeFair any = "fair"
	modeLine any = "line"
)

// waiterArgsFor returns the boxed arguments of waiter id with arrival,
// ttl (in milliseconds) and fair, from the cache when the same waiter
// was sent before (the attempt's other nodes, its earlier attempts).
func waiterArgsFor(id string, arrival, ttl int64, fair bool) *waiterArgs {
	slot := &waiterCache[maphash.String(argSeed, id)%argCacheSize]
	if w := slot.Load(); w != nil && w.id == id && w.arrival == arrival && w.ttl == ttl && w.fair == fair {
		return w
	}
	w := &waiterArgs{id: id, arrival: arrival, ttl: ttl, fair: fair, modeArg: modeLine}
	// Pointers to w's own fields box without an allocation (go-redis
	// writes a *string and an *int64 as their values).
	w.idArg, w.arrArg, w.ttlArg = &w.id, &w.arrival, &w.ttl
	if fair {
		w.modeArg = modeFair
	}
	slot.Store(w)
	return w
}

// ms returns ms boxed, without an allocation when it is a's TTL.
func (a *lockArgs) ms(ms int64) any {
	if ms == a.ttl {
		return a.ttlArg
	}
	return ms
}

// script is a Lua script with its EVALSHA arguments boxed once.
type script struct {
	s       *redis.Script
	hashArg any // the SHA-1 digest
	srcArg  any // the source, for EVAL when the server lacks the digest
	keysArg any // the number of keys, as Redis reads it
}

func newScript(s *redis.Script, src string, keys int) *script {
	return &script{s: s, hashArg: s.Hash(), srcArg: src, keysArg: strconv.Itoa(keys)}
}

var (
	acquireFast = newScript(acquireScript, acquireSrc, 2)
	extendFast  = newScript(extendScript, extendSrc, 1)
	releaseFast = newScript(releaseScript, releaseSrc, 6)
	queuedFast  = newScript(acquireQueuedScript, acquireQueuedSrc, 7)
	leaveFast   = newScript(leaveQueueScript, leaveQueueSrc, 5)
)

// eval runs s with args (EVALSHA's: "evalsha", digest, number of keys,
// keys, arguments; the caller builds them, so that its boxed values are
// reused), falling back to EVAL when the server does not know the digest,
// as redis.Script.Run does, and returns the integer reply.
func (n *Node) eval(ctx context.Context, s *script, args []any) (int64, error) {
	return n.evalWith(ctx, n.config.Load(), s, args)
}

// evalWith is eval with the Node's configuration as the call loaded it.
func (n *Node) evalWith(ctx context.Context, cfg *nodeConfig, s *script, args []any) (int64, error) {
	var res int64
	err := n.evalCmdWith(ctx, cfg, s, args, func(cmd *redis.Cmd) (err error) {
		res, err = cmd.Int64()
		return err
	})
	return res, err
}

// evalCmdWith is evalWith that hands the reply to read.
func (n *Node) evalCmdWith(ctx context.Context, cfg *nodeConfig, s *script, args []any, read func(*redis.Cmd) error) error {
	s, args = n.checkedEval(cfg, s, args)
	err := n.do(ctx, func(ctx context.Context) error {
		cmd := n.process(ctx, args)
		if err := cmd.Err(); err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")) {
			eargs := append([]any{"eval", s.srcArg}, args[2:]...)
			cmd = n.process(ctx, eargs)
		}
		return read(cmd)
	})
	if err != nil {
		err = withKeys(err, evalKeys(args))
	}
	return err
}

// process sends one EVAL or EVALSHA command whose keys start at argument 3
// (so that a Cluster client routes it by the lock key, as go-redis's own
// Eval does).
func (n *Node) process(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = n.client.Process(ctx, cmd)
	return cmd
}
