-- raise_fence.lua: compare-and-raise. Raises the lock's fencing counter to
-- ARGV[2] (never lowers it), only while the lock key still holds our value:
-- a later holder can take this node only after our key is gone, so it reads
-- the raised counter (acquire_fenced.lua).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of the lock (same hash slot as KEYS[1]; no TTL)
-- ARGV[1]  our value (the lock's token)
-- ARGV[2]  the fencing token to record (positive integer)
--
-- Commands used: GET, SET.
--
-- Returns:
--   1   the key held our value; the counter is now at least ARGV[2]
--   0   the key did not hold our value; the counter is unchanged
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local token = tonumber(ARGV[2])
if token > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
