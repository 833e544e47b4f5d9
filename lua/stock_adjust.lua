-- stock_adjust.lua: add a correction to a SKU's available units if no
-- administrative write (put on sale, restock, adjust) happened since the
-- caller read the SKU's epoch. Deducts and returns do not change the epoch:
-- they move units between counts, and a correction computed from a snapshot
-- stays right while they run.
--
-- KEYS[1]  <p>:{sku}:state   hash avail, ..., ver, epoch
-- ARGV[1]  expected epoch
-- ARGV[2]  delta (may be negative)
-- ARGV[3]  the most units a SKU may have available
-- Reply    {'ok', new epoch} | {'unknown_sku'} | {'stale', epoch} |
--          {'range', avail} (avail + delta outside [0, max]: nothing written)
local s = redis.call('HMGET', KEYS[1], 'avail', 'epoch')
if not s[1] then return {'unknown_sku'} end
local epoch = tonumber(s[2] or '0')
if epoch ~= tonumber(ARGV[1]) then return {'stale', epoch} end
local a = tonumber(s[1]) + tonumber(ARGV[2])
if a < 0 or a > tonumber(ARGV[3]) then return {'range', tonumber(s[1])} end
redis.call('HINCRBY', KEYS[1], 'avail', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {'ok', redis.call('HINCRBY', KEYS[1], 'epoch', 1)}
