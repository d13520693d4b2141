-- extend.lua: compare-and-pexpire. Resets the TTL of the lock key only if it
-- still holds our value; it never creates the key (an expired lock is not
-- resurrected).
--
-- KEYS[1]  the lock key
-- ARGV[1]  our value (the lock's token)
-- ARGV[2]  new TTL in milliseconds (positive integer)
--
-- Commands used: GET, PEXPIRE.
--
-- Returns:
--   1   the TTL was reset
--   0   the key did not hold our value (absent, expired or someone else's)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
