-- set.lua: a fenced SET. Writes the value only if the token is at least
-- the resource's high-water mark, and raises the mark to the token, in one
-- step (a script runs atomically). An equal token is accepted: the same
-- lease writing again. The mark never expires and is never lowered.
--
-- KEYS[1]  the high-water mark: a decimal token, as Go's strconv writes it
--          (same hash slot as KEYS[2]: "{key}:fence-mark", or
--          key .. ":fence-mark" when key has a hash tag)
-- KEYS[2]  the key to write (a string key)
-- ARGV[1]  the token: a decimal integer from 1 to 2^63-1, no leading zero
-- ARGV[2]  the value
--
-- Commands used: GET, SET.
--
-- Returns:
--   {1}         written: KEYS[2] holds ARGV[2], the mark is ARGV[1]
--   {0, mark}   refused: the mark (a string) is above ARGV[1]; nothing
--               written
-- A mark that is not a decimal token, or an ARGV[1] that is not one, fails
-- the script with an error reply.
--
-- Tokens are compared as decimal strings (longer is larger, then byte
-- order): exact for every int64, where Lua's numbers (doubles) are exact
-- only below 2^53.
local function token(s)
  return type(s) == 'string' and #s <= 19 and string.find(s, '^[1-9][0-9]*$') ~= nil
end
if not token(ARGV[1]) then
  return redis.error_reply('fence: invalid token ' .. tostring(ARGV[1]))
end
local mark = redis.call('GET', KEYS[1])
if mark then
  if not token(mark) then
    return redis.error_reply('fence: the mark ' .. KEYS[1] .. ' holds no token')
  end
  if #mark > #ARGV[1] or (#mark == #ARGV[1] and mark > ARGV[1]) then
    return {0, mark}
  end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return {1}
