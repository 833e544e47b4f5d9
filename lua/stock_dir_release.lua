-- stock_dir_release.lua: an attempt whose Deduct failed leaves the order's
-- directory entry; the last attempt to leave deletes it (the order ID is
-- free again).
--
-- KEYS[1]  <p>:order:{<id>}      string: the order's identity
-- KEYS[2]  <p>:bind:{<id>}       set: the attempts on the entry
-- ARGV[1]  the identity the attempt bound
-- ARGV[2]  the attempt's token
-- ARGV[3]  lease ms, or 0: when other attempts are left on an entry without
--          a TTL, give the attempt set (never the entry) this TTL (the
--          leaving attempt found no record of the order, so those attempts
--          may have ended without taking anything, their outcome unknown).
--          An entry whose set expired can be taken over by another order
--          under the same ID once that order is found to hold nothing
--          (stock_dir_bind.lua, stock_dir_takeover.lua); the entry itself
--          never expires while a successful attempt may count on it.
-- Reply    1 if the entry was deleted, 0 otherwise (another identity, or
--          other attempts still on it, or a successful one).
--
-- An attempt that succeeded never leaves, so an entry some successful
-- Deduct counts on is never deleted here. Running it twice is safe.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SREM', KEYS[2], ARGV[2])
if redis.call('SCARD', KEYS[2]) > 0 then
  local lease = tonumber(ARGV[3])
  if lease > 0 and redis.call('PTTL', KEYS[1]) == -1 then
    redis.call('PEXPIRE', KEYS[2], lease)
  end
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
