-- stock_bucket_settings.lua: give one bucket of a SKU the settings its
-- first bucket got from a Relist.
-- Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{bucket}:state   hash avail, ..., limit, hold, max_ms
-- ARGV[1]  per-user limit (0: none)
-- ARGV[2]  hold time ms
-- ARGV[3]  maximum hold time ms
-- Reply    {'ok'} | {'absent'} (no state: nothing written)
if redis.call('HEXISTS', KEYS[1], 'hold') == 0 then
  refuse_layout1(KEYS[1])
  return {'absent'}
end
redis.call('HSET', KEYS[1], 'limit', ARGV[1], 'hold', ARGV[2], 'max_ms', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
return {'ok'}
