-- release.lua: compare-and-delete. Deletes the lock key only if it still holds
-- our value. When the key does not hold our value and ARGV[2] > 0, it leaves a
-- release guard so that an acquire for this value that is still in flight
-- (sent earlier, on another connection, to a node that was slow or paused)
-- is refused by acquire.lua when it finally executes.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release-guard key for this value; it must hash to the same
--          Redis Cluster slot as KEYS[1]
-- ARGV[1]  our value (the lock's token)
-- ARGV[2]  guard TTL in milliseconds; 0 leaves no guard
--
-- Commands used: GET, DEL, SET.
--
-- Returns:
--   1   the key held our value and was deleted
--   0   the key did not hold our value (absent, expired or someone else's)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
local guard = tonumber(ARGV[2])
if guard and guard > 0 then
  redis.call('SET', KEYS[2], '1', 'PX', guard)
end
return 0
