-- acquire.lua: take a lock key if it is free (SET NX PX), unless a release for
-- this very value already ran on this node (a release guard exists). It
-- ignores the lock's waiting line (acquire_queued.lua): a TryLock takes a
-- free key whoever waits.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release-guard key for this value; it must hash to the same
--          Redis Cluster slot as KEYS[1] (see release.lua)
-- ARGV[1]  the value to store: the lock's token
-- ARGV[2]  TTL in milliseconds (positive integer)
--
-- Commands used: EXISTS, SET, GET.
--
-- Returns:
--   1   the key was set to ARGV[1] with a TTL of ARGV[2] ms, or already held
--       ARGV[1] (a retried copy of the same acquire; its TTL is unchanged)
--   0   the key is held by another value
--  -1   refused: a release for ARGV[1] reached this node first, so this
--       acquire is a late straggler and must not create an orphan key
if redis.call('EXISTS', KEYS[2]) == 1 then
  return -1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return 1
end
return 0
