-- acquire_fenced.lua: acquire.lua that also reads the lock's fencing counter
-- in the same atomic step (as written by this run of the server), for fencing tokens that stay monotonic across
-- quorums (see raise_fence.lua and docs/algorithm.md, "Fencing tokens").
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release-guard key for this value (same hash slot as KEYS[1])
-- KEYS[3]  the fencing counter of the lock (same hash slot):
--          "<counter>:<run_id>", the server run that wrote it
--          (raise_fence.lua; internal/fencecounter)
-- ARGV[1]  the value to store: the lock's token
-- ARGV[2]  TTL in milliseconds (positive integer)
-- ARGV[3]  optional, test-only: "anyrun" reads a counter of any run
--          (knobs.NoRunStamp)
--
-- Commands used: INFO, EXISTS, SET, GET.
--
-- The counter reads as 0 unless this run of the server wrote it: a counter
-- that came back from the disk after a restart may be older than what the
-- server had handed out (the AOF's last second lost in a host crash), so it
-- counts as lost, and the client's epoch rule covers it (docs/algorithm.md,
-- "Fencing tokens"). A plain number (written before counters carried their
-- run) reads as another run's. Checked before anything is written: a
-- counter key that holds no counter fails the script with an error reply.
--
-- Returns: a two-element array
--   [1]  1 acquired (or already held ARGV[1]), 0 held by another value,
--        -1 refused by a release guard (as acquire.lua)
--   [2]  the fencing counter written by this run, 0 when there is none
local fence = 0
local s = redis.call('GET', KEYS[3])
if s then
  local n, run = string.match(s, '^(%d+):(%x+)$')
  if not n and not tonumber(s) then
    return redis.error_reply('ERR the fencing counter ' .. KEYS[3] .. ' holds no counter')
  end
  local info = n and redis.call('INFO', 'server')
  local at = info and string.find(info, 'run_id:', 1, true)
  if n and ((at and run == string.sub(info, at + 7, at + 46)) or ARGV[3] == 'anyrun') then
    fence = tonumber(n)
  elseif not n and ARGV[3] == 'anyrun' then
    fence = tonumber(s)
  end
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return { -1, fence }
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return { 1, fence }
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return { 1, fence }
end
return { 0, fence }
