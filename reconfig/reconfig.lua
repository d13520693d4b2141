-- reconfig.lua: one master's part in a change of the masters (package
-- reconfig; docs/reconfig.md). Only the changer runs it; clients only read
-- the record (node/redisnode/scripts/config_check.lua).
--
-- KEYS[1]  the configuration record (a hash, wire.ConfigKey): "cur",
--          "members", "wait" (ms), "sealed" (the master's Unix ms) and
--          "run" (the run_id of the server run that wrote it; a record of
--          another run counts as none, here and in config_check.lua)
-- ARGV[1]  the operation: "install", "seal", "repair" or "read"
-- ARGV[2]  install, seal, repair: the new record's "cur" ("<epoch> <mode>
--          <ms> <hash>", the mode single or joint)
-- ARGV[3]  install, repair: its "members" text
-- ARGV[4]  install, repair: its "wait" in milliseconds
-- ARGV[5]  install: this master's part in the step: "fresh" (the step adds
--          it, or it is the first record, epoch 1), "member" (in the old
--          set and the new) or "removed" (in the old set only)
-- ARGV[6]  install: test flags: "nowait" skips the wait (knobs.NoReconfigWait)
-- ARGV[7]  install: the old record's "cur" ("" for the first record)
--
-- Commands used: HMGET, HSET, HDEL, TIME, INFO (server).
--
-- A removed master keeps the new epoch with the mode "removed" in "cur"
-- ("<epoch> removed <ms> <hash>", whatever the mode): no client's record
-- equals it, so the
-- check (config_check.lua) refuses every client's vote there, a current
-- one's as "differs", an older one's as "stale".
--
-- Returns:
--   install: "installed", or "already" when "cur" is ARGV[2] (or its
--            removed form); an error reply "QLRECONFIG <reason>" when
--            refused, changing nothing:
--              norecord        fresh: fine; member or removed: no record
--              notfrom <cur>   a member or removed master whose "cur" is not
--                              ARGV[7] (a step from a configuration it
--                              does not hold)
--              newer <cur>     fresh, but the master holds a record (of
--                              any run) of ARGV[2]'s epoch or later
--              member <cur>    fresh, but the master holds the old record:
--                              it is a master of the old set
--              rule <why>      the step from the master's configuration to
--                              the new one is not one step: not the next
--                              epoch, a quorum that is no majority, quorums
--                              that need not meet (no set of the old
--                              configuration and set of the new, joint
--                              mode's two each, with Q + Q' > |C u C'|), a
--                              key life or drift factor lowered, a record
--                              that is not the members', or a wait below
--                              the key life, its drift and a third
--              unsealed <cur>  the old step was never sealed here
--              wait <ms>       the old step was sealed less than its wait
--                              ago: <ms> left by the master's clock
--   seal:    "sealed <ms>" (now), or "already <ms>" (when it was sealed);
--            an error reply "QLRECONFIG notcurrent <cur or none>" when "cur"
--            is not ARGV[2]
--   repair:  the current record written again, sealed now, on a master
--            that has none of this run or one of an earlier epoch:
--            "repaired", or "already" when it holds ARGV[2]; an error reply
--            "QLRECONFIG newer <cur>" when it holds (of any run) a later
--            record or another record of the epoch
--   read:    {cur, members, wait, sealed, now, lost}: each false when
--            absent, now the master's Unix milliseconds, lost "1" when the
--            record was written by another run of the server
if redis.replicate_commands then
  redis.replicate_commands()
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function run()
  local s = redis.call('INFO', 'server')
  local a = string.find(s, 'run_id:', 1, true)
  if not a then
    return nil
  end
  return string.sub(s, a + 7, a + 46)
end
local me = run()
if not me then
  return redis.error_reply('ERR INFO has no run_id')
end
local function epoch(rec)
  return tonumber(string.match(rec, '^(%d+) '))
end
local op = ARGV[1]
local rec = redis.call('HMGET', KEYS[1], 'cur', 'members', 'wait', 'sealed', 'run')
local lost = rec[1] and rec[5] ~= me
if op == 'read' then
  return {rec[1], rec[2], rec[3], rec[4], tostring(now), lost and '1' or false}
end
local raw = rec[1]
local cur = raw
if lost then
  cur = nil -- another run's record: none
end
local new = ARGV[2]
local f = epoch(new)
-- A record written over none, or over an older one (a repair, a master the
-- step adds, the first record) never goes over a record of this epoch or a
-- later one, lost or not: a master that came back with a newer record under
-- another run keeps it until a repair of that epoch.
local function newer()
  if not raw or raw == new then
    return false
  end
  local e = epoch(raw)
  if e == nil then
    return true -- unreadable: never written over (a repair of it by hand)
  end
  -- A failed init (never sealed, never published) leaves an epoch-1
  -- record that a new first record may replace.
  if op == 'install' and f == 1 and e == 1 and ARGV[7] == '' and not rec[4] then
    return false
  end
  return e >= f
end
if op == 'repair' then
  if cur == new then
    return 'already'
  end
  if newer() then
    return redis.error_reply('QLRECONFIG newer ' .. raw)
  end
  -- The caller checked that a quorum of the configuration holds it
  -- (Changer.Repair); the master only keeps a newer record.
  redis.call('HSET', KEYS[1], 'cur', new, 'members', ARGV[3], 'wait', ARGV[4], 'run', me, 'sealed', tostring(now))
  return 'repaired'
end
if op == 'seal' then
  if cur ~= new then
    return redis.error_reply('QLRECONFIG notcurrent ' .. (cur or 'none'))
  end
  if rec[4] then
    return 'already ' .. rec[4]
  end
  redis.call('HSET', KEYS[1], 'sealed', tostring(now))
  return 'sealed ' .. now
end
if op ~= 'install' then
  return redis.error_reply('QLRECONFIG unknown operation ' .. op)
end

-- parse reads a "members" text (wire.Config.Text): its epoch, quorum,
-- longest key life, drift factor, and its sets: {masters (a set), n,
-- quorum}, the masters with quorum, then in joint mode the old masters
-- with oldquorum.
local function parse(text)
  local c = {}
  local sets = {master = {masters = {}, n = 0}, old = {masters = {}, n = 0}}
  for name, value in string.gmatch(text or '', '(%a+) ([^\n]+)') do
    local s = sets[name]
    if s then
      if not s.masters[value] then
        s.masters[value] = true
        s.n = s.n + 1
      end
    elseif name ~= 'mode' then
      c[name] = tonumber(value)
    end
  end
  sets.master.quorum, sets.old.quorum = c.quorum, c.oldquorum
  c.sets = {sets.master}
  if sets.old.n > 0 or c.oldquorum then
    c.sets[2] = sets.old
  end
  return c
end

-- meet reports whether every quorum of set a meets every quorum of set b.
local function meet(a, b)
  local union = a.n
  for m in pairs(b.masters) do
    if not a.masters[m] then
      union = union + 1
    end
  end
  return a.quorum + b.quorum > union
end

-- step_rule is the reason the step from the master's configuration (old
-- members text) to the new one breaks the rules, or nil: the next epoch,
-- quorums of the two sets that always share a master (Q + Q' > |C u C'|),
-- and a longest key life and drift factor not lowered (the wait after this
-- step is reckoned from the new ones and must cover keys of the old).
local function step_rule(old, new)
  local a, b = parse(old), parse(new)
  if not (a.epoch and b.epoch and a.maxkeyttl and b.maxkeyttl and a.drift and b.drift) then
    return 'unreadable members'
  end
  for _, c in ipairs({a, b}) do
    for _, s in ipairs(c.sets) do
      if not s.quorum or s.n == 0 then
        return 'unreadable members'
      end
    end
  end
  if b.epoch ~= a.epoch + 1 then
    return 'epoch ' .. a.epoch .. ' -> ' .. b.epoch
  end
  for _, s in ipairs(b.sets) do
    if 2 * s.quorum <= s.n or s.quorum > s.n then
      return 'quorum ' .. s.quorum .. ' of ' .. s.n .. ' masters is not a majority'
    end
  end
  local met = false
  for _, sa in ipairs(a.sets) do
    for _, sb in ipairs(b.sets) do
      met = met or meet(sa, sb)
    end
  end
  if not met then
    return 'quorums of the old and the new configuration need not meet'
  end
  if b.maxkeyttl < a.maxkeyttl or b.drift < a.drift then
    return 'longest key life or drift factor lowered'
  end
  if epoch(ARGV[2]) ~= b.epoch then
    return 'record of epoch ' .. epoch(ARGV[2]) .. ' for members of epoch ' .. b.epoch
  end
  -- the wait after this step (wire.Config.Wait), at least K + K*drift + K/3
  if tonumber(ARGV[4]) < math.floor(b.maxkeyttl * (1 + b.drift) + b.maxkeyttl / 3) then
    return 'wait ' .. ARGV[4] .. ' ms below the key life, its drift and a third'
  end
  return nil
end
local part = ARGV[5]
if part == 'removed' then
  new = string.gsub(new, '^(%d+) %a+ ', '%1 removed ', 1)
end
if cur == new then
  return 'already'
end
if part == 'fresh' then
  if newer() then
    return redis.error_reply('QLRECONFIG newer ' .. raw)
  end
  if raw == ARGV[7] then
    -- it holds the old record: a master of the old set, which takes a
    -- step only by the rules below
    return redis.error_reply('QLRECONFIG member ' .. raw)
  end
else
  if not cur then
    return redis.error_reply('QLRECONFIG norecord')
  end
  if cur ~= ARGV[7] then
    return redis.error_reply('QLRECONFIG notfrom ' .. cur)
  end
  local why = step_rule(rec[2], ARGV[3])
  if why then
    return redis.error_reply('QLRECONFIG rule ' .. why)
  end
  local sealed = rec[4]
  if not sealed then
    return redis.error_reply('QLRECONFIG unsealed ' .. cur)
  end
  local wait = tonumber(rec[3] or '0')
  local left = tonumber(sealed) + wait - now
  if left > 0 and not string.find(ARGV[6], 'nowait', 1, true) then
    return redis.error_reply('QLRECONFIG wait ' .. left)
  end
end
redis.call('HDEL', KEYS[1], 'sealed')
redis.call('HSET', KEYS[1], 'cur', new, 'members', ARGV[3], 'wait', ARGV[4], 'run', me)
return 'installed'
