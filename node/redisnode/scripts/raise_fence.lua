-- raise_fence.lua: compare-and-raise. Raises the lock's fencing counter to
-- ARGV[2] (never lowers it), only while the lock key still holds our value:
-- a later holder can take this node only after our key is gone, so it reads
-- the raised counter (acquire_fenced.lua). It rewrites the counter with a
-- time to live of ARGV[3] milliseconds whether or not it raised it, so that
-- a counter lives ARGV[3] after the last acquisition that wrote it back; an
-- ARGV[3] of 0 (or none) keeps it for ever. The epoch rule makes that safe
-- (docs/algorithm.md, "Fence counter cleanup"). It stamps the counter with
-- the server's run (INFO's run_id and master_replid), so that a counter brought back old from
-- the disk after a restart reads as lost (acquire_fenced.lua). GET, SET and
-- INFO only, so the minimal ACL of docs/nodes.md suffices.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter of the lock (same hash slot as KEYS[1]):
--          "<counter>:<run>" (see acquire_fenced.lua)
-- ARGV[1]  our value (the lock's token)
-- ARGV[2]  the fencing token to record (positive integer)
-- ARGV[3]  the counter's time to live in milliseconds (positive
--          integer), or 0 for none
-- ARGV[4]  the client's configuration epoch (docs/reconfig.md), 0 for a
--          client without a record: a positive epoch is stamped on the
--          counter, "<counter>:<run>:<epoch>"
--
-- Commands used: GET, INFO (server, replication), SET.
--
-- Returns:
--   1   the key held our value; the counter is now max(counter, ARGV[2])
--       stamped with this run (whichever run wrote it before),
--       rewritten so that it expires ARGV[3] ms from now (never, for 0)
--   0   the key did not hold our value; the counter is unchanged
-- A counter key that holds no counter (or a number of 2^53 or more, which
-- Lua's numbers cannot count on from) fails the script with an error reply.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end

-- run is the server's run: its run_id and its replication ID. A master that
-- is demoted, resynced from another and promoted again keeps its run_id,
-- not its replication ID (a promotion makes a new one), and its data may
-- then be older than what it wrote. nil when INFO lacks either.
local function run()
  local s = redis.call('INFO', 'server')
  local r = redis.call('INFO', 'replication')
  local a = string.find(s, 'run_id:', 1, true)
  local b = string.find(r, 'master_replid:', 1, true)
  if not a or not b then
    return nil
  end
  return string.sub(s, a + 7, a + 46) .. string.sub(r, b + 14, b + 53)
end

local s = redis.call('GET', KEYS[2])
local counter = 0
if s then
  counter = tonumber(string.match(s, '^(%d+):%x+:%d+$') or string.match(s, '^(%d+):%x+$') or s)
  if not counter or counter ~= counter or counter >= 9007199254740992 or counter <= -9007199254740992 then
    return redis.error_reply('ERR the fencing counter ' .. KEYS[2] .. ' holds no counter')
  end
end
local token = tonumber(ARGV[2])
if counter > token then
  token = counter
end
local id = run()
if not id then
  return redis.error_reply('ERR INFO has no run_id or master_replid')
end
local value = string.format('%d:%s', token, id)
local epoch = tonumber(ARGV[4])
if epoch > 0 then
  value = string.format('%s:%d', value, epoch)
end
local keep = tonumber(ARGV[3])
if keep > 0 then
  redis.call('SET', KEYS[2], value, 'PX', keep)
else
  redis.call('SET', KEYS[2], value)
end
return 1
