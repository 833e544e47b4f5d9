-- stock_dir_takeover.lua: bind an order ID, for one attempt of a Deduct on
-- a Redis Cluster, over a stale directory entry of another order: one that
-- has not ended and whose attempt set has expired (stock_dir_bind.lua said
-- 'stale'), after the caller found that the other order holds nothing (no
-- record of its first line). Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:dir:{<shard>}     hash order ID -> directory entry
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  the stale identity the caller checked
-- ARGV[4]  the new order's identity
-- ARGV[5]  the attempt's token
-- Reply    'new' (the entry now holds ARGV[4]) or 'conflict' (the entry
--          changed since the check, or an attempt bound it: nothing
--          written).
local now = tonumber(ARGV[1])
local d = dir_decode(redis.call('HGET', KEYS[1], ARGV[2]), now)
if not d or d.id ~= ARGV[3] or d.e or dir_attempts(d, now) then
  return 'conflict'
end
redis.call('HSET', KEYS[1], ARGV[2], dir_encode({id = ARGV[4], lease = 0, toks = ARGV[5]}))
return 'new'
