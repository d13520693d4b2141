-- raise_fence.lua: compare-and-raise. Raises the lock's fencing counter to
-- ARGV[2] (never lowers it), only while the lock key still holds our value:
-- a later holder can take this node only after our key is gone, so it reads
-- the raised counter (acquire_fenced.lua). It also sets the counter's time
-- to live to ARGV[3] milliseconds, whether or not it raised it, so that a
-- counter lives ARGV[3] after the last acquisition that wrote it back; an
-- ARGV[3] of 0 (or none) keeps it for ever. The epoch rule makes that safe
-- (docs/algorithm.md, "Fence counter cleanup").
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of the lock (same hash slot as KEYS[1])
-- ARGV[1]  our value (the lock's token)
-- ARGV[2]  the fencing token to record (positive integer)
-- ARGV[3]  optional: the counter's time to live in milliseconds (positive
--          integer), or 0 for none
--
-- Commands used: GET, SET, PEXPIRE, PERSIST.
--
-- Returns:
--   1   the key held our value; the counter is now at least ARGV[2] and
--       expires ARGV[3] ms from now (never, for 0)
--   0   the key did not hold our value; the counter is unchanged
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local token = tonumber(ARGV[2])
if token > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], ARGV[2])
end
local keep = tonumber(ARGV[3] or '0')
if keep > 0 then
  redis.call('PEXPIRE', KEYS[2], keep)
else
  redis.call('PERSIST', KEYS[2])
end
return 1
