-- stock_bucket_in.lua: units taken out of other buckets of a SKU arrive
-- at this one, each transfer once.
-- Runs after stock_lib.lua.
--
-- KEYS[1]    <p>:{bucket}:state      hash avail, ..., gen
-- KEYS[1+j]  <p>:{bucket}:xi:<t_j>   marker of transfer j: 'in' (its units
--                                    were added here), 'void' (they never
--                                    will be: they go back, or a PutOnSale
--                                    dropped them) or 'lost' (the state
--                                    they were meant for is gone)
-- ARGV[1]    'in', or 'void' (mark every transfer that has no marker void,
--            adding nothing: a PutOnSale that overwrites the counts)
-- ARGV[2]    marker lifetime ms (twice the departure records')
-- ARGV[1+2j], ARGV[2+2j]  units of transfer j, and the gen of the state it
--            was meant for
-- Reply      {avail (-1: no state), word_1, ..., word_n}: each transfer's
--            marker, as found or as set now
--
-- A transfer whose marker exists adds nothing, so the transfer's own
-- resend and a recovery that completes it (from the departure record)
-- count its units once. A missing state gets 'void' (the units go back
-- to the bucket they left); a state of another gen (lost and recreated
-- since the refill read it: the marker was lost with the old one) gets
-- 'lost', and its units are dropped: they may have arrived at the old
-- state already, so the gate errs low and a reconciler adds them back.
local s = redis.call('HMGET', KEYS[1], 'hold', 'gen')
local exists = s[1] ~= false
if not exists then refuse_layout1(KEYS[1]) end
local out = {-1}
for j = 2, #KEYS do
  local m = redis.call('GET', KEYS[j])
  if not m then
    local units, gen = tonumber(ARGV[2 * j - 1]), ARGV[2 * j]
    if ARGV[1] == 'void' or not exists then
      m = 'void'
    elseif gen ~= '' and gen ~= s[2] then
      m = 'lost'
    else
      redis.call('HINCRBY', KEYS[1], 'avail', units)
      redis.call('HINCRBY', KEYS[1], 'ver', 1)
      m = 'in'
    end
    redis.call('SET', KEYS[j], m, 'PX', ARGV[2])
    if exists then redis.call('HINCRBY', KEYS[1], 'xv', 1) end
  end
  out[j] = m
end
if exists then out[1] = tonumber(redis.call('HGET', KEYS[1], 'avail')) end
return out
