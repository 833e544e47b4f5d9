-- handoff_promote.lua: move the hand-off messages whose Retry delay is over from
-- the delayed set back onto the stream.
-- KEYS[1]  the stream
-- KEYS[2]  the delayed set (see handoff_retry.lua)
-- KEYS[3]  the retried set (see handoff_retry.lua): a moved copy's member, its
--          payload, becomes its entry ID, with the same score
-- ARGV[1]  the most messages to move
-- Time     Redis server TIME, as handoff_retry.lua.
-- Reply    the number of messages moved
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, m in ipairs(due) do
  local id = redis.call('XADD', KEYS[1], '*', 'm', m)
  redis.call('ZREM', KEYS[2], m)
  local sent = redis.call('ZSCORE', KEYS[3], m)
  if sent then
    redis.call('ZREM', KEYS[3], m)
    redis.call('ZADD', KEYS[3], sent, id)
  end
end
return #due
