-- acquire_hold.lua: add one hold to a shared lock (reentrant, read-write,
-- semaphore; docs/shapes.md). A lock is a sorted set of holds, member
-- "<group>\n<id>", score = the hold's expiry in server milliseconds; holds of
-- one group share the lock, holds of different groups exclude each other.
--
-- KEYS[1]  the lock's holds (sorted set)
-- KEYS[2]  the lock's waiting writers (sorted set, member = waiter, score =
--          expiry in ms); same Redis Cluster hash slot as KEYS[1]
-- KEYS[3]  the release-guard key of this hold (same hash slot; see
--          release_hold.lua)
-- ARGV[1]  the hold's group (may contain any byte)
-- ARGV[2]  the hold's id (unique per acquisition; no newline)
-- ARGV[3]  TTL in milliseconds (positive integer)
-- ARGV[4]  the most live holds the lock may have, 0 for no limit
-- ARGV[5]  a waiting writer's name, or '' (none): recorded when this acquire
--          is refused (except by a guard), removed when it succeeds
-- ARGV[6]  how long a waiting mark lives, in milliseconds
-- ARGV[7]  '1' to be refused while any waiting mark is live (a reader:
--          redlock sets it for every read hold, so a writer that leaves
--          marks gets preference over every reader), else '0'
--
-- Commands used: TIME, ZREMRANGEBYSCORE, ZSCORE, ZRANGE, ZCARD, ZADD, ZREM,
-- EXISTS, PEXPIREAT.
--
-- Expired holds and marks are pruned first. Each key's expiry is set to its
-- latest member's, so nothing is left behind when the holders vanish.
--
-- Returns:
--   n > 0  acquired (or the hold was already there: a retried copy of the
--          same acquire, its expiry unchanged); n live holds of ARGV[1]
--   0      refused: another group holds the lock, the limit is reached, a
--          writer is waiting (ARGV[7] = '1')
--  -1      refused: a release of this hold reached this node first, so this
--          acquire is a late straggler and must not leave an orphan hold
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local prefix = ARGV[1] .. '\n'
local member = prefix .. ARGV[2]

-- The live holds of our group, or nil when another group holds one.
local function ours()
  local n = 0
  for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if string.sub(m, 1, #prefix) ~= prefix or string.find(m, '\n', #prefix + 1, true) then
      return nil
    end
    n = n + 1
  end
  return n
end

-- Sets key's expiry to its latest member's.
local function cover(key)
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[2] then
    redis.call('PEXPIREAT', key, string.format('%d', tonumber(top[2])))
  end
end

if redis.call('ZSCORE', KEYS[1], member) then
  return ours() or 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  return -1
end
local n = ours()
local limit = tonumber(ARGV[4])
if not n or (limit > 0 and redis.call('ZCARD', KEYS[1]) >= limit)
    or (ARGV[7] == '1' and redis.call('ZCARD', KEYS[2]) > 0) then
  if ARGV[5] ~= '' then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[5])
    cover(KEYS[2])
  end
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), member)
cover(KEYS[1])
if ARGV[5] ~= '' and redis.call('ZREM', KEYS[2], ARGV[5]) == 1 then
  cover(KEYS[2])
end
return n + 1
