-- stock_deduct.lua: place the holds of an order's lines that share one slot,
-- all of them or none.
--
-- KEYS     4 per line i (i = 1..n), at 4*(i-1)+1 ..:
--            <p>:{sku}:state   hash avail, held, sold, limit, hold_ms, ver
--            <p>:{sku}:holds   zset order ID -> deadline ms
--            <p>:{sku}:users   hash user -> units held + bought
--            <p>:{sku}:o:<id>  hash record st, qty, user, dl, id
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  user ID, or '' for none
-- ARGV[4]  the order's identity (user + "\n" + canonical signature)
-- ARGV[5]  retention ms (a held record has no TTL: it gets one, the
--          retention, when it is confirmed or returned)
-- ARGV[5+i] qty of line i
-- Reply    {'ok', latest deadline ms of the order's lines} when every line
--          is held (newly or already) or confirmed; otherwise
--          {code, i} naming the first failing line, with nothing written:
--          'unknown_sku', 'sold_out', 'limit', 'need_user', 'conflict'
--          (the ID holds other items), 'expired', 'closed' (reverted).
--
-- Every check runs before any write, so the script is all or nothing, and
-- running it twice takes the stock once: the second run finds the records.
--
-- On a Redis Cluster the Store runs this script once per slot group, after
-- binding the order ID with SET NX GET in the same pipeline (the directory
-- entry lives in another slot, so it cannot be in KEYS here). Without hash
-- slots it runs stock_deduct_batch.lua instead, which binds the ID inside
-- the script.
local now = tonumber(ARGV[1])
local id, user, ident = ARGV[2], ARGV[3], ARGV[4]
local keep = tonumber(ARGV[5])
local n = #KEYS / 4
local take = {}
local latest = 0

for i = 1, n do
  local b = 4 * (i - 1)
  local qty = tonumber(ARGV[5 + i])
  local r = redis.call('HMGET', KEYS[b + 4], 'st', 'id', 'dl')
  if r[1] then
    if r[2] ~= ident then return {'conflict', i} end
    local dl = tonumber(r[3])
    if r[1] == 'held' and dl <= now then return {'expired', i} end
    if r[1] == 'expired' then return {'expired', i} end
    if r[1] == 'reverted' or r[1] == 'refunded' then return {'closed', i} end
    if dl > latest then latest = dl end
  else
    local s = redis.call('HMGET', KEYS[b + 1], 'avail', 'limit', 'hold_ms', 'held', 'ver')
    -- A state without hold_ms is not a SKU on sale (only PutOnSale writes it).
    if not s[1] or not s[3] then return {'unknown_sku', i} end
    if tonumber(s[1]) < qty then return {'sold_out', i} end
    local limit = tonumber(s[2] or '0')
    if limit > 0 then
      if user == '' then return {'need_user', i} end
      local had = tonumber(redis.call('HGET', KEYS[b + 3], user) or '0')
      if had + qty > limit then return {'limit', i} end
    end
    local dl = now + tonumber(s[3])
    if dl > latest then latest = dl end
    take[#take + 1] = {b, qty, dl, tonumber(s[1]), tonumber(s[4] or '0'), tonumber(s[5] or '0')}
  end
end

for _, t in ipairs(take) do
  local b, qty, dl = t[1], t[2], t[3]
  redis.call('HSET', KEYS[b + 1], 'avail', string.format('%d', t[4] - qty),
    'held', string.format('%d', t[5] + qty), 'ver', string.format('%d', t[6] + 1))
  if user ~= '' then redis.call('HINCRBY', KEYS[b + 3], user, qty) end
  redis.call('ZADD', KEYS[b + 2], dl, id)
  -- A new record, with no TTL: a hold keeps its record until it is
  -- confirmed or returned, which gives it one.
  redis.call('HSET', KEYS[b + 4], 'st', 'held', 'qty', qty, 'user', user, 'dl', dl, 'id', ident)
end
return {'ok', latest}
