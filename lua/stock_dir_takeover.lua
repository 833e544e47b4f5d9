-- stock_dir_takeover.lua: bind an order ID, for one attempt of a Deduct on
-- a Redis Cluster, over a stale directory entry of another order: one that
-- has not ended and whose attempt set has expired (stock_dir_bind.lua said
-- 'stale'), after the caller found that the other order holds nothing (no
-- record of its first line). Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:dir:{<shard>}     hash order ID -> directory entry
-- ARGV[1]  order ID
-- ARGV[2]  the stale identity the caller checked
-- ARGV[3]  the new order's identity
-- ARGV[4]  the attempt's token
-- Reply    'new' (the entry now holds ARGV[3]) or 'conflict' (the entry
--          changed since the check, or an attempt bound it: nothing
--          written).
local d = dir_decode(redis.call('HGET', KEYS[1], ARGV[1]))
if not d or d.id ~= ARGV[2] or d.e or dir_attempts(d) then
  return 'conflict'
end
redis.call('HSET', KEYS[1], ARGV[1], dir_encode({id = ARGV[3], lease = 0, toks = ARGV[4]}))
return 'new'
