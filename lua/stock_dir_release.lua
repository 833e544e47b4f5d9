-- stock_dir_release.lua: an attempt whose Deduct failed leaves the order's
-- directory entry; the last attempt to leave deletes it (the order ID is
-- free again). Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:dir:{<shard>}        hash order ID -> directory entry
-- KEYS[2]  <p>:dir:{<shard>}:open   zset of the shard's open entries
-- ARGV[1]  order ID
-- ARGV[2]  the identity the attempt bound
-- ARGV[3]  the attempt's token
-- ARGV[4]  lease ms, or 0: when other attempts are left on an entry that
--          has not ended, their set lives this long from now (the server's
--          time; never the
--          entry) (the leaving attempt found no record of the order, so
--          those attempts may have ended without taking anything, their
--          outcome unknown). An entry whose set expired can be taken over
--          by another order under the same ID once that order is found to
--          hold nothing (stock_dir_bind.lua, stock_dir_check.lua); the
--          entry itself never expires while a successful attempt may count
--          on it.
-- Reply    1 if the entry was deleted, 0 otherwise (another identity, or
--          other attempts still on it, or a successful one).
--
-- Only an attempt in the entry's live set leaves it: an ended entry, or
-- one whose set expired (or that has none: written on one server, or by
-- Migrate), is the order's, which attempts no longer decide. An attempt
-- that succeeded never leaves, so an entry some successful Deduct counts
-- on is never deleted here. Running it twice is safe.
local id, ident, token = ARGV[1], ARGV[2], ARGV[3]
local d = dir_decode(redis.call('HGET', KEYS[1], id))
if not d or d.id ~= ident or d.e or not dir_attempts(d) or not has_token(d.toks, token) then return 0 end
local left = without_token(d.toks, token)
if left ~= '' then
  local lease = tonumber(ARGV[4])
  d.toks = left
  if lease > 0 then d.lease = clock() + lease end
  redis.call('HSET', KEYS[1], id, dir_encode(d))
  return 0
end
redis.call('HDEL', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
return 1
