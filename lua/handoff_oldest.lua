-- handoff_oldest.lua: read what dates the oldest hand-off message not settled: the
-- head of the stream and the first live member of the retried set, dropping
-- before it the members whose copy is gone (settled by something that does not
-- keep the set, such as an earlier version's Ack).
-- KEYS[1]  the stream
-- KEYS[2]  the delayed set (see handoff_retry.lua)
-- KEYS[3]  the retried set (see handoff_retry.lua): a member is the copy's entry
--          ID on the stream, or its payload (JSON, beginning with '{') in the
--          delayed set
-- ARGV[1]  the most members to drop in one call
-- Reply    {head entry ID ('' when the stream is empty), its payload (field m, ''
--          if absent), the score of the retried set's first live member ('' when
--          none), '1' when the call stopped after ARGV[1] drops before it found
--          whether a member is live (its score is then '': call again), else '0'}
local head = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local hid, payload = '', ''
if head[1] then
  hid = head[1][1]
  local f = head[1][2]
  if f then
    for i = 1, #f, 2 do
      if f[i] == 'm' then payload = f[i + 1] end
    end
  end
end
local score = ''
local budget = tonumber(ARGV[1])
while true do
  local z = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if #z == 0 then break end
  if budget <= 0 then return {hid, payload, '', '1'} end
  local m = z[1]
  local live
  if string.sub(m, 1, 1) == '{' then
    live = redis.call('ZSCORE', KEYS[2], m) ~= false
  else
    local e = redis.pcall('XRANGE', KEYS[1], m, m)
    live = type(e) == 'table' and e.err == nil and #e > 0
  end
  if live then
    score = z[2]
    break
  end
  redis.call('ZREM', KEYS[3], m)
  budget = budget - 1
end
return {hid, payload, score, '0'}
