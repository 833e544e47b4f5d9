-- stock_dir_bind.lua: bind order IDs to their identities, one attempt of a
-- Deduct each, on a Redis Cluster (a directory entry's slot is not its
-- lines'). The orders of one call share a directory shard (concurrent
-- Deducts batched per slot bind together). Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:dir:{<shard>}     hash order ID -> directory entry: the
--                                order's identity, and the attempts that
--                                bound it and have not given up
-- ARGV     per order: order ID, identity (user + "\n" + canonical
--          signature), the attempt's token (random, one per Deduct call)
-- Reply    one reply per order: 'new' (the entry was created), 'same' (it
--          already held this identity: another attempt, or a resend of
--          this one), 'ended' (it holds this identity and has ended: the
--          order is over, and the attempt takes nothing new; nothing
--          written), 'conflict' (it holds another identity; nothing
--          written), or {'stale', identity} (it holds another identity, has
--          not ended and has no attempt set: no attempt has bound it for a
--          lease, see stock_dir_release.lua; nothing written: the caller
--          checks whether that order holds anything, and may delete the
--          entry with stock_dir_check.lua and bind again).
--
-- A new entry lives as long as the order's holds, and gets Retention when
-- the order ends (stock_dir_keep.lua). An attempt that fails leaves the set
-- (stock_dir_release.lua); the last one to leave deletes the entry, so a
-- failed order frees its ID and a live one never loses it. An attempt that
-- binds a live entry whose set has expired cannot know which attempts
-- counted on it (a successful one never leaves): it adds '?' to the set, so
-- that no leaving attempt deletes the entry of an order that may hold
-- stock. Running it twice is running it once: the token is already in the
-- set.
local out = {}
for a = 1, #ARGV, 3 do
  local id, ident, token = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local d = dir_decode(redis.call('HGET', KEYS[1], id))
  if not d then
    redis.call('HSET', KEYS[1], id, dir_encode({id = ident, lease = 0, toks = token}))
    out[#out + 1] = 'new'
  elseif d.id ~= ident then
    if not d.e and not dir_attempts(d) then
      out[#out + 1] = {'stale', d.id}
    else
      out[#out + 1] = 'conflict'
    end
  elseif d.e then
    out[#out + 1] = 'ended'
  else
    local toks = '?'
    if dir_attempts(d) then toks = d.toks end
    if not has_token(toks, token) then toks = toks .. ',' .. token end
    -- The set lives as long as the entry from now on.
    d.toks, d.lease = toks, 0
    redis.call('HSET', KEYS[1], id, dir_encode(d))
    out[#out + 1] = 'same'
  end
end
return out
