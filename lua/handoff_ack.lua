-- handoff_ack.lua: acknowledge a hand-off message and delete it from its stream
-- (the stream has one consumer group: a message it acknowledged is done).
-- KEYS[1]  the stream
-- ARGV[1]  the consumer group
-- ARGV[2]  the message ID
-- Reply    the number of messages acknowledged: 1, or 0 for one acknowledged before
redis.call('XDEL', KEYS[1], ARGV[2])
return redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
