-- reconfig.lua: one master's part in a change of the masters (package
-- reconfig; docs/reconfig.md). Only the changer runs it; clients only read
-- the record (node/redisnode/scripts/config_check.lua).
--
-- KEYS[1]  the configuration record (a hash, wire.ConfigKey): "cur",
--          "members", "wait" (ms) and "sealed" (the master's Unix ms)
-- ARGV[1]  the operation: "install", "seal" or "read"
-- ARGV[2]  install, seal: the new record's "cur" ("<epoch> single <ms> <hash>")
-- ARGV[3]  install: its "members" text
-- ARGV[4]  install: its "wait" in milliseconds
-- ARGV[5]  install: "fresh" when the step adds this master (or it is the
--          first record, epoch 1): it may take the record over none, or
--          over a record of an earlier epoch (a master removed before)
-- ARGV[6]  test flags: "nowait" skips the wait (knobs.NoReconfigWait)
--
-- Commands used: HGET, HMGET, HSET, HDEL, TIME.
--
-- Returns:
--   install: "installed", or "already" when "cur" is ARGV[2]; an error reply
--            "QLRECONFIG <reason>" when refused, changing nothing:
--              norecord             no record, and the step does not add this master
--              epoch <e> -> <f>     the master's epoch e is not the one before f
--              differs <cur>        another configuration under epoch f
--              unsealed <cur>       the master's step e was never sealed
--              wait <ms>            the master's step e was sealed less than
--                                   its wait ago: <ms> left by its clock
--   seal:    "sealed <ms>" (now), or "already <ms>" (when it was sealed);
--            an error reply "QLRECONFIG notcurrent <cur or none>" when "cur"
--            is not ARGV[2]
--   read:    {cur, members, wait, sealed, now}: each false when absent, now
--            the master's Unix milliseconds
if redis.replicate_commands then
  redis.replicate_commands()
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]
if op == 'read' then
  local r = redis.call('HMGET', KEYS[1], 'cur', 'members', 'wait', 'sealed')
  return {r[1], r[2], r[3], r[4], tostring(now)}
end
local cur = redis.call('HGET', KEYS[1], 'cur')
local new = ARGV[2]
if op == 'seal' then
  if cur ~= new then
    return redis.error_reply('QLRECONFIG notcurrent ' .. (cur or 'none'))
  end
  local sealed = redis.call('HGET', KEYS[1], 'sealed')
  if sealed then
    return 'already ' .. sealed
  end
  redis.call('HSET', KEYS[1], 'sealed', tostring(now))
  return 'sealed ' .. now
end
if op ~= 'install' then
  return redis.error_reply('QLRECONFIG unknown operation ' .. op)
end
if cur == new then
  return 'already'
end
local f = tonumber(string.match(new, '^(%d+) '))
local fresh = ARGV[5] == 'fresh'
if not cur then
  if not fresh then
    return redis.error_reply('QLRECONFIG norecord')
  end
else
  local e = tonumber(string.match(cur, '^(%d+) '))
  if e == f then
    return redis.error_reply('QLRECONFIG differs ' .. cur)
  end
  if not (fresh and e < f) then
    if e + 1 ~= f then
      return redis.error_reply('QLRECONFIG epoch ' .. e .. ' -> ' .. f)
    end
    local sealed = redis.call('HGET', KEYS[1], 'sealed')
    if not sealed then
      return redis.error_reply('QLRECONFIG unsealed ' .. cur)
    end
    local wait = tonumber(redis.call('HGET', KEYS[1], 'wait') or '0')
    local left = tonumber(sealed) + wait - now
    if left > 0 and not string.find(ARGV[6], 'nowait', 1, true) then
      return redis.error_reply('QLRECONFIG wait ' .. left)
    end
  end
end
redis.call('HDEL', KEYS[1], 'sealed')
redis.call('HSET', KEYS[1], 'cur', new, 'members', ARGV[3], 'wait', ARGV[4])
return 'installed'
