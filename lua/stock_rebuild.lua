-- stock_rebuild.lua: create a SKU's state from the record, only if the SKU
-- has none (create-if-absent): a state that exists, with whatever live holds
-- it counts, is left alone. With a claim, only if the SKU's rebuild claim
-- is still the caller's: no flush, and no other creation of the state,
-- since the caller read the record (a count read before a state was
-- created, sold from and lost again is stale).
--
-- KEYS[1]    <p>:{sku}:state      hash avail, held, sold, limit, hold_ms,
--                                 ver, epoch, gen
-- KEYS[2]    <p>:{sku}:rb         string: the SKU's rebuild claim (the
--                                 token of the reader that claimed last)
-- KEYS[2+j]  <p>:{sku}:rs:<op>    marker of restock operation j, which the
--                                 available units already include
-- ARGV[1]    available units
-- ARGV[2]    per-user limit (0: none)
-- ARGV[3]    hold time ms
-- ARGV[4]    a new random generation (the new state's fence never repeats)
-- ARGV[5]    marker lifetime ms (the Store's retention)
-- ARGV[6]    the caller's claim token, or '' to rebuild without a claim
-- Reply      {'ok', epoch} (created; every claim is void) |
--            {'exists', epoch} | {'stale'} (the claim is gone or another
--            reader's); nothing written but for 'ok'
if redis.call('HEXISTS', KEYS[1], 'hold_ms') == 1 then
  return {'exists', tonumber(redis.call('HGET', KEYS[1], 'epoch') or '0')}
end
if ARGV[6] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[6] then
  return {'stale'}
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'avail', ARGV[1], 'limit', ARGV[2], 'hold_ms', ARGV[3], 'gen', ARGV[4])
redis.call('HSETNX', KEYS[1], 'held', 0)
redis.call('HSETNX', KEYS[1], 'sold', 0)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
for i = 3, #KEYS do
  redis.call('SET', KEYS[i], 'r', 'PX', ARGV[5], 'NX')
end
return {'ok', redis.call('HINCRBY', KEYS[1], 'epoch', 1)}
