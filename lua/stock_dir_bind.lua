-- stock_dir_bind.lua: bind an order ID to its identity for one attempt of a
-- Deduct on a Redis Cluster (the directory entry's slot is not its lines').
--
-- KEYS[1]  <p>:order:{<id>}      string: the order's identity
-- KEYS[2]  <p>:bind:{<id>}       set: the attempts that bound the entry
--                                and have not given up
-- ARGV[1]  the order's identity (user + "\n" + canonical signature)
-- ARGV[2]  the attempt's token (random, one per Deduct call)
-- Reply    'new' (the entry was created), 'same' (it already held this
--          identity: another attempt, or a resend of this one),
--          'conflict' (it holds another identity; nothing written), or
--          {'stale', identity} (it holds another identity, has no TTL and
--          no attempt set: no attempt has bound it for a lease, see
--          stock_dir_release.lua; nothing written: the caller checks
--          whether that order holds anything, and may take the entry over
--          with stock_dir_takeover.lua).
--
-- A new entry has no TTL, like a held line's record: it lives as long as
-- the order's holds, and gets one (Retention) when the order ends
-- (stock_dir_keep.lua). An attempt that fails leaves the set
-- (stock_dir_release.lua); the last one to leave deletes it, so a failed
-- order frees its ID and a live one never loses it. An attempt that binds
-- an entry without a TTL whose set has expired cannot know which attempts
-- counted on it (a successful one never leaves): it adds '?' to the set,
-- so that no leaving attempt deletes the entry of an order that may hold
-- stock. Running it twice is running it once: the token is already in the
-- set.
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[2])
  redis.call('SADD', KEYS[2], ARGV[2])
  return 'new'
end
local ttl = redis.call('PTTL', KEYS[1])
if cur ~= ARGV[1] then
  if ttl == -1 and redis.call('EXISTS', KEYS[2]) == 0 then return {'stale', cur} end
  return 'conflict'
end
if ttl == -1 and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('SADD', KEYS[2], '?')
end
redis.call('SADD', KEYS[2], ARGV[2])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
else
  redis.call('PERSIST', KEYS[2])
end
return 'same'
