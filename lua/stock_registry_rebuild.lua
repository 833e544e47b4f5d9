-- stock_registry_rebuild.lua: add a rebuilt SKU to the Store's registry.
-- A registry that is gone means the Redis lost its data; the rebuild that
-- recreates it marks it incomplete, so that a SKU not rebuilt yet still
-- reads as lost (stock.ErrUnavailable), not as never on sale, until a full
-- reconcile pass has visited every SKU and clears the mark.
--
-- KEYS[1]  <p>:skus   set of the SKUs put on sale
-- ARGV[1]  the SKU
-- ARGV[2]  the incomplete mark, a member no SKU can be ('{lost}')
-- ARGV[3]  the layout mark, a member no SKU can be ('{layout:2}'): the
--          registry's Store writes this key layout
-- Reply    1 if the SKU was added, 0 if it was there.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SADD', KEYS[1], ARGV[2])
end
local added = redis.call('SADD', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[1], ARGV[3])
return added
