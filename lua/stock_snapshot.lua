-- stock_snapshot.lua: read one SKU's state, the orders holding it, the states
-- of chosen order lines and whether chosen restock operations were applied,
-- in one atomic step, so a reconciler sees a count and what is behind it as
-- of the same instant. Writes nothing. Runs after stock_lib.lua.
--
-- KEYS[1]      <p>:{sku}:state      hash avail, held, sold, limit, hold,
--                                   ver, epoch, gen, max_ms
-- KEYS[2]      <p>:{sku}:holds      zset order ID -> hold deadline ms
-- KEYS[3]      <p>:{sku}:lines      hash order ID -> line record
-- KEYS[4]      <p>:{sku}:hq         list "<deadline ms> <order ID>": the
--                                   hold queue
-- KEYS[4+j]    <p>:{sku}:rs:<op>    marker of watched restock operation j
-- ARGV[i]      order ID of watched order line i
-- Reply        {state fields (HMGET, nil for missing), {id, deadline, ...}
--              of every hold (those of the zset, then those held in the
--              queue only, at their records' deadlines), {st of watched line i, '' when it has no
--              record}, {1 if operation j's marker exists, else 0}, rn}
--              where rn is the state's count of partial returns and
--              dropped holds (stock_return.lua, stock_release.lua; '' for
--              none), then {order ID, ...}
--              of the queue's entries held in the queue only whose line
--              record is missing (lost, or deleted after the order ended:
--              the caller tells by the order's directory entry): the caller reads the
--              holds' quantities after this step, and tells by an rn read
--              after them that none changed in between
local s = redis.call('HMGET', KEYS[1], 'avail', 'held', 'sold', 'limit', 'hold', 'ver', 'epoch', 'gen', 'max_ms')
local h = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local q = redis.call('LRANGE', KEYS[4], 0, -1)
local miss = {}
if #q > 0 then
  local seen = {}
  for i = 1, #h, 2 do seen[h[i]] = true end
  each_value(KEYS[3], q_ids(q, seen), function(id, v)
    local r = rec_decode(v)
    if r and r.st == 'held' then
      h[#h + 1] = id
      h[#h + 1] = string.format('%d', r.dl)
    elseif not v then
      miss[#miss + 1] = id
    end
  end)
end
local w = {}
for i = 1, #ARGV do
  local r = rec_get(KEYS[3], ARGV[i])
  w[#w + 1] = r and r.st or ''
end
local ops = {}
for i = 5, #KEYS do
  ops[#ops + 1] = redis.call('EXISTS', KEYS[i])
end
return {s, h, w, ops, redis.call('HGET', KEYS[1], 'rn') or '', miss}
