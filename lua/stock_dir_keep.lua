-- stock_dir_keep.lua: give an order's directory entry the lifetime of its
-- ended records (Retention), if it still names the order's identity.
--
-- KEYS[1]  <p>:order:{<id>}      string: the order's identity
-- KEYS[2]  <p>:bind:{<id>}       set of attempts (Redis Cluster only; may
--                                be absent)
-- ARGV[1]  the identity whose order ended
-- ARGV[2]  retention ms
-- Reply    1 if the entry names ARGV[1] (and now expires), 0 otherwise.
--
-- An entry naming another identity belongs to a newer order under the same
-- ID and is left alone. Running it twice is safe.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
