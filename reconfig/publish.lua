-- publish.lua: publish a configuration at a key that clients read
-- (reconfig.KeySource), never going back (reconfig.WriteKey).
--
-- KEYS[1]  the key: the configuration's text (wire.Config.Text, as
--          WriteFile writes the file)
-- ARGV[1]  the new configuration's text
-- ARGV[2]  its epoch
--
-- Commands used: GET, SET.
--
-- Returns "published", or "already" when the key holds that text; an
-- error reply, changing nothing:
--   QLPUBLISH newer <epoch>   the key holds a later epoch, or another
--                             configuration of this epoch
do
  local cur = redis.call('GET', KEYS[1])
  if cur == ARGV[1] then
    return 'already'
  end
  if cur then
    -- a value no client can read as a configuration (no epoch line, or
    -- one past the epochs' bound, 2^53) is written over
    local e = tonumber(string.match(cur, '^epoch (%d+)\n') or '0')
    if e >= 9007199254740992 then
      e = 0
    end
    if e >= tonumber(ARGV[2]) then
      return redis.error_reply('QLPUBLISH newer ' .. e)
    end
  end
  redis.call('SET', KEYS[1], ARGV[1])
  return 'published'
end
