-- stock_deduct_batch.lua: place the holds of one or more whole orders in one
-- call, on a client without hash slots (standalone, Sentinel): each order's
-- directory entry and every line are checked and written together. On a
-- Redis Cluster the keys of one call would span slots; there the Store runs
-- stock_deduct.lua per slot instead. Runs after stock_lib.lua.
--
-- KEYS     per order j, in order: 1 + 4*n_j keys
--            <p>:dir:{<shard>}  hash order ID -> directory entry (the
--                               order's shard)
--          then 4 per line i, as in stock_deduct.lua:
--            <p>:{sku}:state   hash avail, held, sold, limit, hold, max_ms,
--                              ver
--            <p>:{sku}:holds   zset order ID -> deadline ms
--            <p>:{sku}:users   hash user -> units held + bought
--            <p>:{sku}:lines   hash order ID -> line record
--          and last, once:
--            <p>:skus          set of the SKUs put on sale (the registry)
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV     then per order j: order ID, user ID ('' for none), identity
--          (user + "\n" + canonical signature), the order's own hold time
--          ms (Order.HoldTTL; 0 for none), n_j, then the n_j qtys
-- Reply    one integer per order j, in order: 0 when every line is held
--          (newly or already) or confirmed; otherwise code + 16 * i, i
--          naming its first failing line (i = 0: the directory), code one
--          of 1 'unknown_sku' (never put on sale), 2 'unavailable' (the
--          SKU's state is gone but the registry says it was put on sale,
--          or the registry itself is gone: the gate lost its data), 3
--          'sold_out', 4 'limit', 5 'need_user', 6 'conflict' (the ID holds
--          other items), 7 'expired', 8 'closed', 9 'hold_too_long' (the
--          own hold time passes the shortest maximum hold time of the
--          order's SKUs; i names the first line with that maximum). Small
--          integers cost the client nothing to read.
--
-- One order, one deadline: the new lines of an order get now + its own
-- hold time, or + the shortest hold time of its SKUs without one (or the
-- deadline of its held lines, if earlier). One bound (mx, the latest
-- deadline stock_extend.lua may set): now + the shortest maximum hold time
-- of its SKUs (max_ms; hold for a state written without it), or the bound
-- of its held lines, if earlier.
--
-- Each order is all or nothing on its own, and is checked against the
-- state left by the orders before it in the call. Its directory entry is
-- checked last and written (at the end of the call) only once every line
-- has passed, so a failed order writes nothing and its ID stays free; a
-- conflict outranks a failed line. An entry or record lives as long as the
-- order holds stock; once the order ends, Retention more (their e). Running
-- the call twice takes the stock once: the second run finds the entries
-- and records.
--
-- Every read and write is one command per key and call, whatever the
-- number of orders: HMGET of the directory shards, the lines, the states
-- and the users; then HSET of each state, lines, users and shard, and one
-- ZADD per SKU. An order costs field writes in them, and no key. Numbers
-- go out as the decimal strings they came in as where they can (the
-- quantities, a new user's count), and each deadline and bound of the
-- call is formatted once: a number-to-string conversion costs a Redis
-- Lua script more than a hash write.
local now = tonumber(ARGV[1])
local registry = KEYS[#KEYS]
local nargv = #ARGV

-- First pass: the fields each key's one HMGET reads (a field asked twice
-- is read twice, harmlessly).
local want = {}
local function ask(key, field)
  local l = want[key]
  if l then l[#l + 1] = field else want[key] = {field} end
end
do
  local k, a = 1, 2
  while a <= nargv do
    local id, user, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 4])
    ask(KEYS[k], id)
    for b = k + 1, k + 4 * n - 3, 4 do
      ask(KEYS[b + 3], id)
      if user ~= '' then ask(KEYS[b + 2], user) end
    end
    k, a = k + 1 + 4 * n, a + 5 + n
  end
end
-- got: key -> field -> value (false: none), read with one HMGET per key.
local got = {}
local function read(key)
  local g = got[key]
  if g then return g end
  g = {}
  local l = want[key]
  if l then
    for from = 1, #l, 1000 do
      local to = math.min(from + 999, #l)
      local v = redis.call('HMGET', key, unpack(l, from, to))
      for i = from, to do g[l[i]] = v[i - from + 1] end
    end
  end
  got[key] = g
  return g
end

-- skus: state key -> the SKU's counters as this call has left them, or
-- the code of a SKU that is not on sale.
local skus, touched = {}, {}
local function sku(b)
  local c = skus[KEYS[b]]
  if c ~= nil then return c end
  local s = redis.call('HMGET', KEYS[b], 'avail', 'limit', 'hold', 'held', 'ver', 'max_ms')
  if not s[1] or not s[3] then -- no hold: not a SKU on sale
    refuse_layout1(KEYS[b])
    -- Was it? A SKU the registry names, or a registry that is gone, is
    -- a gate that lost its data, not a SKU never on sale.
    local name = string.match(KEYS[b], '{([^}]*)}:state$')
    local lost = redis.call('EXISTS', registry) == 0 or
      redis.call('SISMEMBER', registry, name) == 1 or
      redis.call('SISMEMBER', registry, '{lost}') == 1
    skus[KEYS[b]] = lost and 'unavailable' or 'unknown_sku'
    return skus[KEYS[b]]
  end
  c = {b = b, avail = tonumber(s[1]), limit = tonumber(s[2] or '0'),
       hold = tonumber(s[3]), held = tonumber(s[4] or '0'),
       ver = tonumber(s[5] or '0'), max = tonumber(s[6] or s[3]),
       users = read(KEYS[b + 2]), changed = {}, nchanged = 0, holds = {}, recs = {}}
  skus[KEYS[b]] = c
  return c
end

local codes = {unknown_sku = 1, unavailable = 2, sold_out = 3, limit = 4, need_user = 5,
  conflict = 6, expired = 7, closed = 8, hold_too_long = 9}
-- ms holds the decimal form of each time this call wrote: the orders of
-- one call mostly share their deadline and bound.
local ms = {}
local function int(x)
  local v = ms[x]
  if not v then v = string.format('%d', x); ms[x] = v end
  return v
end
local dirty = {} -- shard key -> {field, value, ...} to write
local shards = {}
local out = {}
-- The lines an order takes, reused from order to order.
local tc, tb, tq, tqs = {}, {}, {}, {}

local k, a = 1, 2
while a <= nargv do
  local id, user, ident = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local own, n = ARGV[a + 3], tonumber(ARGV[a + 4])
  if own == '0' then own = 0 else own = tonumber(own) end
  local code, at = nil, 0
  local nt, deadline, minhold = 0, nil, nil
  local bound, minmax, maxline = nil, nil, 0
  -- The directory entry: an ended one of this identity (still read) takes
  -- no new line: a line without a record is 'closed', as on a Cluster.
  local dk = KEYS[k]
  local dirs = read(dk)
  local d = dirs[id] and dir_decode(dirs[id])
  local ended = d and d.e and d.id == ident
  for i = 1, n do
    local b = k + 4 * i - 3
    local qs = ARGV[a + 4 + i]
    local v = read(KEYS[b + 3])[id]
    local r = v and rec_decode(v)
    if r then
      if r.id ~= ident then code = 'conflict'
      elseif r.st == 'expired' or (r.st == 'held' and r.dl <= now) then code = 'expired'
      elseif r.st == 'reverted' or r.st == 'refunded' then code = 'closed'
      elseif r.st == 'held' then
        if not deadline or r.dl < deadline then deadline = r.dl end
        if not bound or r.mx < bound then bound = r.mx end
      end
    elseif ended then
      code = 'closed'
    else
      local c = sku(b)
      local qty = tonumber(qs)
      if type(c) == 'string' then code = c
      elseif c.avail < qty then code = 'sold_out'
      elseif c.limit > 0 and user == '' then code = 'need_user'
      elseif c.limit > 0 and (tonumber(c.users[user]) or 0) + qty > c.limit then code = 'limit'
      else
        if not minhold or c.hold < minhold then minhold = c.hold end
        if not minmax or c.max < minmax then minmax, maxline = c.max, i end
        nt = nt + 1
        tc[nt], tb[nt], tq[nt], tqs[nt] = c, b, qty, qs
      end
    end
    if code then at = i; break end
  end
  if not code and minhold then
    if own > 0 and own > minmax then
      code, at = 'hold_too_long', maxline
    else
      local hold = minhold
      if own > 0 then hold = own end
      if not deadline or now + hold < deadline then deadline = now + hold end
      if not bound or now + minmax < bound then bound = now + minmax end
    end
  end
  -- A conflict outranks a failed line, and the entry is written only for
  -- an order that passed every check.
  if d and d.id ~= ident then code, at = 'conflict', 0 end
  if code then
    out[#out + 1] = codes[code] + 16 * at
  else
    if not d then
      local v = ident
      dirs[id] = v
      local w = dirty[dk]
      if not w then w = {}; dirty[dk] = w; shards[#shards + 1] = dk end
      w[#w + 1] = id
      w[#w + 1] = v
    end
    if nt > 0 then
      local sdl, sbound = int(deadline), int(bound - deadline)
      for t = 1, nt do
        local c, qs = tc[t], tqs[t]
        take_units(c, touched, user, tq[t], qs, id, sdl)
        local v = 'h' .. qs .. '\t' .. sdl .. '\t' .. sbound .. '\t' .. ident
        read(KEYS[tb[t] + 3])[id] = v
        local rs = c.recs
        rs[#rs + 1] = id
        rs[#rs + 1] = v
      end
    end
    out[#out + 1] = 0
  end
  k, a = k + 1 + 4 * n, a + 5 + n
end

-- Writes: every SKU once (state, holds, users, records), then every shard
-- that has new entries.
for _, c in ipairs(touched) do
  put_sku(c, KEYS[c.b], KEYS[c.b + 1], KEYS[c.b + 2])
  put('HSET', KEYS[c.b + 3], c.recs)
end
for _, dk in ipairs(shards) do put('HSET', dk, dirty[dk]) end
return out
