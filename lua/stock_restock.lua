-- stock_restock.lua: add units to a SKU that is on sale, once per operation.
-- Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{sku}:state         hash avail, ..., hold, ver, epoch, gen
-- KEYS[2]  <p>:{sku}:rs:<op ID>    marker of the operation on this SKU: its
--                                  units, or 'r' when a rebuild counted it
-- ARGV[1]  units to add
-- ARGV[2]  the most units a SKU may have available
-- ARGV[3]  marker lifetime ms (the Store's retention)
-- Reply    {'ok', avail} (added now) | {'dup'} (the operation was applied
--          before, or counted by a rebuild) | {'conflict'} (the operation
--          was applied with other units) | {'unknown_sku'} |
--          {'too_many', avail}
--
-- The marker makes any repeat of the operation (a go-redis retry after a
-- read timeout, the caller's retry, a reconciler completing it) add
-- nothing more, for as long as the marker lives.
local m = redis.call('GET', KEYS[2])
if m then
  if m == 'r' or m == ARGV[1] then return {'dup'} end
  return {'conflict'}
end
local s = redis.call('HMGET', KEYS[1], 'avail', 'hold')
if not s[1] or not s[2] then
  refuse_layout1(KEYS[1])
  return {'unknown_sku'}
end
local units = tonumber(ARGV[1])
if tonumber(s[1]) + units > tonumber(ARGV[2]) then return {'too_many', tonumber(s[1])} end
local now = redis.call('HINCRBY', KEYS[1], 'avail', units)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
return {'ok', now}
