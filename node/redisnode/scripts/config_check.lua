-- config_check.lua: the configuration check (docs/reconfig.md). A Node made
-- with Node.SetConfig runs this chunk first, in the same script, in front
-- of acquire.lua, acquire_fenced.lua, acquire_queued.lua, acquire_hold.lua,
-- extend.lua, extend_hold.lua and raise_fence.lua, and sends one more KEYS
-- and two more ARGV entries after theirs. The releases do not check:
-- deleting a client's own key is always safe.
--
-- KEYS[#KEYS]    the master's configuration record (a hash, wire.ConfigKey):
--                its "cur" and the run_id of the server run that wrote
--                it, "run"
-- ARGV[#ARGV-1]  the client's record: "<epoch> <mode> <ms> <hash>", the mode
--                single or joint (its "cur")
-- ARGV[#ARGV]    test-only flags: "anyrun" trusts a record of any run
--                (knobs.NoConfigRun); "" in production
--
-- Commands used: HMGET, INFO (server).
--
-- A record written by another run of the server counts as none: a master
-- that restarted from an older snapshot, lost the AOF's last second, or
-- was replaced by a replica that missed the record's last write may hold
-- an older record than the one it acknowledged (`quorumlock reconfig
-- repair` writes the current one again). The run is the run_id alone: a
-- master's replication ID changes when a replica attaches.
--
-- Returns nothing and the script goes on when the master's "cur" equals
-- the client's record; otherwise an error reply, before anything changed:
--   QLCONFIG stale <master's cur>    the master is at a later epoch
--   QLCONFIG differs <master's cur>  the same epoch, another configuration
--                                    (or the master was removed)
--   QLCONFIG behind <master's cur>   the master is at an earlier epoch
--   QLCONFIG none                    the master has no record of this run
do
  local rec = redis.call('HMGET', KEYS[#KEYS], 'cur', 'run')
  local master = rec[1]
  local client = ARGV[#ARGV - 1]
  if master and not string.find(ARGV[#ARGV], 'anyrun', 1, true) then
    local s = redis.call('INFO', 'server')
    local a = string.find(s, 'run_id:', 1, true)
    if not a or rec[2] ~= string.sub(s, a + 7, a + 46) then
      master = false
    end
  end
  if master ~= client then
    if not master then
      return redis.error_reply('QLCONFIG none')
    end
    local me = tonumber(string.match(master, '^(%d+) '))
    local ce = tonumber(string.match(client, '^(%d+) '))
    if me == nil or ce == nil or me > ce then
      return redis.error_reply('QLCONFIG stale ' .. master)
    elseif me < ce then
      return redis.error_reply('QLCONFIG behind ' .. master)
    end
    return redis.error_reply('QLCONFIG differs ' .. master)
  end
end
