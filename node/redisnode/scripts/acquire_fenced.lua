-- acquire_fenced.lua: acquire.lua that also reads the lock's fencing counter
-- in the same atomic step, for fencing tokens that stay monotonic across
-- quorums (see raise_fence.lua and docs/algorithm.md, "Fencing tokens").
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release-guard key for this value (same hash slot as KEYS[1])
-- KEYS[3]  the fencing counter of the lock (same hash slot; no TTL)
-- ARGV[1]  the value to store: the lock's token
-- ARGV[2]  TTL in milliseconds (positive integer)
--
-- Commands used: EXISTS, SET, GET.
--
-- Returns: a two-element array
--   [1]  1 acquired (or already held ARGV[1]), 0 held by another value,
--        -1 refused by a release guard (as acquire.lua)
--   [2]  the fencing counter, 0 when the lock has none yet
local fence = tonumber(redis.call('GET', KEYS[3]) or '0')
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
