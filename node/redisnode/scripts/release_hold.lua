-- release_hold.lua: compare-and-delete for one hold of a shared lock
-- (acquire_hold.lua). Removes only this hold; the key goes with its last
-- hold. When the hold is not there and ARGV[3] > 0, it leaves a release
-- guard so that an acquire of this hold that is still in flight (sent
-- earlier to a node that was slow or paused) is refused when it executes.
-- After a removal it tells the lock's watchers as release.lua does: it
-- publishes the first live waiter of the lock's fair queue, or '', on the
-- channel ARGV[4] (under redis.pcall, so that an ACL user without channel
-- permissions still releases).
--
-- KEYS[1]  the lock's holds (sorted set)
-- KEYS[2]  the release-guard key of this hold (same Redis Cluster hash slot)
-- KEYS[3]  the lock's fair queue (sorted set: waiter ID -> arrival in ms;
--          same hash slot)
-- KEYS[4]  the queue's expiries (sorted set: waiter ID -> expiry in server
--          ms; same hash slot)
-- ARGV[1]  the hold's group
-- ARGV[2]  the hold's id
-- ARGV[3]  guard TTL in milliseconds; 0 leaves no guard
-- ARGV[4]  the lock's release channel (a pub/sub channel, not a key)
--
-- Commands used: TIME, ZREMRANGEBYSCORE, ZREM, ZRANGE, PEXPIREAT, SET,
-- EXISTS, ZRANGEBYSCORE, PUBLISH.
--
-- Returns:
--   1   the hold was live and was removed
--   0   the hold was not there (released, expired, or never acquired)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZREM', KEYS[1], ARGV[1] .. '\n' .. ARGV[2]) == 1 then
  local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if top[2] then
    redis.call('PEXPIREAT', KEYS[1], string.format('%d', tonumber(top[2])))
  end
  local head = ''
  if redis.call('EXISTS', KEYS[3]) == 1 then
    local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. now)
    for _, id in ipairs(dead) do
      redis.call('ZREM', KEYS[3], id)
    end
    if #dead > 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. now)
    end
    head = redis.call('ZRANGE', KEYS[3], 0, 0)[1] or ''
  end
  redis.pcall('PUBLISH', ARGV[4], head)
  return 1
end
local guard = tonumber(ARGV[3])
if guard and guard > 0 then
  redis.call('SET', KEYS[2], '1', 'PX', guard)
end
return 0
