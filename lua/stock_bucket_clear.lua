-- stock_bucket_clear.lua: clear the departure records of transfers out of
-- a bucket once their arrival is settled.
--
-- KEYS[1]  <p>:{bucket}:state  hash avail, ...
-- KEYS[2]  <p>:{bucket}:xo     hash transfer ID -> destination "\n" units "\n" ms
-- ARGV     pairs: transfer ID, and 'back' (the units never arrived and
--          come back here) or anything else (they arrived, or are dropped)
-- Reply    {'ok'}
--
-- A transfer without a record (cleared before) changes nothing.
local exists = redis.call('EXISTS', KEYS[1]) == 1
for j = 1, #ARGV, 2 do
  local p = redis.call('HGET', KEYS[2], ARGV[j])
  if p then
    local got = tonumber(string.match(p, '\n(%d+)\n'))
    redis.call('HDEL', KEYS[2], ARGV[j])
    if exists then
      redis.call('HINCRBY', KEYS[1], 'xv', 1)
      if ARGV[j + 1] == 'back' then
        redis.call('HINCRBY', KEYS[1], 'avail', got)
        redis.call('HINCRBY', KEYS[1], 'ver', 1)
      end
    end
  end
end
return {'ok'}
