-- stock_confirm.lua: confirm an order's lines that share one slot, all of
-- them or none. Runs after stock_lib.lua.
--
-- KEYS     5 per line: state, holds, users, lines (as in stock_deduct.lua)
--          and <p>:{sku}:gone (list "<e> <order ID>" of ended records)
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  the order's identity, as in stock_deduct.lua
-- ARGV[4]  retention ms: records live this long after the call, ended
--          now or before (the order's end: the call ends its entry too)
-- Reply    {'ok'} when every line is confirmed (now or before);
--          {'expired'} when a line's deadline passed: every line is
--          returned (avail, user quota) and marked expired;
--          {'unknown', i} (no record of line i), {'closed', i} (reverted)
--          or {'unavailable', i} (line i would change but its SKU's state
--          hash is gone: flushed, evicted, not rebuilt yet): nothing
--          written.
--
-- A line's units are its qty less what partial reverts gave back (ret,
-- stock_return.lua): only those move.
--
-- Running it twice is safe: confirmed and expired records are final here
-- (a second run only moves their end, see ARGV[4]).
local now = tonumber(ARGV[1])
local id, ident = ARGV[2], ARGV[3]
local keep = tonumber(ARGV[4])
local n = #KEYS / 5
local recs = {}
local expired = false

for i = 1, n do
  local b = 5 * (i - 1)
  local r = rec_get(KEYS[b + 4], id)
  if not r or r.id ~= ident then return {'unknown', i} end
  if r.st == 'reverted' or r.st == 'refunded' then return {'closed', i} end
  if r.st == 'expired' or (r.st == 'held' and r.dl <= now) then
    expired = true
  end
  recs[i] = r
end

-- A gate that lost a SKU's state answers nothing for it until it is
-- rebuilt: no record changes against a count that is not there.
for i = 1, n do
  local st = recs[i].st
  if (st == 'held' or (expired and st == 'confirmed'))
      and redis.call('HEXISTS', KEYS[5 * (i - 1) + 1], 'hold') == 0 then
    return {'unavailable', i}
  end
end

for i = 1, n do
  local b = 5 * (i - 1)
  local r = recs[i]
  local qty = r.qty - r.ret
  -- A SKU whose state is gone (flushed, evicted) is rebuilt from the
  -- database: the record changes, the missing counters are not recreated.
  local live = redis.call('HEXISTS', KEYS[b + 1], 'hold') == 1
  -- A line partial returns emptied (qty 0) changes state, never a count:
  -- Redis refuses the increment "-0".
  local was = r.st
  if expired and (was == 'held' or was == 'confirmed') then
    if live and qty > 0 then
      redis.call('HINCRBY', KEYS[b + 1], was == 'held' and 'held' or 'sold', -qty)
      redis.call('HINCRBY', KEYS[b + 1], 'avail', qty)
    end
    if r.user ~= '' and qty > 0 and redis.call('HINCRBY', KEYS[b + 3], r.user, -qty) <= 0 then
      redis.call('HDEL', KEYS[b + 3], r.user)
    end
    r.st = 'expired'
  elseif not expired and was == 'held' then
    if live and qty > 0 then
      redis.call('HINCRBY', KEYS[b + 1], 'held', -qty)
      redis.call('HINCRBY', KEYS[b + 1], 'sold', qty)
    end
    r.st = 'confirmed'
  end
  if r.st ~= was then
    if live then redis.call('HINCRBY', KEYS[b + 1], 'ver', 1) end
    redis.call('ZREM', KEYS[b + 2], id)
  end
  -- An ended line (now or before) lives Retention from this call, as the
  -- order's directory entry the same call ends.
  if r.st ~= 'held' then rec_end(KEYS[b + 4], KEYS[b + 5], id, r, keep) end
end
if expired then return {'expired'} end
return {'ok'}
