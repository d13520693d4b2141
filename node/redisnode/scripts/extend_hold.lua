-- extend_hold.lua: compare-and-pexpire for one hold of a shared lock
-- (acquire_hold.lua). Resets the hold's expiry only if it is still live; it
-- never creates it, and never touches another hold.
--
-- KEYS[1]  the lock's holds (sorted set)
-- ARGV[1]  the hold's group
-- ARGV[2]  the hold's id
-- ARGV[3]  new TTL in milliseconds (positive integer)
--
-- Commands used: TIME, ZREMRANGEBYSCORE, ZSCORE, ZADD, ZRANGE, PEXPIREAT.
--
-- Returns:
--   1   the hold's expiry was reset (and the key's covers it)
--   0   the hold was not there (released, expired, or never acquired)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local member = ARGV[1] .. '\n' .. ARGV[2]
if not redis.call('ZSCORE', KEYS[1], member) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), member)
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], string.format('%d', tonumber(top[2])))
return 1
