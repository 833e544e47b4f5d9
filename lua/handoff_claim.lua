-- handoff_claim.lua: claim hand-off deliveries left unacknowledged for the
-- redelivery timeout (XAUTOCLAIM), and answer each with its delivery count,
-- in one call: a delivery the claim took is in the reply, whatever happens
-- to the caller after it.
-- KEYS[1]  the stream
-- ARGV[1]  the consumer group
-- ARGV[2]  the consumer claiming
-- ARGV[3]  the redelivery timeout, ms (XAUTOCLAIM's min-idle-time)
-- ARGV[4]  the pending entry the scan begins at (XAUTOCLAIM's start)
-- ARGV[5]  the most deliveries to claim (XAUTOCLAIM's COUNT)
-- ARGV[6]  '1' to read, before the scan, the greatest ID pending (a pass
--          of claims begins), else ''
-- Reply    {cursor, greatest ID pending ('' when not read, or none is
--          pending), then per delivery claimed: ID, payload (field m, ''
--          if absent), delivery count}; the cursor is XAUTOCLAIM's
local high = ''
if ARGV[6] == '1' then
  local s = redis.call('XPENDING', KEYS[1], ARGV[1])
  if tonumber(s[1]) > 0 and s[3] then high = s[3] end
end
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], 'COUNT', ARGV[5])
local out = {r[1], high}
for _, e in ipairs(r[2]) do
  if e and e[1] then -- an entry deleted from the stream has no fields
    local id, payload = e[1], ''
    local f = e[2]
    if f then
      for i = 1, #f, 2 do
        if f[i] == 'm' then payload = f[i + 1] end
      end
    end
    local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)
    if #p > 0 then
      out[#out + 1], out[#out + 2], out[#out + 3] = id, payload, p[1][4]
    end
  end
end
return out
