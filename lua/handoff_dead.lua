-- handoff_dead.lua: move a delivered hand-off message, with the reason, to the
-- dead-letter stream, if the delivery is still the message's current one.
-- KEYS[1]  the stream
-- KEYS[2]  the dead-letter stream
-- KEYS[3]  the retried set (see handoff_retry.lua), which the message ID leaves
-- ARGV[1]  the consumer group
-- ARGV[2]  the message ID
-- ARGV[3]  the consumer the delivery went to
-- ARGV[4]  the delivery count the delivery had (XPENDING's)
-- ARGV[5]  the message's payload
-- ARGV[6]  the reason (an error's text)
-- Reply    1 when moved; 0 when the delivery is not the current one (see handoff_retry.lua)
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then
  return 0
end
redis.call('XADD', KEYS[2], '*', 'm', ARGV[5], 'reason', ARGV[6], 'source_id', ARGV[2])
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
