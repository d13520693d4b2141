-- inspect.lua: read the current holder of a lock key and its remaining TTL in
-- one atomic step.
--
-- KEYS[1]  the lock key
--
-- Returns a two-element array:
--   [1]  the stored value, or false when the key does not exist
--   [2]  PTTL in milliseconds (-2: no key, -1: key without TTL)
return { redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]) }
