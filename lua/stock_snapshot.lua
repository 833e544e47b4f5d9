-- stock_snapshot.lua: read one SKU's state, the orders holding it, the states
-- of chosen order lines and whether chosen restock operations were applied,
-- in one atomic step, so a reconciler sees a count and what is behind it as
-- of the same instant. Writes nothing.
--
-- KEYS[1]      <p>:{sku}:state      hash avail, held, sold, limit, hold_ms,
--                                   ver, epoch, gen, max_ms
-- KEYS[2]      <p>:{sku}:holds      zset order ID -> hold deadline ms
-- KEYS[2+i]    <p>:{sku}:o:<id>     record of watched order line i (1..n)
-- KEYS[2+n+j]  <p>:{sku}:rs:<op>    marker of watched restock operation j
-- ARGV[1]      n, the number of watched order lines
-- Reply        {state fields (HMGET, nil for missing), {id, deadline, ...}
--              of every hold, {st of watched line i, '' when it has no
--              record}, {1 if operation j's marker exists, else 0}, rn}
--              where rn is the state's count of partial returns of held
--              units (stock_return.lua; '' for none): the caller reads the
--              holds' quantities after this step, and tells by an rn read
--              after them that none changed in between
local s = redis.call('HMGET', KEYS[1], 'avail', 'held', 'sold', 'limit', 'hold_ms', 'ver', 'epoch', 'gen', 'max_ms')
local h = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local n = tonumber(ARGV[1])
local w = {}
for i = 3, 2 + n do
  w[#w + 1] = redis.call('HGET', KEYS[i], 'st') or ''
end
local ops = {}
for i = 3 + n, #KEYS do
  ops[#ops + 1] = redis.call('EXISTS', KEYS[i])
end
return {s, h, w, ops, redis.call('HGET', KEYS[1], 'rn') or ''}
