-- stock_rebuild.lua: create a SKU's state from the record, only if the SKU
-- has none (create-if-absent): a state that exists, with whatever live holds
-- it counts, is left alone. With a claim, only if the SKU's rebuild claim
-- is still the caller's: no flush, and no other creation of the state,
-- since the caller read the record (a count read before a state was
-- created, sold from and lost again is stale). Runs after stock_lib.lua.
--
-- KEYS[1]      <p>:{sku}:state      hash avail, held, sold, limit, hold,
--                                   max_ms, ver, epoch, gen
-- KEYS[2]      <p>:{sku}:rb         string: the SKU's rebuild claim (the
--                                   token of the reader that claimed last)
-- KEYS[3]      <p>:{sku}:holds      zset order ID -> deadline ms
-- KEYS[4]      <p>:{sku}:lines      hash order ID -> line record
-- KEYS[4+j]    <p>:{sku}:rs:<op>    marker of restock operation j (1..m),
--                                   which the available units already
--                                   include
-- KEYS[5+m]    <p>:{sku}:hq         list "<deadline ms> <order ID>": the
--                                   hold queue
-- ARGV[1]      available units
-- ARGV[2]      per-user limit (0: none)
-- ARGV[3]      hold time ms
-- ARGV[4]      a new random generation (the new state's fence never
--              repeats)
-- ARGV[5]      marker lifetime ms (the Store's retention)
-- ARGV[6]      the caller's claim token, or '' to rebuild without a claim
-- ARGV[7]      m, the number of restock markers
-- ARGV[8]      maximum hold time ms (Listing.MaxHoldTTL, defaults filled)
-- ARGV[9]      now, in ms, from the caller's clock (not the server's TIME)
-- Reply        {'ok', epoch} (created, now or by a first run of this
--              call whose reply was lost; every claim is void) |
--              {'exists', epoch} | {'stale'} (the claim is gone or another
--              reader's); nothing written but for 'ok'
--
-- The new state's held count is the units (qty less ret) of the holds the gate still has
-- (a state hash lost alone keeps its holds zset, hold queue and records): their
-- Confirm, Revert or reclaim moves them out of it again. No hold is added
-- to a SKU without a state.
refuse_layout1(KEYS[1])
if redis.call('HEXISTS', KEYS[1], 'hold') == 1 then
  local e = redis.call('HMGET', KEYS[1], 'epoch', 'gen')
  -- The generation is drawn per call: a state that has it is this call's
  -- own, created by a first run whose reply was lost.
  if e[2] == ARGV[4] then return {'ok', tonumber(e[1] or '0')} end
  return {'exists', tonumber(e[1] or '0')}
end
if ARGV[6] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[6] then
  return {'stale'}
end
local m = tonumber(ARGV[7])
local now = tonumber(ARGV[9])
local held = 0
local ids, seen = redis.call('ZRANGE', KEYS[3], 0, -1), {}
for _, id in ipairs(ids) do seen[id] = true end
-- A hold whose deadline moved is in both.
for _, id in ipairs(q_ids(redis.call('LRANGE', KEYS[5 + m], 0, -1), seen)) do ids[#ids + 1] = id end
each_value(KEYS[4], ids, function(_, v)
  local r = rec_decode(v)
  if r and r.st == 'held' then held = held + r.qty - r.ret end
end)
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'avail', ARGV[1], 'limit', ARGV[2], 'hold', ARGV[3], 'gen', ARGV[4],
  'max_ms', ARGV[8], 'held', string.format('%d', held))
redis.call('HSETNX', KEYS[1], 'sold', 0)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
for i = 5, 4 + m do
  redis.call('SET', KEYS[i], 'r', 'PX', ARGV[5], 'NX')
end
return {'ok', redis.call('HINCRBY', KEYS[1], 'epoch', 1)}
