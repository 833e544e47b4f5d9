-- stock_relist.lua: a fenced warm-up of a SKU on sale: add a correction to
-- its available units and overwrite its settings, only if its fence is still
-- the one the caller read (same generation and epoch: no flush, rebuild or
-- administrative write since) and, unless forced, only if it has no live
-- holds at this instant.
-- Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{sku}:state   hash avail, held, ..., hold, ver, epoch, gen
-- KEYS[2]  <p>:{sku}:bl      the SKU's transfer lease: while it is held the
--                            write is refused as stale (see stock_adjust.lua)
-- ARGV[1]  expected generation
-- ARGV[2]  expected epoch
-- ARGV[3]  delta (may be negative)
-- ARGV[4]  per-user limit (0: none)
-- ARGV[5]  hold time ms
-- ARGV[6]  the most units a SKU may have available
-- ARGV[7]  '1' to apply even while units are held, '0' otherwise
-- ARGV[8]  maximum hold time ms (defaults filled)
-- Reply    {'ok', new epoch} | {'absent'} | {'stale', epoch} |
--          {'held', units held} | {'range', avail}; only 'ok' writes
local s = redis.call('HMGET', KEYS[1], 'avail', 'held', 'hold', 'epoch', 'gen')
if not s[1] or not s[3] then
  refuse_layout1(KEYS[1])
  return {'absent'}
end
local epoch = tonumber(s[4] or '0')
if (s[5] or '') ~= ARGV[1] or epoch ~= tonumber(ARGV[2]) then return {'stale', epoch} end
if redis.call('EXISTS', KEYS[2]) == 1 then return {'stale', epoch} end
local held = tonumber(s[2] or '0')
if held > 0 and ARGV[7] ~= '1' then return {'held', held} end
local a = tonumber(s[1]) + tonumber(ARGV[3])
if a < 0 or a > tonumber(ARGV[6]) then return {'range', tonumber(s[1])} end
redis.call('HINCRBY', KEYS[1], 'avail', ARGV[3])
redis.call('HSET', KEYS[1], 'limit', ARGV[4], 'hold', ARGV[5], 'max_ms', ARGV[8])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {'ok', redis.call('HINCRBY', KEYS[1], 'epoch', 1)}
