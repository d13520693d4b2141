package redisnode

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// Scripts holds the Lua scripts the Node runs: scripts/acquire.lua,
// scripts/extend.lua, scripts/release.lua, and for fencing tokens
// scripts/acquire_fenced.lua and scripts/raise_fence.lua, and for the lock
// shapes (reentrant, read-write, semaphore) scripts/acquire_hold.lua,
// scripts/extend_hold.lua and scripts/release_hold.lua, and for the fair
// queue scripts/acquire_queued.lua and scripts/leave_queue.lua (release.lua,
// release_hold.lua and leave_queue.lua also publish the release
// notifications that Watch receives). Each starts with a header naming its
// KEYS, ARGV, the commands it calls and its return values, so that adapters
// for other clients can run exactly the same scripts. Every key a script
// touches for one lock shares the lock key's Redis Cluster hash slot. The
// scripts derive no names: the Node sends every key (KEYS) and the release
// channel (ARGV) as package internal/wire names them (wire.GuardKey,
// wire.FenceKey, wire.WaitingKey, wire.QueueKey, wire.QueueTTLKey,
// wire.Channel); scripts/config_check.lua is the configuration check that a
// Node with a record (Node.SetConfig) runs in front of the scripts that count
// a vote; they build only a hold's member (wire.Member) and read and
// write the fencing counter's value (wire.FormatFence).
//
//go:embed scripts/acquire.lua scripts/extend.lua scripts/release.lua scripts/acquire_fenced.lua scripts/raise_fence.lua scripts/acquire_hold.lua scripts/extend_hold.lua scripts/release_hold.lua scripts/acquire_queued.lua scripts/leave_queue.lua scripts/config_check.lua
var Scripts embed.FS

var (
	acquireSrc    = mustRead("scripts/acquire.lua")
	extendSrc     = mustRead("scripts/extend.lua")
	releaseSrc    = mustRead("scripts/release.lua")
	acquireScript = redis.NewScript(acquireSrc)
	extendScript  = redis.NewScript(extendSrc)
	releaseScript = redis.NewScript(releaseSrc)
	fencedScript  = mustScript("scripts/acquire_fenced.lua")
	raiseScript   = mustScript("scripts/raise_fence.lua")

	acquireHoldScript = mustScript("scripts/acquire_hold.lua")
	extendHoldScript  = mustScript("scripts/extend_hold.lua")
	releaseHoldScript = mustScript("scripts/release_hold.lua")

	acquireQueuedSrc    = mustRead("scripts/acquire_queued.lua")
	acquireQueuedScript = redis.NewScript(acquireQueuedSrc)
	leaveQueueSrc       = mustRead("scripts/leave_queue.lua")
	leaveQueueScript    = redis.NewScript(leaveQueueSrc)
)

func mustScript(name string) *redis.Script { return redis.NewScript(mustRead(name)) }

func mustRead(name string) string {
	src, err := Scripts.ReadFile(name)
	if err != nil {
		panic("redisnode: embedded script missing: " + name)
	}
	return string(src)
}
