-- stock_bucket_out.lua: take available units out of one bucket of a SKU,
-- on their way to another bucket of it, once per transfer ID.
-- Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{bucket}:state  hash avail, ...
-- KEYS[2]  <p>:{bucket}:xo     hash transfer ID -> destination bucket "\n"
--                              units "\n" when (ms) "\n" the destination
--                              state's gen: transfers out of this bucket
--                              whose arrival is not cleared yet
-- ARGV[1]  transfer ID
-- ARGV[2]  units wanted (at least 1)
-- ARGV[3]  the destination bucket's name
-- ARGV[4]  now (ms)
-- ARGV[5]  the destination state's gen as the refill read it
-- ARGV[6]  how long the departure records live, ms: half as long as an
--          arrival marker
-- Reply    {'ok', units taken, avail left} | {'dup', units, avail}
--          (the transfer was taken before) | {'missing'} (no state)
--
-- At most the available units are taken; none when there are none (and
-- nothing is recorded then). The departure record stays until the
-- transfer's arrival is settled (stock_bucket_clear.lua): a reader counts
-- its units as on their way while the destination has no 'in' marker for
-- it, so it never misses them nor counts them twice. A departure record
-- must not outlive its arrival marker (a transfer that arrived, its marker
-- gone, would arrive again): the records of a bucket expire ARGV[6] after
-- its last transfer out, half a marker's lifetime, and every refill
-- settles all the SKU's records before it takes units out. A record that expires before
-- its units arrived (a refill that died halfway and no refill of the SKU
-- since) takes them with it: the gate errs low, and a reconciler adds them
-- back. Every transfer step
-- that changes what a reader counts bumps the bucket's field xv (here, and
-- in stock_bucket_in.lua and stock_bucket_clear.lua), so a reader that
-- finds every bucket's xv unchanged over its reading read no step.
local s = redis.call('HMGET', KEYS[1], 'avail', 'hold')
local p = redis.call('HGET', KEYS[2], ARGV[1])
if p then
  return {'dup', tonumber(string.match(p, '\n(%d+)\n')), tonumber(s[1] or '0')}
end
if not s[1] or not s[2] then
  refuse_layout1(KEYS[1])
  return {'missing'}
end
local avail = tonumber(s[1])
local got = math.min(avail, tonumber(ARGV[2]))
if got <= 0 then return {'ok', 0, avail} end
redis.call('HINCRBY', KEYS[1], 'avail', -got)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HINCRBY', KEYS[1], 'xv', 1)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3] .. '\n' .. got .. '\n' .. ARGV[4] .. '\n' .. ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return {'ok', got, avail - got}
