-- config_check.lua: the configuration check (docs/reconfig.md). A Node made
-- with Node.WithConfig runs this chunk first, in the same script, in front
-- of acquire.lua, acquire_fenced.lua, acquire_queued.lua, acquire_hold.lua,
-- extend.lua, extend_hold.lua and raise_fence.lua, and sends one more KEYS
-- and one more ARGV entry after theirs. The releases do not check: deleting
-- a client's own key is always safe.
--
-- KEYS[#KEYS]  the master's configuration record (a hash, wire.ConfigKey)
-- ARGV[#ARGV]  the client's record: "<epoch> single <ms> <hash>" (its "cur")
--
-- Commands used: HGET.
--
-- Returns nothing and the script goes on when the master's "cur" equals
-- the client's record; otherwise an error reply, before anything changed:
--   QLCONFIG stale <master's cur>    the master is at a later epoch
--   QLCONFIG differs <master's cur>  the same epoch, another configuration
--   QLCONFIG behind <master's cur>   the master is at an earlier epoch
--   QLCONFIG none                    the master has no record
do
  local master = redis.call('HGET', KEYS[#KEYS], 'cur')
  local client = ARGV[#ARGV]
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
