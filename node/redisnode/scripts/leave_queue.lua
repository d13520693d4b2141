-- leave_queue.lua: a waiter gives up (redlock.QueueNode.LeaveQueue). It
-- drops the waiters whose entries expired and takes this one out of the
-- lock's fair queue, leaving its tombstone: its entry in the expiries is
-- set to expire ARGV[3] ms from now, so that a later acquire_queued.lua for
-- it (a copy still on the network) does not enter it again (see there).
-- The tombstone is written whether or not the waiter was queued: a leave
-- that overtakes the waiter's first acquire keeps it out too. Both queue
-- keys expire with their last entry. When the waiter was the first live
-- one and the lock key is absent, the next waiter may now take the lock:
-- it publishes the new first live waiter, or '' when there is none, on the
-- channel ARGV[2] (followed by ":" and the waiter's group when its ID has
-- one), as release.lua does (under redis.pcall, so that an ACL
-- user without channel permissions still leaves).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fair queue (sorted set: waiter ID -> arrival in ms;
--          same Redis Cluster hash slot as KEYS[1])
-- KEYS[3]  the queue's expiries (sorted set: waiter ID -> expiry in server
--          ms; same hash slot); also holds the tombstones
-- ARGV[1]  the waiter's ID
-- ARGV[2]  the lock's release channel (a pub/sub channel, not a key)
-- ARGV[3]  how long the tombstone lives, in milliseconds (positive): the
--          waiter's TTL
-- ARGV[4]  optional, test-only: "notomb" leaves no tombstone (the waiter
--          is only taken out of both keys; knobs.NoLeaveTombstone)
--
-- Commands used: TIME, ZRANGEBYSCORE, ZREM, ZREMRANGEBYSCORE, ZRANGE, ZADD,
-- PEXPIRE, EXISTS, PUBLISH.
--
-- Returns:
--   1   the waiter was in the queue and left it
--   0   it was not there (expired, acquired, left, or never queued)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now)
for _, id in ipairs(dead) do
  redis.call('ZREM', KEYS[2], id)
end
if #dead > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. now)
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] == ARGV[1]
local left = redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[4] ~= 'notomb' then
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[1])
elseif left == 1 then
  redis.call('ZREM', KEYS[3], ARGV[1])
end
local top = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if top[2] then
  local ms = string.format('%d', math.max(tonumber(top[2]) - now, 1)) -- relative: see acquire_queued.lua
  redis.call('PEXPIRE', KEYS[2], ms)
  redis.call('PEXPIRE', KEYS[3], ms)
end
if left == 0 then
  return 0
end
if first and redis.call('EXISTS', KEYS[1]) == 0 then
  local next = redis.call('ZRANGE', KEYS[2], 0, 0)[1] or ''
  local g = string.match(next, '^([^.]+)%.')
  if g then
    redis.pcall('PUBLISH', ARGV[2] .. ':' .. g, next) -- its group's channel, as release.lua's
  else
    redis.pcall('PUBLISH', ARGV[2], next)
  end
end
return 1
