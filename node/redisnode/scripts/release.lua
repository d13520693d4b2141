-- release.lua: compare-and-delete. Deletes the lock key only if it still holds
-- our value. When the key does not hold our value and ARGV[2] > 0, it leaves a
-- release guard so that an acquire for this value that is still in flight
-- (sent earlier, on another connection, to a node that was slow or paused)
-- is refused by acquire.lua when it finally executes. After a delete, only
-- when the lock's waiting line exists (acquire_queued.lua) it hands the
-- key to the line's first live waiter (docs/handoff.md): the key is set to
-- the value recorded in that waiter's entry, for the TTL recorded with it,
-- and the record is deleted (the waiter keeps its place until it takes
-- the key over, so a waiter slow to come loses nothing to those behind
-- it); the grant record KEYS[6]
-- (waiter ID, newline, value) lives as long as the key, so that the
-- waiter's next acquire takes the key over (acquire_queued.lua) and its
-- LeaveQueue releases it (leave_queue.lua). It names that waiter to the
-- lock's watchers: it publishes that waiter's ID, followed by a newline and
-- the value when the key was handed to it (the grant record: its call may
-- hold the lock with it), on the channel ARGV[3], or ARGV[3] .. ":" .. its
-- group when the ID has one (channel() below), so that one waiting call, in
-- whichever client, makes the next attempt or holds, and only its client
-- hears of it. When the grant record names our value (its waiter held the
-- lock with the hand-overs it heard and now releases), that waiter leaves
-- the line first, without a tombstone (as a waiter that acquires: no later
-- call of its ID can come; acquire_queued.lua), and the record is deleted:
-- it is not named again. A lock nobody waits for costs
-- a GET, a DEL and an EXISTS. PUBLISH runs under redis.pcall: an ACL user
-- without channel permissions (Redis 7's default) still releases.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release-guard key for this value; it must hash to the same
--          Redis Cluster slot as KEYS[1]
-- KEYS[3]  the lock's waiting line (sorted set: waiter ID -> arrival in ms;
--          same hash slot)
-- KEYS[4]  the line's expiries (sorted set: waiter ID -> expiry in server
--          ms; same hash slot)
-- KEYS[5]  the line's values (hash: waiter ID -> "<TTL ms> <value>"; same
--          hash slot)
-- KEYS[6]  the lock's grant record (string; same hash slot)
-- ARGV[1]  our value (the lock's token)
-- ARGV[2]  guard TTL in milliseconds; 0 leaves no guard
-- ARGV[3]  the lock's release channel (a pub/sub channel, not a key)
-- ARGV[4]  optional, test-only flags, space-separated: "nogrant" only
--          names the waiter, handing nothing over (knobs.NoGrant);
--          "nohold" leaves the waiter our value was handed to in the line
--          (knobs.NoGrantHoldRelease)
--
-- Commands used: GET, DEL, EXISTS, SET; when the line exists also TIME,
-- ZRANGEBYSCORE, ZREM, ZREMRANGEBYSCORE, ZRANGE, HGET, HDEL and PUBLISH.
-- (A first waiter without a record, handed the key before, is named and
-- handed nothing: its own release of a handed key never hands it back.)
--
-- Returns:
--   1   the key held our value and was deleted
--   0   the key did not hold our value (absent, expired or someone else's)
-- The channel a notification naming waiter id goes to: the lock's release
-- channel ARGV[3], followed by ":" and the waiter's group when its ID has
-- one (the part before its first "."), so that only the client whose
-- waiters they are hears of them.
local flags = ' ' .. (ARGV[4] or '') .. ' '
local function flag(f)
  return string.find(flags, ' ' .. f .. ' ', 1, true) ~= nil
end

local function channel(id)
  local g = string.match(id, '^([^.]+)%.')
  if g then
    return ARGV[3] .. ':' .. g
  end
  return ARGV[3]
end

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if redis.call('EXISTS', KEYS[3]) == 0 then
    return 1 -- nobody waits
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. now)
  for _, id in ipairs(dead) do
    redis.call('ZREM', KEYS[3], id)
    redis.call('HDEL', KEYS[5], id)
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. now)
  end
  -- Our value was handed to a waiter: it leaves the line.
  local g = not flag('nohold') and redis.call('GET', KEYS[6])
  if g then
    local id, gv = string.match(g, '^([^\n]*)\n(.*)$')
    if gv == ARGV[1] then
      redis.call('ZREM', KEYS[3], id)
      redis.call('ZREM', KEYS[4], id)
      redis.call('HDEL', KEYS[5], id)
      redis.call('DEL', KEYS[6])
    end
  end
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not head then
    return 1
  end
  local rec = not flag('nogrant') and redis.call('HGET', KEYS[5], head)
  local ms, v
  if rec then
    ms, v = string.match(rec, '^(%d+) (.*)$')
  end
  local note = head
  if v then
    note = head .. '\n' .. v
    redis.call('SET', KEYS[1], v, 'PX', ms)
    redis.call('SET', KEYS[6], note, 'PX', ms)
    redis.call('HDEL', KEYS[5], head)
  end
  redis.pcall('PUBLISH', channel(head), note)
  return 1
end
local guard = tonumber(ARGV[2])
if guard and guard > 0 then
  redis.call('SET', KEYS[2], '1', 'PX', guard)
end
return 0
