-- stock_bucket_lease.lua: the lease under which units move between the
-- buckets of one SKU, on the SKU's first bucket (the SKU's own state).
--
-- KEYS[1]  <p>:{sku}:state   hash avail, ..., epoch (the first bucket's)
-- KEYS[2]  <p>:{sku}:bl      string, the token of the lease holder
-- ARGV[1]  'take', 'tick' or 'drop'
-- ARGV[2]  the caller's token
-- ARGV[3]  lease ms ('take')
-- Reply    {'ok'} | {'busy'} (another token holds the lease: 'take') |
--          {'missing'} (the SKU's first state is gone: 'take')
--
-- Every step bumps the SKU's epoch, so a reconciler's fenced correction
-- computed from counts read while units were on their way between buckets
-- is refused (read again): 'take' before any unit leaves a bucket, 'tick'
-- after units arrived and before their departure records are cleared,
-- 'drop' at the end (it frees the lease if the caller still holds it).
local mode, token = ARGV[1], ARGV[2]
if mode == 'take' then
  local holder = redis.call('GET', KEYS[2])
  if holder and holder ~= token then return {'busy'} end
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing'} end
  redis.call('SET', KEYS[2], token, 'PX', ARGV[3])
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'epoch', 1)
end
if mode == 'drop' and redis.call('GET', KEYS[2]) == token then
  redis.call('DEL', KEYS[2])
end
return {'ok'}
