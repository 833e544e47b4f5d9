-- stock_snapshot.lua: read one SKU's state, the orders holding it and the states
-- of chosen order lines, in one atomic step, so a reconciler sees a count
-- and the holds behind it as of the same instant. Writes nothing.
--
-- KEYS[1]    <p>:{sku}:state    hash avail, held, sold, limit, hold_ms, ver, epoch
-- KEYS[2]    <p>:{sku}:holds    zset order ID -> hold deadline ms
-- KEYS[2+i]  <p>:{sku}:o:<id>   record of watched order line i
-- ARGV       none
-- Reply      {state fields (HMGET, nil for missing), {id, deadline, ...}
--            of every hold, {st of watched line i, '' when it has no record}}
local s = redis.call('HMGET', KEYS[1], 'avail', 'held', 'sold', 'limit', 'hold_ms', 'ver', 'epoch')
local h = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local w = {}
for i = 3, #KEYS do
  w[#w + 1] = redis.call('HGET', KEYS[i], 'st') or ''
end
return {s, h, w}
