-- acquire_fenced.lua: acquire.lua that also reads the lock's fencing counter
-- in the same atomic step (as written by this run of the server), for fencing tokens that stay monotonic across
-- quorums (see raise_fence.lua and docs/algorithm.md, "Fencing tokens").
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release-guard key for this value (same hash slot as KEYS[1])
-- KEYS[3]  the fencing counter of the lock (same hash slot):
--          "<counter>:<run>", the server run that wrote it (its run_id
--          and master_replid, as run() below reads them)
--          (raise_fence.lua; internal/wire, fence.go)
-- ARGV[1]  the value to store: the lock's token
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  test-only flags, space-separated: "anyrun" reads a counter of
--          any run (knobs.NoRunStamp), "nostamp" ignores the epoch stamp
--          (knobs.NoConfigStamp); "" in production
-- ARGV[4]  the client's configuration epoch (docs/reconfig.md), 0 for a
--          client without a record
--
-- Commands used: INFO (server, replication), EXISTS, SET, GET.
--
-- The counter reads as 0 unless this run of the server wrote it: a counter
-- that came back from the disk after a restart may be older than what the
-- server had handed out (the AOF's last second lost in a host crash), so it
-- counts as lost, and the client's epoch rule covers it (docs/algorithm.md,
-- "Fencing tokens"). A plain number (written before counters carried their
-- run) reads as another run's. For a client at configuration epoch f > 0,
-- a counter stamped with an epoch below f - 1 (no stamp: epoch 0) reads as
-- lost too (docs/reconfig.md, "Fence tokens across the change"). Checked before anything is written: a
-- counter key that holds no counter fails the script with an error reply.
--
-- Returns: a two-element array
--   [1]  1 acquired (or already held ARGV[1]), 0 held by another value,
--        -1 refused by a release guard (as acquire.lua)
--   [2]  the fencing counter written by this run, 0 when there is none

-- run is the server's run: its run_id and its replication ID. A master that
-- is demoted, resynced from another and promoted again keeps its run_id,
-- not its replication ID (a promotion makes a new one), and its data may
-- then be older than what it wrote. nil when INFO lacks either.
local function run()
  local s = redis.call('INFO', 'server')
  local r = redis.call('INFO', 'replication')
  local a = string.find(s, 'run_id:', 1, true)
  local b = string.find(r, 'master_replid:', 1, true)
  if not a or not b then
    return nil
  end
  return string.sub(s, a + 7, a + 46) .. string.sub(r, b + 14, b + 53)
end

local flags = ' ' .. ARGV[3] .. ' '
local function flag(f)
  return string.find(flags, ' ' .. f .. ' ', 1, true) ~= nil
end

local fence = 0
local s = redis.call('GET', KEYS[3])
if s then
  local n, stamp, epoch = string.match(s, '^(%d+):(%x+):(%d+)$')
  if not n then
    n, stamp = string.match(s, '^(%d+):(%x+)$')
  end
  local v = tonumber(n or s)
  if not v or v ~= v or v >= 9007199254740992 or v <= -9007199254740992 then
    return redis.error_reply('ERR the fencing counter ' .. KEYS[3] .. ' holds no counter')
  end
  local f = tonumber(ARGV[4])
  local stale = f > 0 and tonumber(epoch or '0') < f - 1 and not flag('nostamp')
  if (flag('anyrun') or (n and stamp == run())) and not stale then
    fence = v
  end
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return { -1, fence }
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return { 1, fence }
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return { 1, fence }
end
return { 0, fence }
