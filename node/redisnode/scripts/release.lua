-- release.lua: compare-and-delete. Deletes the lock key only if it still holds
-- our value. When the key does not hold our value and ARGV[2] > 0, it leaves a
-- release guard so that an acquire for this value that is still in flight
-- (sent earlier, on another connection, to a node that was slow or paused)
-- is refused by acquire.lua when it finally executes. After a delete, only
-- when the lock's waiting line exists (acquire_queued.lua) it names the
-- line's first live waiter to the lock's watchers: it publishes that
-- waiter's ID on the channel ARGV[3], so that one waiting call, in
-- whichever client, makes the next attempt. A lock nobody waits for costs
-- a GET, a DEL and an EXISTS. PUBLISH runs under redis.pcall: an ACL user
-- without channel permissions (Redis 7's default) still releases.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release-guard key for this value; it must hash to the same
--          Redis Cluster slot as KEYS[1]
-- KEYS[3]  the lock's waiting line (sorted set: waiter ID -> arrival in ms;
--          same hash slot)
-- KEYS[4]  the line's expiries (sorted set: waiter ID -> expiry in server
--          ms; same hash slot)
-- ARGV[1]  our value (the lock's token)
-- ARGV[2]  guard TTL in milliseconds; 0 leaves no guard
-- ARGV[3]  the lock's release channel (a pub/sub channel, not a key)
--
-- Commands used: GET, DEL, EXISTS, SET; when the line exists also TIME,
-- ZRANGEBYSCORE, ZREM, ZREMRANGEBYSCORE, ZRANGE and PUBLISH.
--
-- Returns:
--   1   the key held our value and was deleted
--   0   the key did not hold our value (absent, expired or someone else's)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if redis.call('EXISTS', KEYS[3]) == 0 then
    return 1 -- nobody waits
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. now)
  for _, id in ipairs(dead) do
    redis.call('ZREM', KEYS[3], id)
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. now)
  end
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if head then
    redis.pcall('PUBLISH', ARGV[3], head)
  end
  return 1
end
local guard = tonumber(ARGV[2])
if guard and guard > 0 then
  redis.call('SET', KEYS[2], '1', 'PX', guard)
end
return 0
