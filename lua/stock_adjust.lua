-- stock_adjust.lua: add a correction to a SKU's available units if the
-- SKU's fence is still the one the caller read: the same generation (the
-- state was not recreated by a flush and a rebuild since) and the same
-- epoch (no administrative write: put on sale, restock, rebuild, relist,
-- adjust). Deducts and returns do not change the fence: they move units
-- between counts, and a correction computed from a snapshot stays right
-- while they run.
-- Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{sku}:state   hash avail, ..., hold, ver, epoch, gen
-- KEYS[2]  <p>:{sku}:bl      the SKU's transfer lease (stock_bucket_lease.lua)
-- ARGV[1]  expected generation
-- ARGV[2]  expected epoch
-- ARGV[3]  delta (may be negative)
-- ARGV[4]  the most units a SKU may have available
-- ARGV[5]  the call's token (random, one per Adjust call)
-- Reply    {'ok', new epoch} | {'unknown_sku'} | {'stale', epoch} |
--          {'range', avail} (avail + delta outside [0, max]: nothing written)
--
-- While the transfer lease is held, units may be on their way between the
-- SKU's buckets in a step that leaves the fence alone (out, in): a count
-- read then may miss them or count them twice, and a loss of a giver's
-- master may strand units that still arrive. So the correction is refused
-- as stale while a lease is held; the refill's next lease step moves the
-- epoch.
--
-- The applying run records the call's token (field adj), so a resend of
-- the same call (a client retrying after a lost reply) finds its own
-- correction applied, answers 'ok' and adds nothing more.
local s = redis.call('HMGET', KEYS[1], 'avail', 'epoch', 'gen', 'hold', 'adj')
if not s[1] or not s[4] then
  refuse_layout1(KEYS[1])
  return {'unknown_sku'}
end
local epoch = tonumber(s[2] or '0')
if s[5] == ARGV[5] then return {'ok', epoch} end
if (s[3] or '') ~= ARGV[1] or epoch ~= tonumber(ARGV[2]) then return {'stale', epoch} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {'stale', epoch} end
local a = tonumber(s[1]) + tonumber(ARGV[3])
if a < 0 or a > tonumber(ARGV[4]) then return {'range', tonumber(s[1])} end
redis.call('HINCRBY', KEYS[1], 'avail', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HSET', KEYS[1], 'adj', ARGV[5])
return {'ok', redis.call('HINCRBY', KEYS[1], 'epoch', 1)}
