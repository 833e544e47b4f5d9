-- stock_restock.lua: add units to a SKU that is on sale, once per call.
--
-- KEYS[1]  <p>:{sku}:state         hash avail, ..., ver, epoch
-- KEYS[2]  <p>:{sku}:rs:<token>    marker of this call (a random token)
-- ARGV[1]  units to add
-- ARGV[2]  the most units a SKU may have available
-- ARGV[3]  marker lifetime ms
-- Reply    {'ok', avail} | {'unknown_sku'} | {'too_many', avail}
--
-- The marker makes a retried run (go-redis retries after a read timeout)
-- add nothing more.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {'ok', tonumber(redis.call('HGET', KEYS[1], 'avail') or '0')}
end
local a = redis.call('HGET', KEYS[1], 'avail')
if not a then return {'unknown_sku'} end
local units = tonumber(ARGV[1])
if tonumber(a) + units > tonumber(ARGV[2]) then return {'too_many', tonumber(a)} end
local now = redis.call('HINCRBY', KEYS[1], 'avail', units)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
return {'ok', now}
