-- stock_confirm.lua: confirm an order's lines that share one slot, all of
-- them or none.
--
-- KEYS     4 per line, as in stock_deduct.lua: state, holds, users, record
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  the order's identity, as in stock_deduct.lua
-- ARGV[4]  retention ms: records live this long after the change
-- Reply    {'ok'} when every line is confirmed (now or before);
--          {'expired'} when a line's deadline passed: every line is
--          returned (avail, user quota) and marked expired;
--          {'unknown', i} (no record of line i), {'closed', i} (reverted)
--          or {'unavailable', i} (line i would change but its SKU's state
--          hash is gone: flushed, evicted, not rebuilt yet): nothing
--          written.
--
-- A line's units are its qty less what partial reverts gave back (field
-- ret, stock_return.lua): only those move.
--
-- Running it twice is safe: confirmed and expired records are final here.
local now = tonumber(ARGV[1])
local id, ident = ARGV[2], ARGV[3]
local keep = tonumber(ARGV[4])
local n = #KEYS / 4
local recs = {}
local expired = false

for i = 1, n do
  local b = 4 * (i - 1)
  local r = redis.call('HMGET', KEYS[b + 4], 'st', 'qty', 'user', 'dl', 'id', 'ret')
  if not r[1] or r[5] ~= ident then return {'unknown', i} end
  if r[1] == 'reverted' or r[1] == 'refunded' then return {'closed', i} end
  if r[1] == 'expired' or (r[1] == 'held' and tonumber(r[4]) <= now) then
    expired = true
  end
  recs[i] = r
end

-- A gate that lost a SKU's state answers nothing for it until it is
-- rebuilt: no record changes against a count that is not there.
for i = 1, n do
  local st = recs[i][1]
  if (st == 'held' or (expired and st == 'confirmed'))
      and redis.call('HEXISTS', KEYS[4 * (i - 1) + 1], 'hold_ms') == 0 then
    return {'unavailable', i}
  end
end

for i = 1, n do
  local b = 4 * (i - 1)
  local r = recs[i]
  local qty = tonumber(r[2]) - tonumber(r[6] or '0')
  -- A SKU whose state is gone (flushed, evicted) is rebuilt from the
  -- database: the record changes, the missing counters are not recreated.
  local live = redis.call('HEXISTS', KEYS[b + 1], 'hold_ms') == 1
  -- A line partial returns emptied (qty 0) changes state, never a count:
  -- Redis refuses the increment "-0".
  if expired and (r[1] == 'held' or r[1] == 'confirmed') then
    if live and qty > 0 then
      redis.call('HINCRBY', KEYS[b + 1], r[1] == 'held' and 'held' or 'sold', -qty)
      redis.call('HINCRBY', KEYS[b + 1], 'avail', qty)
    end
    if r[3] ~= '' and qty > 0 and redis.call('HINCRBY', KEYS[b + 3], r[3], -qty) <= 0 then
      redis.call('HDEL', KEYS[b + 3], r[3])
    end
    redis.call('HSET', KEYS[b + 4], 'st', 'expired')
  elseif not expired and r[1] == 'held' then
    if live and qty > 0 then
      redis.call('HINCRBY', KEYS[b + 1], 'held', -qty)
      redis.call('HINCRBY', KEYS[b + 1], 'sold', qty)
    end
    redis.call('HSET', KEYS[b + 4], 'st', 'confirmed')
  else
    qty = nil
  end
  if qty then
    if live then redis.call('HINCRBY', KEYS[b + 1], 'ver', 1) end
    redis.call('ZREM', KEYS[b + 2], id)
    redis.call('PEXPIRE', KEYS[b + 4], keep)
  end
end
if expired then return {'expired'} end
return {'ok'}
