-- stock_deduct_batch.lua: place the holds of one or more whole orders in one
-- call, on a client without hash slots (standalone, Sentinel): each order's
-- directory entry and every line are checked and written together. On a
-- Redis Cluster the keys of one call would span slots; there the Store runs
-- stock_deduct.lua per slot instead.
--
-- KEYS     per order j, in order: 1 + 4*n_j keys
--            <p>:order:{<id>}  string, the order's directory entry (identity)
--          then 4 per line i, as in stock_deduct.lua:
--            <p>:{sku}:state   hash avail, held, sold, limit, hold_ms,
--                              max_ms, ver
--            <p>:{sku}:holds   zset order ID -> deadline ms
--            <p>:{sku}:users   hash user -> units held + bought
--            <p>:{sku}:o:<id>  hash record st, qty, user, dl, mx, id
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
-- deadline of its held lines, if earlier). One bound (field mx, the
-- latest deadline stock_extend.lua may set): now + the shortest maximum
-- hold time of its SKUs (max_ms; hold_ms for a state written without it),
-- or the bound of its held lines, if earlier.
--
-- Each order is all or nothing on its own, and is checked against the
-- state left by the orders before it in the call. Its directory entry is
-- checked last and bound (written at the end of the call) only once every
-- line has passed, so a failed order writes nothing and its ID stays free;
-- a conflict outranks a failed line. The entry has no TTL while the order
-- holds stock, like the line records; it gets Retention when the order
-- ends. The entries, SKU counters, users and holds are kept in Lua tables
-- and written once per call (per SKU) at the end, with the line records. Running the call
-- twice takes the stock once: the second run finds the directory entries
-- and records. (Should a command raise an error midway, a directory entry
-- may be left without its records; a retry of that order completes it.)
--
-- Per order it costs, besides the checks, HSET of each line's record (no
-- TTL while held; its fields st, qty, user, dl, mx, id); per call of
-- several orders, one MGET of the directory entries, one EXISTS of the
-- line records (and one HMGET per line only when some record exists), one
-- MSET of the new entries (a call of one order: one HMGET per line and SET
-- NX GET of its entry); per SKU and call, one HMGET of the state, one of
-- the users, and one HSET of each plus one ZADD.
local now = tonumber(ARGV[1])
local registry = KEYS[#KEYS]
local first = 2 -- ARGV index of the first order

-- First pass: the users of each SKU in this call, read with one HMGET.
local want = {}
do
  local k, a = 1, first
  while a <= #ARGV do
    local user, n = ARGV[a + 1], tonumber(ARGV[a + 4])
    for i = 1, n do
      local b = k + 1 + 4 * (i - 1)
      local w = want[KEYS[b]]
      if not w then w = {list = {}, seen = {}}; want[KEYS[b]] = w end
      if user ~= '' and not w.seen[user] then
        w.seen[user] = true
        w.list[#w.list + 1] = user
      end
    end
    k, a = k + 1 + 4 * n, a + 5 + n
  end
end

-- skus: state key -> the SKU's counters as this call has left them.
local skus, touched = {}, {}
local function sku(b)
  local c = skus[KEYS[b]]
  if c ~= nil then return c end
  -- c is the SKU's counters, or the code of a SKU that is not on sale.
  local s = redis.call('HMGET', KEYS[b], 'avail', 'limit', 'hold_ms', 'held', 'ver', 'max_ms')
  if not s[1] or not s[3] then -- no hold_ms: not a SKU on sale
    -- Was it? A SKU the registry names, or a registry that is gone, is
    -- a gate that lost its data, not a SKU never on sale.
    local sku = string.match(KEYS[b], '{([^}]*)}:state$')
    local lost = redis.call('EXISTS', registry) == 0 or
      redis.call('SISMEMBER', registry, sku) == 1 or
      redis.call('SISMEMBER', registry, '{lost}') == 1
    skus[KEYS[b]] = lost and 'unavailable' or 'unknown_sku'
    return skus[KEYS[b]]
  end
  c = {b = b, avail = tonumber(s[1]), limit = tonumber(s[2] or '0'),
       hold = tonumber(s[3] or '0'), held = tonumber(s[4] or '0'),
       ver = tonumber(s[5] or '0'), max = tonumber(s[6] or s[3]),
       users = {}, changed = {}, holds = {}}
  local list = want[KEYS[b]].list
  if #list > 0 then
    local had = redis.call('HMGET', KEYS[b + 2], unpack(list))
    for i, u in ipairs(list) do c.users[u] = tonumber(had[i] or '0') end
  end
  skus[KEYS[b]] = c
  return c
end

local codes = {unknown_sku = 1, unavailable = 2, sold_out = 3, limit = 4, need_user = 5,
  conflict = 6, expired = 7, closed = 8, hold_too_long = 9}
local function int(x) return string.format('%d', x) end
-- dirs, recs: the directory entries and line records as this call left
-- them (false: none; nil: not read yet). In a call of several orders every
-- entry is read with one MGET, and when none of the call's line records
-- exists (new orders, the common case), one EXISTS says so and no record is
-- read one by one; a call of one order reads its own.
local dirs, recs = {}, {}
if #ARGV >= first + 5 + tonumber(ARGV[first + 4]) then
  local dk, rk = {}, {}
  local k, a = 1, first
  while a <= #ARGV do
    local n = tonumber(ARGV[a + 4])
    dk[#dk + 1] = KEYS[k]
    for i = 1, n do rk[#rk + 1] = KEYS[k + 4 * i] end
    k, a = k + 1 + 4 * n, a + 5 + n
  end
  for from = 1, #dk, 500 do
    local to = math.min(from + 499, #dk)
    local got = redis.call('MGET', unpack(dk, from, to))
    for i = from, to do dirs[dk[i]] = got[i - from + 1] end
  end
  local found = 0
  for from = 1, #rk, 500 do
    found = found + redis.call('EXISTS', unpack(rk, from, math.min(from + 499, #rk)))
  end
  if found == 0 then
    for _, key in ipairs(rk) do recs[key] = false end
  end
end
local newdirs = {} -- directory entries to write: key, identity, ...
local writes = {}  -- records to write: {key, qty, deadline, user, identity, bound}
local out = {}

local k, a = 1, first
while a <= #ARGV do
  local id, user, ident = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local own, n = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local code, at = nil, 0
  local take, deadline, minhold = {}, nil, nil
  local bound, minmax, maxline = nil, nil, 0
  for i = 1, n do
    local b = k + 1 + 4 * (i - 1)
    local qty = tonumber(ARGV[a + 4 + i])
    local r = recs[KEYS[b + 3]]
    if r == nil then
      local h = redis.call('HMGET', KEYS[b + 3], 'st', 'id', 'dl', 'mx')
      if h[1] then r = {st = h[1], id = h[2], dl = tonumber(h[3]), mx = tonumber(h[4] or h[3])} end
    end
    if r then
      if r.id ~= ident then code = 'conflict'
      elseif r.st == 'expired' or (r.st == 'held' and r.dl <= now) then code = 'expired'
      elseif r.st == 'reverted' or r.st == 'refunded' then code = 'closed'
      elseif r.st == 'held' then
        if not deadline or r.dl < deadline then deadline = r.dl end
        if not bound or r.mx < bound then bound = r.mx end
      end
    else
      local c = sku(b)
      if type(c) == 'string' then code = c
      elseif c.avail < qty then code = 'sold_out'
      elseif c.limit > 0 and user == '' then code = 'need_user'
      elseif c.limit > 0 and c.users[user] + qty > c.limit then code = 'limit'
      else
        if not minhold or c.hold < minhold then minhold = c.hold end
        if not minmax or c.max < minmax then minmax, maxline = c.max, i end
        take[#take + 1] = {c, b, qty, i}
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
  -- The directory entry last: a conflict outranks a failed line, and the
  -- entry is written only for an order that passed every check.
  local cur = dirs[KEYS[k]]
  if code then
    if cur == nil then cur = redis.call('GET', KEYS[k]) end
  elseif cur == nil then
    cur = redis.call('SET', KEYS[k], ident, 'NX', 'GET')
    dirs[KEYS[k]] = cur or ident
  elseif not cur then
    dirs[KEYS[k]] = ident
    newdirs[#newdirs + 1] = KEYS[k]
    newdirs[#newdirs + 1] = ident
  end
  if not code and cur == ident and #take > 0 then
    -- An entry kept from an ended order lives as long as the new holds.
    redis.call('PERSIST', KEYS[k])
  end
  if cur and cur ~= ident then code, at = 'conflict', 0 end
  if code then
    out[#out + 1] = codes[code] + 16 * at
  else
    local sdl, sbound = int(deadline or 0), int(bound or 0)
    for _, t in ipairs(take) do
      local c, b, qty = t[1], t[2], t[3]
      if not c.dirty then c.dirty = true; touched[#touched + 1] = c end
      c.avail, c.held, c.ver = c.avail - qty, c.held + qty, c.ver + 1
      if user ~= '' then
        c.users[user] = c.users[user] + qty
        c.changed[user] = true
      end
      c.holds[#c.holds + 1] = sdl
      c.holds[#c.holds + 1] = id
      recs[KEYS[b + 3]] = {st = 'held', id = ident, dl = deadline, mx = bound}
      writes[#writes + 1] = {KEYS[b + 3], ARGV[a + 4 + t[4]], sdl, user, ident, sbound}
    end
    out[#out + 1] = 0
  end
  k, a = k + 1 + 4 * n, a + 5 + n
end

-- Writes: every SKU once, then each taking order's entry and records.
for _, c in ipairs(touched) do
  redis.call('HSET', KEYS[c.b], 'avail', int(c.avail), 'held', int(c.held), 'ver', int(c.ver))
  redis.call('ZADD', KEYS[c.b + 1], unpack(c.holds))
  local fv = {}
  for u in pairs(c.changed) do
    fv[#fv + 1] = u
    fv[#fv + 1] = int(c.users[u])
  end
  if #fv > 0 then redis.call('HSET', KEYS[c.b + 2], unpack(fv)) end
end
for from = 1, #newdirs, 500 do
  redis.call('MSET', unpack(newdirs, from, math.min(from + 499, #newdirs)))
end
for _, w in ipairs(writes) do
  -- A new record, with no TTL: a hold keeps its record until it is
  -- confirmed or returned, which gives it one.
  redis.call('HSET', w[1], 'st', 'held', 'qty', w[2], 'user', w[4], 'dl', w[3], 'mx', w[6], 'id', w[5])
end
return out
