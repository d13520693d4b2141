-- acquire_queued.lua: the acquire of a waiting Lock call (redlock.QueueNode):
-- the waiter joins the lock's waiting line when the key is held, and a
-- release names the line's first waiter to the lock's watchers
-- (release.lua). ARGV[6] says how binding the line is:
--   fair  the waiter takes the key only when it is the line's first
--         (WithFairQueue);
--   line  the waiter takes a free key whatever its place once it is in
--         line; a newcomer (not in line before this call) takes it only
--         when nobody else is in line: a Lock call that arrives while
--         others wait joins the line instead of taking the key ahead of
--         them. The line then only decides whom a release wakes.
-- The line's order is by arrival, ties by waiter ID (sorted-set order, the
-- same on every node); an entry keeps its first arrival and expires ARGV[5]
-- ms after the waiter's latest call, so a waiter that dies leaves the line
-- by itself.
--
-- In one atomic step: a release guard of this value refuses before
-- anything changes (the acquire is a straggler: its attempt is over); when
-- the key holds the value a release handed this waiter (the grant record
-- KEYS[7] names ARGV[3] and that value; see release.lua) the acquire takes
-- it over: the key is set to ARGV[1] for ARGV[2] ms, the record is
-- deleted, the waiter leaves the line, and it reports acquired; when
-- nobody is in line (neither queue key exists) a free key is taken at once,
-- and a refused waiter enters the line alone; otherwise it drops the entries that expired, enters the waiter when
-- absent, sets its entry to expire ARGV[5] ms from now, and acquires as
-- acquire.lua does when its mode allows. It
-- always reads the lock's fencing counter. When the key holds our value
-- afterwards the waiter leaves the line; while it is in the line, its
-- entry's value record (KEYS[6]: "<ARGV[2]> <ARGV[1]>") is this call's, the
-- value and TTL a release hands it the key at (none for an entry of 1 ms:
-- a TryLock's).
--
-- A waiter that gave up (leave_queue.lua) stays out until its entry
-- expires: it is a tombstone, an entry of KEYS[5] without one in KEYS[4].
-- A later call for it (a copy that was still on the network) enters
-- nothing and changes nothing: it returns 1 when the key already holds
-- ARGV[1] (a retried copy), else 0.
-- A waiter that acquires leaves no tombstone, fair or not: no later call of
-- its ID can come, since the client sends a waiter's next attempt under a
-- new ID whenever a call of its last one went unanswered (a copy may still
-- be on the network; redlock's fair.go, requeue), and a granted waiter's
-- call ends or rolls back and tries again in its old place. Both queue
-- keys expire with their last entry (tombstones included), so nothing is
-- left behind when every waiter dies.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release-guard key for this value (same Redis Cluster hash
--          slot as KEYS[1]; see release.lua)
-- KEYS[3]  the fencing counter of the lock (same hash slot), read as
--          acquire_fenced.lua reads it: 0 unless this run wrote it
-- KEYS[4]  the lock's waiting line (sorted set: waiter ID -> arrival in
--          ms; same hash slot)
-- KEYS[5]  the line's expiries (sorted set: waiter ID -> expiry in server
--          ms; same hash slot); also holds the tombstones
-- KEYS[6]  the line's values (hash: waiter ID -> "<TTL ms> <value>"; same
--          hash slot)
-- KEYS[7]  the lock's grant record (string: waiter ID, newline, value; same
--          hash slot), written by release.lua and leave_queue.lua
-- ARGV[1]  the value to store: the lock's token
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  the waiter's ID (no newline)
-- ARGV[4]  the waiter's arrival in milliseconds since 1970 (integer); an
--          entry keeps its first arrival
-- ARGV[5]  how long the waiter's entry, or its tombstone once it leaves,
--          lives, in milliseconds (positive)
-- ARGV[6]  "fair" or "line" (above)
-- ARGV[7]  test-only flags, space-separated: "anyrun" reads a
--          counter of any run (knobs.NoRunStamp); "notakeover" takes no
--          handed key over (knobs.NoGrantTakeover); "nostamp" ignores the
--          counter's epoch stamp (knobs.NoConfigStamp); "" in production
-- ARGV[8]  the client's configuration epoch (docs/reconfig.md), 0 for a
--          client without a record: as acquire_fenced.lua, a counter
--          stamped below epoch ARGV[8] - 1 reads as lost
--
-- Commands used: EXISTS, GET, INFO (server, replication), SET, DEL; when
-- the key is held or a line exists also TIME, ZRANGEBYSCORE, ZREM,
-- ZREMRANGEBYSCORE, ZADD, ZRANGE, ZCARD, PEXPIRE, HSET, HDEL.
-- (Membership is read from ZADD NX's reply, not ZSCORE, so that the ACL of
-- docs/nodes.md still suffices.)
--
-- Returns: a two-element array
--   [1]  1 acquired (or the key already held ARGV[1]: a retried copy, its
--        TTL unchanged; or a handed key taken over), 0 held by another value, not the waiter's turn,
--        or the waiter left, -1 refused by a release guard (as
--        acquire.lua)
--   [2]  the fencing counter written by this run, 0 when there is none
local fair = ARGV[6] == 'fair'
local flags = ' ' .. (ARGV[7] or '') .. ' '
local function flag(f)
  return string.find(flags, ' ' .. f .. ' ', 1, true) ~= nil
end

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

-- The fencing counter as this run wrote it, 0 when absent or another
-- run's; an error reply when the key holds no counter.
local function counter()
  local s = redis.call('GET', KEYS[3])
  if not s then
    return 0
  end
  local n, stamp, epoch = string.match(s, '^(%d+):(%x+):(%d+)$')
  if not n then
    n, stamp = string.match(s, '^(%d+):(%x+)$')
  end
  local v = tonumber(n or s)
  if not v or v ~= v or v >= 9007199254740992 or v <= -9007199254740992 then
    return nil
  end
  local f = tonumber(ARGV[8])
  if f > 0 and tonumber(epoch or '0') < f - 1 and not flag('nostamp') then
    return 0
  end
  if flag('anyrun') or (n and stamp == run()) then
    return v
  end
  return 0
end

local now, expiry
local function clock()
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  expiry = now + tonumber(ARGV[5])
end

-- Sets both queue keys to expire with the latest entry. Relative to now
-- (PEXPIRE, at least 1 ms): PEXPIREAT of now + 1 ms deletes the key at once
-- when the server's clock has passed that millisecond since TIME was read,
-- which refused a TryLock's 1 ms entry on a free lock.
local function cover()
  local top = redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')
  if top[2] then
    local ms = string.format('%d', math.max(tonumber(top[2]) - now, 1))
    redis.call('PEXPIRE', KEYS[4], ms)
    redis.call('PEXPIRE', KEYS[5], ms)
    redis.call('PEXPIRE', KEYS[6], ms)
  end
end

-- Records this call's value and TTL as the waiter's (it is in the line);
-- not for an entry of 1 ms, a fair TryLock's, which makes no second
-- attempt to take a handed key over.
local function record()
  if tonumber(ARGV[5]) > 1 then
    redis.call('HSET', KEYS[6], ARGV[3], ARGV[2] .. ' ' .. ARGV[1])
  end
end

-- Takes the waiter out of the line; it leaves no tombstone (above).
local function leave()
  redis.call('ZREM', KEYS[4], ARGV[3])
  redis.call('ZREM', KEYS[5], ARGV[3])
  redis.call('HDEL', KEYS[6], ARGV[3])
  cover()
end

local fence = counter()
if not fence then
  return redis.error_reply('ERR the fencing counter ' .. KEYS[3] .. ' holds no counter')
end

-- Enters the waiter alone in the line.
local function enter()
  redis.call('ZADD', KEYS[4], ARGV[4], ARGV[3])
  redis.call('ZADD', KEYS[5], expiry, ARGV[3])
  record()
  cover()
end

-- A release of this value ran first: this acquire is a straggler, and
-- changes nothing.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return { -1, fence }
end

-- The key a release handed this waiter, still at the value it was handed
-- at: taken over.
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] and not flag('notakeover') and redis.call('GET', KEYS[7]) == ARGV[3] .. '\n' .. held then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('DEL', KEYS[7])
  clock()
  leave()
  return { 1, fence }
end

-- Nobody in line, no tombstone: the waiter would be first and alone.
if redis.call('EXISTS', KEYS[4]) == 0 and redis.call('EXISTS', KEYS[5]) == 0 then
  if not held then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return { 1, fence }
  end
  if held == ARGV[1] then
    return { 1, fence }
  end
  clock()
  enter()
  return { 0, fence }
end

clock()
local dead = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. now)
for _, id in ipairs(dead) do
  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[6], id)
end
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. now)
end

-- Enter the waiter, or find its tombstone: not in KEYS[4] (ZADD NX added
-- it) but in KEYS[5] (ZADD NX did not); then undo the first ZADD.
local queued = redis.call('ZADD', KEYS[4], 'NX', ARGV[4], ARGV[3]) == 0
local timed = redis.call('ZADD', KEYS[5], 'NX', expiry, ARGV[3]) == 0
local left = timed and not queued
if left then
  redis.call('ZREM', KEYS[4], ARGV[3])
else
  if timed then
    redis.call('ZADD', KEYS[5], expiry, ARGV[3])
  end
  record()
  cover()
end

if left then
  if held == ARGV[1] then
    return { 1, fence }
  end
  return { 0, fence }
end
if held == ARGV[1] then
  leave()
  return { 1, fence }
end
if held then
  return { 0, fence }
end
local turn
if fair then
  turn = redis.call('ZRANGE', KEYS[4], 0, 0)[1] == ARGV[3]
else
  turn = queued or redis.call('ZCARD', KEYS[4]) == 1
end
if turn and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  leave()
  return { 1, fence }
end
return { 0, fence }
