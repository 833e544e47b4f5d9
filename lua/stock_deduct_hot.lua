-- stock_deduct_hot.lua: place the holds of a batch of single-line orders
-- of one SKU: the flash sale's shape (one hot SKU, one line per order),
-- with less work per order and per call than stock_deduct_batch.lua and
-- stock_deduct.lua. An order it cannot settle as new (its ID has a record
-- or a directory entry, ended or not: a repeat, a conflict) is left
-- untouched and answered 15, and so is every order of a SKU whose state is
-- missing: the Store sends those through the general script of the mode,
-- which decides them exactly as it decides any order. It needs nothing of
-- stock_lib.lua (it decodes no record), so it runs without it.
--
-- KEYS[1]  <p>:{sku}:state   hash avail, held, sold, limit, hold, max_ms, ver
-- KEYS[2]  <p>:{sku}:holds   zset order ID -> deadline ms
-- KEYS[3]  <p>:{sku}:users   hash user -> units held + bought
-- KEYS[4]  <p>:{sku}:lines   hash order ID -> line record
-- KEYS[5]  mode 'one': <p>:dir:{<shard>}, hash order ID -> directory entry
--          (the one shard of a directory on one server)
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  mode: 'one' (one server: the orders' directory entries are
--          checked and written here, as stock_deduct_batch.lua does) or
--          'slot' (a slot of a Redis Cluster: each order is one attempt,
--          its ID bound in the same pipeline, as stock_deduct.lua takes a
--          single-group order)
-- ARGV     then per order: order ID, user ID ('' for none), identity (user
--          + "\n" + canonical signature), own hold time ms (0 for none),
--          units; in mode 'slot' also the attempt's token. The order IDs of
--          one call are distinct (the Store sends any other batch through
--          the general script).
-- Reply    one reply per order, as the general script of the mode answers
--          a single-line order: mode 'one' an integer (0 held; code + 16:
--          3 sold_out, 4 limit, 5 need_user, 9 hold_too_long); mode 'slot'
--          {'ok', deadline, 1, 0, bound, maxhold, 1, 0} or {code, 1, 0}
--          ('sold_out', 'limit', 'need_user', 'hold_too_long'); or 15: not
--          decided here.
--
-- The orders are taken one after another, each all or nothing against the
-- state the ones before it left; a new order's record (and directory
-- entry) are written as the general script writes them. Reads and writes
-- are one command per key and call. Running the call twice takes the stock
-- once: the second run finds the records (15, and the general script
-- answers them as repeats).
local now, slot = tonumber(ARGV[1]), ARGV[2] == 'slot'
local stride = slot and 6 or 5
local n = (#ARGV - 2) / stride
local out = {}
local s = redis.call('HMGET', KEYS[1], 'avail', 'limit', 'hold', 'held', 'ver', 'max_ms')
if not s[1] or not s[3] then
  -- Not on sale, lost, or of key layout 1: the general script tells.
  for i = 1, n do out[i] = 15 end
  return out
end
local avail, limit, hold = tonumber(s[1]), tonumber(s[2] or '0'), tonumber(s[3])
local held, ver, max = tonumber(s[4] or '0'), tonumber(s[5] or '0'), tonumber(s[6] or s[3])

-- The orders' records (and entries), and their users' counts: one HMGET
-- each.
local ids, us, nus = {}, {}, 0
for i = 1, n do
  local a = 3 + stride * (i - 1)
  ids[i] = ARGV[a]
  local u = ARGV[a + 1]
  if u ~= '' then nus = nus + 1; us[nus] = u end
end
local lv = redis.call('HMGET', KEYS[4], unpack(ids))
local dv = slot and {} or redis.call('HMGET', KEYS[5], unpack(ids))
local uv = {} -- user -> count, as this call leaves it
if nus > 0 then
  local v = redis.call('HMGET', KEYS[3], unpack(us))
  for i = 1, nus do uv[us[i]] = v[i] end
end

-- The refusals of mode 'slot', by code.
local refusal = {}
if slot then
  refusal = {[3] = {'sold_out', 1, 0}, [4] = {'limit', 1, 0}, [5] = {'need_user', 1, 0},
             [9] = {'hold_too_long', 1, 0}}
end

-- holds, recs, dirs: the ZADD and HSET arguments; users: the users' new
-- counts (a user twice is written twice, the later count last).
local holds, recs, dirs, users = {}, {}, {}, {}
local taken, nu = 0, 0
local sdl, sgap -- the decimal forms of now + hold, max - hold
for i = 1, n do
  local a = 3 + stride * (i - 1)
  local code = 0
  local dl, dln -- the order's deadline, as a string and a number
  if lv[i] or dv[i] then
    code = 15
  else
    local user, own, qty = ARGV[a + 1], ARGV[a + 3], tonumber(ARGV[a + 4])
    if avail < qty then
      code = 3
    elseif limit > 0 and user == '' then
      code = 5
    elseif limit > 0 and (tonumber(uv[user]) or 0) + qty > limit then
      code = 4
    elseif own ~= '0' then
      own = tonumber(own)
      if own > max then code = 9 else dln = now + own; dl = string.format('%d', dln) end
    end
    local gap -- the bound's distance from the deadline
    if dl then gap = string.format('%d', max - own) end
    if code == 0 then
      local id, ident, qs = ARGV[a], ARGV[a + 2], ARGV[a + 4]
      if not dl then
        sdl = sdl or string.format('%d', now + hold)
        sgap = sgap or string.format('%d', max - hold)
        dl, dln, gap = sdl, now + hold, sgap
      end
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
      local rec = 'h' .. qs .. '\t' .. dl .. '\t' .. gap .. '\t' .. ident
      if slot then rec = rec .. '\ta' .. ARGV[a + 5] end
      recs[2 * taken - 1], recs[2 * taken] = id, rec
      dirs[2 * taken - 1], dirs[2 * taken] = id, ident
    end
  end
  if not slot then
    if code ~= 0 and code ~= 15 then code = code + 16 end
    out[i] = code
  elseif code == 0 then
    out[i] = {'ok', dln, 1, 0, now + max, max, 1, 0}
  elseif code == 15 then
    out[i] = 15
  else
    out[i] = refusal[code]
  end
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
  if not slot then redis.call('HSET', KEYS[5], unpack(dirs)) end
end
return out
