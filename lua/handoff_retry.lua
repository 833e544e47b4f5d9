-- handoff_retry.lua: hand a delivered hand-off message back, to be delivered again
-- after a delay, if the delivery is still the message's current one.
-- KEYS[1]  the stream
-- KEYS[2]  the delayed set: a sorted set of payloads by due time (server ms)
-- KEYS[3]  the retried set: the retried copies not yet settled, by the message's
--          Sent time (ms), which Oldest reads (a copy at the stream's end is behind
--          newer messages). A member names where its copy is: the copy's entry ID
--          on the stream, or its payload in the delayed set (handoff_promote.lua
--          turns it into the entry ID); handoff_oldest.lua drops a member whose
--          copy is in neither
-- ARGV[1]  the consumer group
-- ARGV[2]  the message ID
-- ARGV[3]  the consumer the delivery went to
-- ARGV[4]  the delivery count the delivery had (XPENDING's)
-- ARGV[5]  the delay in ms (0: back on the stream at once)
-- ARGV[6]  the payload of the copy to deliver (it counts the deliveries so far and
--          names the message first published, so it is unique in the delayed set)
-- ARGV[7]  the message's Sent time (ms): the copy's score in the retried set
-- Time     Redis server TIME, which handoff_promote.lua reads too.
-- Reply    1 when handed back; 0 when the delivery is not the current one (the message
--          was acknowledged, or claimed by another consumer after its timeout)
if redis.replicate_commands then redis.replicate_commands() end
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
local delay = tonumber(ARGV[5])
if delay <= 0 then
  local id = redis.call('XADD', KEYS[1], '*', 'm', ARGV[6])
  redis.call('ZADD', KEYS[3], tonumber(ARGV[7]), id)
else
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[2], now + delay, ARGV[6])
  redis.call('ZADD', KEYS[3], tonumber(ARGV[7]), ARGV[6])
end
return 1
