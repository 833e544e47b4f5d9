-- stock_deduct_hot.lua: place the holds of a batch of single-line orders
-- of one SKU, on a client without hash slots: the flash sale's shape (one
-- hot SKU, one line per order), with less work per order and per call than
-- stock_deduct_batch.lua. An order it cannot settle as new (its ID already
-- has a record or a directory entry: a repeat, a conflict), and every order
-- of a SKU whose state is missing, is left untouched and answered 15: the
-- Store sends those through stock_deduct_batch.lua, which decides them
-- exactly as it decides any order. Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{sku}:state   hash avail, held, sold, limit, hold, max_ms, ver
-- KEYS[2]  <p>:{sku}:holds   zset order ID -> deadline ms
-- KEYS[3]  <p>:{sku}:users   hash user -> units held + bought
-- KEYS[4]  <p>:{sku}:lines   hash order ID -> line record
-- KEYS[5]  <p>:dir:{<shard>} hash order ID -> directory entry (the one
--                            shard of a directory on one server)
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV     then per order: order ID, user ID ('' for none), identity (user
--          + "\n" + canonical signature), own hold time ms (0 for none),
--          units. The order IDs of one call are distinct (the Store sends
--          any other batch through stock_deduct_batch.lua).
-- Reply    one integer per order, as stock_deduct_batch.lua answers a
--          single-line order (0 held; code + 16: 3 sold_out, 4 limit, 5
--          need_user, 9 hold_too_long), or 15: not decided here.
--
-- The orders are taken one after another, each all or nothing against the
-- state the ones before it left; a new order's record and directory entry
-- are written as stock_deduct_batch.lua writes them. Reads and writes are
-- one command per key and call. Running the call twice takes the stock
-- once: the second run finds the records (15, and the batch script answers
-- them as repeats).
local now = tonumber(ARGV[1])
local n = (#ARGV - 1) / 5
local out = {}
local s = redis.call('HMGET', KEYS[1], 'avail', 'limit', 'hold', 'held', 'ver', 'max_ms')
if not s[1] or not s[3] then
  -- Not on sale, or lost: the batch script tells the two apart.
  for i = 1, n do out[i] = 15 end
  return out
end
local avail, limit, hold = tonumber(s[1]), tonumber(s[2] or '0'), tonumber(s[3])
local held, ver, max = tonumber(s[4] or '0'), tonumber(s[5] or '0'), tonumber(s[6] or s[3])

-- The orders' records and entries, and their users' counts: one HMGET each.
local ids, us, nus = {}, {}, 0
for i = 1, n do
  ids[i] = ARGV[5 * i - 3]
  local u = ARGV[5 * i - 2]
  if u ~= '' then nus = nus + 1; us[nus] = u end
end
local lv = redis.call('HMGET', KEYS[4], unpack(ids))
local dv = redis.call('HMGET', KEYS[5], unpack(ids))
local uv = {} -- user -> count, as this call leaves it
if nus > 0 then
  local v = redis.call('HMGET', KEYS[3], unpack(us))
  for i = 1, nus do uv[us[i]] = v[i] end
end

-- holds, recs, dirs: the ZADD and HSET arguments; users: the users' new
-- counts (a user twice is written twice, the later count last).
local holds, recs, dirs, users = {}, {}, {}, {}
local taken, nu = 0, 0
local sdl, sbound -- the decimal forms of now + hold, now + max
for i = 1, n do
  local a = 5 * i - 3
  local code = 0
  if (lv[i] and rec_decode(lv[i], now)) or (dv[i] and dir_decode(dv[i], now)) then
    code = 15
  else
    local user, own, qs = ARGV[a + 1], ARGV[a + 3], ARGV[a + 4]
    local qty = tonumber(qs)
    local dl
    if avail < qty then
      code = 3 + 16
    elseif limit > 0 and user == '' then
      code = 5 + 16
    elseif limit > 0 and (tonumber(uv[user]) or 0) + qty > limit then
      code = 4 + 16
    elseif own ~= '0' then
      own = tonumber(own)
      if own > max then code = 9 + 16 else dl = string.format('%d', now + own) end
    end
    if code == 0 then
      local id, ident = ARGV[a], ARGV[a + 2]
      if not dl then
        sdl = sdl or string.format('%d', now + hold)
        dl = sdl
      end
      sbound = sbound or string.format('%d', now + max)
      avail, held, ver = avail - qty, held + qty, ver + 1
      if user ~= '' then
        -- A user new to the SKU holds what it takes: its decimal form is
        -- the order's own.
        local had = uv[user]
        if had then had = tonumber(had) + qty else had = qs end
        uv[user] = had
        nu = nu + 1
        users[2 * nu - 1], users[2 * nu] = user, had
      end
      taken = taken + 1
      holds[2 * taken - 1], holds[2 * taken] = dl, id
      recs[2 * taken - 1], recs[2 * taken] = id, 'h' .. qs .. '\t' .. dl .. '\t' .. sbound .. '\t' .. ident
      dirs[2 * taken - 1], dirs[2 * taken] = id, ident
    end
  end
  out[i] = code
end

if taken > 0 then
  redis.call('HSET', KEYS[1], 'avail', string.format('%d', avail), 'held', string.format('%d', held),
    'ver', string.format('%d', ver))
  redis.call('ZADD', KEYS[2], unpack(holds))
  if nu > 0 then
    for i = 2, 2 * nu, 2 do
      if type(users[i]) == 'number' then users[i] = string.format('%d', users[i]) end
    end
    redis.call('HSET', KEYS[3], unpack(users))
  end
  redis.call('HSET', KEYS[4], unpack(recs))
  redis.call('HSET', KEYS[5], unpack(dirs))
end
return out
