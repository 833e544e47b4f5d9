-- stock_snapshot.lua: read one SKU's state, the orders holding it, the states
-- of chosen order lines and whether chosen restock operations were applied,
-- in one atomic step, so a reconciler sees a count and what is behind it as
-- of the same instant. Writes nothing. Runs after stock_lib.lua.
--
-- KEYS[1]      <p>:{sku}:state      hash avail, held, sold, limit, hold,
--                                   ver, epoch, gen, max_ms
-- KEYS[2]      <p>:{sku}:holds      zset order ID -> hold deadline ms
-- KEYS[3]      <p>:{sku}:lines      hash order ID -> line record
-- KEYS[3+j]    <p>:{sku}:rs:<op>    marker of watched restock operation j
-- ARGV[i]      order ID of watched order line i
-- Reply        {state fields (HMGET, nil for missing), {id, deadline, ...}
--              of every hold, {st of watched line i, '' when it has no
--              record}, {1 if operation j's marker exists, else 0}, rn}
--              where rn is the state's count of partial returns of held
--              units (stock_return.lua; '' for none): the caller reads the
--              holds' quantities after this step, and tells by an rn read
--              after them that none changed in between
local s = redis.call('HMGET', KEYS[1], 'avail', 'held', 'sold', 'limit', 'hold', 'ver', 'epoch', 'gen', 'max_ms')
local h = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local w = {}
for i = 1, #ARGV do
  local r = rec_get(KEYS[3], ARGV[i])
  w[#w + 1] = r and r.st or ''
end
local ops = {}
for i = 4, #KEYS do
  ops[#ops + 1] = redis.call('EXISTS', KEYS[i])
end
return {s, h, w, ops, redis.call('HGET', KEYS[1], 'rn') or ''}
