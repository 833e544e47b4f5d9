-- stock_dir_takeover.lua: bind an order ID, for one attempt of a Deduct on
-- a Redis Cluster, over a stale directory entry of another order: one with
-- no TTL whose attempt set has expired (stock_dir_bind.lua said 'stale'),
-- after the caller found that the other order holds nothing (no record of
-- its first line).
--
-- KEYS[1]  <p>:order:{<id>}      string: the order's identity
-- KEYS[2]  <p>:bind:{<id>}       set: the attempts on the entry
-- ARGV[1]  the stale identity the caller checked
-- ARGV[2]  the new order's identity
-- ARGV[3]  the attempt's token
-- Reply    'new' (the entry now holds ARGV[2]) or 'conflict' (the entry
--          changed since the check, or an attempt bound it: nothing
--          written).
if redis.call('GET', KEYS[1]) ~= ARGV[1] or redis.call('PTTL', KEYS[1]) ~= -1
    or redis.call('EXISTS', KEYS[2]) == 1 then
  return 'conflict'
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return 'new'
