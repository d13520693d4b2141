-- leave_queue.lua: a waiter gives up (redlock.QueueNode.LeaveQueue). It
-- drops the waiters whose entries expired and takes this one out of the
-- lock's waiting line, leaving its tombstone: its entry in the expiries is
-- set to expire ARGV[3] ms from now, so that a later acquire_queued.lua for
-- it (a copy still on the network) does not enter it again (see there).
-- The tombstone is written whether or not the waiter was queued: a leave
-- that overtakes the waiter's first acquire keeps it out too. Both queue
-- keys expire with their last entry.
--
-- When the key holds the value a release handed this waiter (the grant
-- record KEYS[5] names ARGV[1] and the key's value; release.lua), the key
-- is deleted: a call that gave up leaves no key behind. When it was
-- deleted so, or when the waiter was the line's first live one and the key
-- is free, the key is handed to the line's new first live waiter as
-- release.lua hands it (set to its recorded value and TTL, the record
-- deleted, a grant record) and that waiter is published (with the value
-- when it was handed the key, as release.lua publishes) on the channel ARGV[2]
-- (followed by ":" and the waiter's group when its ID has one), as
-- release.lua does (under redis.pcall, so that an ACL user without channel
-- permissions still leaves); when nobody is left in line and the waiter
-- was the first, '' is published instead.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's waiting line (sorted set: waiter ID -> arrival in ms;
--          same Redis Cluster hash slot as KEYS[1])
-- KEYS[3]  the line's expiries (sorted set: waiter ID -> expiry in server
--          ms; same hash slot); also holds the tombstones
-- KEYS[4]  the line's values (hash: waiter ID -> "<TTL ms> <value>"; same
--          hash slot)
-- KEYS[5]  the lock's grant record (string: waiter ID, newline, value; same
--          hash slot)
-- ARGV[1]  the waiter's ID
-- ARGV[2]  the lock's release channel (a pub/sub channel, not a key)
-- ARGV[3]  how long the tombstone lives, in milliseconds (positive): the
--          waiter's TTL
-- ARGV[4]  optional, test-only flags, space-separated: "notomb" leaves no
--          tombstone (the waiter is only taken out of both keys;
--          knobs.NoLeaveTombstone); "nogrant" hands nothing over, it only
--          names the next waiter (knobs.NoGrant); "norelease" leaves a
--          handed key in place (knobs.NoGrantLeaveRelease)
--
-- Commands used: TIME, ZRANGEBYSCORE, ZREM, ZREMRANGEBYSCORE, ZRANGE, ZADD,
-- PEXPIRE, EXISTS, GET, SET, DEL, HGET, HDEL, PUBLISH.
--
-- Returns:
--   1   the waiter was in the queue and left it, or its handed key was
--       released
--   0   neither (expired, acquired, left, or never queued)
local flags = ' ' .. (ARGV[4] or '') .. ' '
local function flag(f)
  return string.find(flags, ' ' .. f .. ' ', 1, true) ~= nil
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now)
for _, id in ipairs(dead) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[4], id)
end
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. now)
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] == ARGV[1]
local left = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if not flag('notomb') then
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[1])
elseif left == 1 then
  redis.call('ZREM', KEYS[3], ARGV[1])
end
local top = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if top[2] then
  local ms = string.format('%d', math.max(tonumber(top[2]) - now, 1)) -- relative: see acquire_queued.lua
  redis.call('PEXPIRE', KEYS[2], ms)
  redis.call('PEXPIRE', KEYS[3], ms)
  redis.call('PEXPIRE', KEYS[4], ms)
end

-- The key a release handed this waiter: released.
local released = false
if not flag('norelease') then
  local held = redis.pcall('GET', KEYS[1]) -- a shared lock's holds: no string
  if type(held) == 'string' and redis.call('GET', KEYS[5]) == ARGV[1] .. '\n' .. held then
    redis.call('DEL', KEYS[1], KEYS[5])
    released = true
  end
end
if left == 0 and not released then
  return 0
end
if not released and not (first and redis.call('EXISTS', KEYS[1]) == 0) then
  return 1
end

-- The key is free: hand it to the line's first live waiter, as release.lua.
local next = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
local note = next
if next and not flag('nogrant') then
  local rec = redis.call('HGET', KEYS[4], next)
  local ms, v
  if rec then
    ms, v = string.match(rec, '^(%d+) (.*)$')
  end
  if v then
    note = next .. '\n' .. v
    redis.call('SET', KEYS[1], v, 'PX', ms)
    redis.call('SET', KEYS[5], note, 'PX', ms)
    redis.call('HDEL', KEYS[4], next)
  end
end
if not next and released then
  return 1 -- a release nobody waits for is not reported
end
next = next or ''
note = note or ''
local g = string.match(next, '^([^.]+)%.')
if g then
  redis.pcall('PUBLISH', ARGV[2] .. ':' .. g, note) -- its group's channel, as release.lua's
else
  redis.pcall('PUBLISH', ARGV[2], note)
end
return 1
