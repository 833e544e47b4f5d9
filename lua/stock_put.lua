-- stock_put.lua: put a SKU on sale. Overwrites the available units and the
-- settings; keeps the units held and sold.
-- Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{sku}:state   hash avail, held, sold, limit, hold, max_ms,
--                            ver, epoch, gen
-- KEYS[2]  <p>:{sku}:rb      string: the SKU's rebuild claim, voided when
--                            this call creates the state (see
--                            stock_rebuild.lua)
-- ARGV[1]  available units
-- ARGV[2]  per-user limit (0: none)
-- ARGV[3]  hold time ms
-- ARGV[4]  a new random generation, written only when this call creates the
--          state (no hold yet: never on sale, or flushed): the state's
--          fence then never repeats one a reader saw before
-- ARGV[5]  maximum hold time ms (Listing.MaxHoldTTL, defaults filled)
-- Reply    the new epoch.
--
-- Running it twice leaves the same state, with ver and epoch bumped twice.
refuse_layout1(KEYS[1])
if redis.call('HEXISTS', KEYS[1], 'hold') == 0 or redis.call('HEXISTS', KEYS[1], 'gen') == 0 then
  redis.call('HSET', KEYS[1], 'gen', ARGV[4])
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[1], 'avail', ARGV[1], 'limit', ARGV[2], 'hold', ARGV[3], 'max_ms', ARGV[5])
redis.call('HSETNX', KEYS[1], 'held', 0)
redis.call('HSETNX', KEYS[1], 'sold', 0)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return redis.call('HINCRBY', KEYS[1], 'epoch', 1)
