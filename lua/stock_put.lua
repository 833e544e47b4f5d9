-- stock_put.lua: put a SKU on sale. Overwrites the available units and the
-- settings; keeps the units held and sold.
--
-- KEYS[1]  <p>:{sku}:state   hash avail, held, sold, limit, hold_ms, ver, epoch
-- ARGV[1]  available units
-- ARGV[2]  per-user limit (0: none)
-- ARGV[3]  hold time ms
-- Reply    the new epoch.
--
-- Running it twice leaves the same state, with ver and epoch bumped twice.
redis.call('HSET', KEYS[1], 'avail', ARGV[1], 'limit', ARGV[2], 'hold_ms', ARGV[3])
redis.call('HSETNX', KEYS[1], 'held', 0)
redis.call('HSETNX', KEYS[1], 'sold', 0)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return redis.call('HINCRBY', KEYS[1], 'epoch', 1)
