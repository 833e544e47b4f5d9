-- stock_deduct_hot.lua: place the holds of a batch of orders that all have
-- a line of each of the same k SKUs: the flash sale's shape (one hot SKU,
-- or a few sold together), with less work per order and per call than
-- stock_deduct_batch.lua and stock_deduct.lua. An order it cannot settle
-- as new (its ID has a record or a directory entry, ended or not: a
-- repeat, a conflict) is left untouched and answered 15, and so is every
-- order after it (so that the orders are decided in the call's order), and
-- every order when a SKU's state is missing (or, in mode 'slot', of another
-- generation than the orders' attempts read): the Store sends those through
-- the general script of the mode, which decides them exactly as it decides
-- any order. It needs nothing of stock_lib.lua (it decodes no record), so it
-- runs without it.
--
-- KEYS     4 per SKU j (j = 1..k, in the orders' line order):
--            <p>:{sku}:state   hash avail, held, sold, limit, hold, max_ms,
--                              ver, gen
--            <p>:{sku}:holds   zset order ID -> deadline ms
--            <p>:{sku}:users   hash user -> units held + bought
--            <p>:{sku}:lines   hash order ID -> line record
--          then, mode 'one': <p>:dir:{<shard>}, hash order ID -> directory
--          entry (the one shard of a directory on one server), then 1 per
--          SKU j: <p>:{sku}:hq, the hold queue, list "<deadline ms> <order
--          ID>" in arrival order, its deadlines never decreasing
-- ARGV[1]  mode 'one': now, in ms, from the caller's clock (not the
--          server's TIME); mode 'slot' (each attempt has its own now): the
--          generation (gen) of each SKU's state, in line order, joined by
--          spaces, as every order's attempt read it before it bound the
--          order ID ('' for a state it found missing or without gen)
-- ARGV[2]  mode: 'one' (one server: the orders' directory entries are
--          checked and written here, as stock_deduct_batch.lua does) or
--          'slot' (a slot of a Redis Cluster: each order is one attempt
--          whose ID its directory entry already names, as stock_deduct.lua
--          takes a single-group order)
-- ARGV[3]  k, the SKUs
-- ARGV     then per order: order ID, user ID ('' for none), identity (user
--          + "\n" + canonical signature), own hold time ms (0 for none), in
--          mode 'slot' the attempt's token and its now (ms, the caller's
--          clock when the attempt began, as stock_deduct.lua takes it),
--          then the units of each line j.
--          The order IDs of one call are distinct (the Store sends any
--          other batch through the general script).
-- Reply    one integer per order, in either mode: 0 held; code + 16 * line
--          (3 sold_out, 4 limit, 5 need_user, 9 hold_too_long), as
--          stock_deduct_batch.lua answers; or 15: not decided here.
--
-- The orders are taken one after another, each all or nothing against the
-- state the ones before it left; a new order's record (and directory
-- entry) are written as the general script writes them. In mode 'one' a
-- new hold whose deadline is not before the one at the tail of its SKU's
-- hold queue is appended to the queue, any other goes into the holds
-- zset, so the queue stays in deadline order (the reclaimer reads it from
-- its head). Mode 'slot' puts every hold into the zset: the queue keeps an
-- ended hold's entry until the holds before it leave, and on a Cluster an
-- order ID used again is bound (its directory entry written) before its
-- take writes a record, so in between the old entry would read as a hold
-- whose record was lost (see Store.Snapshot). Reads and writes
-- are one command per key and call. Running the call twice takes the stock
-- once: the second run finds the records (15, and the general script
-- answers them as repeats).

-- ARGV as a local: an order's arguments are read from it many times;
-- the functions too (call is redis.call), looked up once per call.
local ARGV, tonumber, format, unpack, call = ARGV, tonumber, string.format, unpack, redis.call
local slot, k = ARGV[2] == 'slot', tonumber(ARGV[3])
local now = not slot and tonumber(ARGV[1])
local skip = slot and 6 or 4 -- an order's arguments before its units
local stride = skip + k
local n = (#ARGV - 3) / stride
-- out and us are made with room for n values (ARGV's first n, each
-- replaced before it is read; us is read up to nus only): cheaper than
-- growing them one value at a time. Until the orders' replies replace
-- them, out holds their IDs (the fields the records and entries are read
-- by).
local out = {unpack(ARGV, 1, n)}

-- The SKUs' counts, by line j (held and ver as read: the call adds
-- what the orders took, and how many took).
local avail, limit, held, ver, avail0 = {}, {}, {}, {}, {}
local minhold, minmax, maxline -- of the order's SKUs (every order has them all)
local gens = slot and {} -- mode 'slot': the states' generations
for j = 1, k do
  local b = 4 * j - 3
  local s -- gen is read in mode 'slot' only (mode 'one' has no use for it)
  if slot then
    s = call('HMGET', KEYS[b], 'avail', 'limit', 'hold', 'held', 'ver', 'max_ms', 'gen')
  else
    s = call('HMGET', KEYS[b], 'avail', 'limit', 'hold', 'held', 'ver', 'max_ms')
  end
  if not s[1] or not s[3] then
    -- Not on sale, lost, or of key layout 1: the general script tells.
    for i = 1, n do out[i] = 15 end
    return out
  end
  if slot then gens[j] = s[7] or '' end
  local hold = tonumber(s[3])
  local max = (not s[6] or s[6] == s[3]) and hold or tonumber(s[6]) -- max_ms is often hold
  avail[j], limit[j] = tonumber(s[1]), tonumber(s[2] or '0')
  avail0[j] = avail[j]
  held[j], ver[j] = tonumber(s[4] or '0'), tonumber(s[5] or '0')
  if not minhold or hold < minhold then minhold = hold end
  if not minmax or max < minmax then minmax, maxline = max, j end
end
-- mode 'one': the deadline at the tail of each SKU's hold queue (false:
-- empty).
local qtail = {}
for j = 1, slot and 0 or k do
  local e = call('LINDEX', KEYS[4 * k + 1 + j], -1)
  qtail[j] = e and tonumber(string.sub(e, 1, string.find(e, ' ', 1, true) - 1))
end
if slot and table.concat(gens, ' ') ~= ARGV[1] then
  -- Recreated since the attempts read it: the general script tells.
  for i = 1, n do out[i] = 15 end
  return out
end

-- The orders' records (and entries), and their users' counts: one HMGET
-- per key.
local us, nus = {unpack(ARGV, 1, n)}, 0
local a = 4 -- an order's first argument (its ID)
for i = 1, n do
  out[i] = ARGV[a] -- the order's ID until its reply replaces it
  local u = ARGV[a + 1]
  if u ~= '' then nus = nus + 1; us[nus] = u end
  a = a + stride
end
-- first: the first order with a record (each SKU's lines) or a directory
-- entry (mode 'one': the directory, after the SKUs) (n + 1 for none); it
-- and every order after it are left.
local first = n + 1
for j = 1, slot and k or k + 1 do
  local v = call('HMGET', j <= k and KEYS[4 * j] or KEYS[4 * k + 1], unpack(out))
  for i = 1, first - 1 do
    if v[i] then first = i; break end
  end
end
local uv = {} -- by line: user -> count, as this call leaves it
for j = 1, k do
  uv[j] = {}
  if nus > 0 then
    local v, m = call('HMGET', KEYS[4 * j - 1], unpack(us, 1, nus)), uv[j]
    for i = 1, nus do
      local c = v[i]
      if c then m[us[i]] = c end
    end
  end
end

-- By line j: holds[j], queue[j], recs[j] the ZADD, RPUSH and HSET
-- arguments, users[j] the users' new counts, in decimal (nu arguments, on
-- every line: a user twice is written twice, the later count last); dirs
-- the directory's HSET arguments. Each is made at its first value.
local holds, queue, recs, users = {}, {}, {}, {}
local dirs, taken, nu = false, 0, 0
-- The decimal forms of now + minhold and minmax - minhold ('0' when they
-- are equal, as max_ms and hold often are), the now of
-- sdl, and the parts of a record and of a queue entry they make (every
-- string a call builds once is one the orders do not build each).
local sdl, sgap, snow, spre, ssp
local num = {} -- units (an argument) -> tonumber(units), for the ones seen before
a = 4
for i = 1, first - 1 do
  local code, at = 0, 0
  local dl, dln, pre, sp -- the order's deadline (a string, a number), its record's part from it, its queue entry's
  if slot then now = tonumber(ARGV[a + 5]) end
  local user, own = ARGV[a + 1], ARGV[a + 3]
  local q0 = a + skip - 1 -- ARGV index of line j's units: q0 + j
  for j = 1, k do
    local qs, lim = ARGV[q0 + j], limit[j]
    local qty = num[qs]
    if not qty then qty = tonumber(qs); num[qs] = qty end
    if avail[j] < qty then
      code = 3
    elseif lim > 0 then
      if user == '' then
        code = 5
      else
        local had = uv[j][user]
        if (had and tonumber(had) or 0) + qty > lim then code = 4 end
      end
    end
    if code ~= 0 then at = j; break end
  end
  if code == 0 and own ~= '0' then
    own = tonumber(own)
    if own > minmax then
      code, at = 9, maxline
    else
      dln = now + own
      dl = format('%d', dln)
      pre, sp = '\t' .. dl .. '\t' .. format('%d', minmax - own) .. '\t', dl .. ' '
    end
  end
  if code == 0 then
    local id, ident = ARGV[a], ARGV[a + 2]
    if not dl then
      if snow ~= now then
        sgap = sgap or minmax == minhold and '0' or format('%d', minmax - minhold)
        sdl, snow = format('%d', now + minhold), now
        spre, ssp = '\t' .. sdl .. '\t' .. sgap .. '\t', sdl .. ' '
      end
      dl, dln, pre, sp = sdl, now + minhold, spre, ssp
    end
    taken = taken + 1
    local r = 2 * taken -- the order's value in recs[j] and dirs
    if user ~= '' then nu = nu + 2 end
    for j = 1, k do
      local qs = ARGV[q0 + j]
      local qty = num[qs]
      avail[j] = avail[j] - qty
      if user ~= '' then
        -- A user new to the SKU holds what it takes: its decimal form
        -- is the order's own. The map keeps the count as a number (its
        -- decimal form would truncate a fraction, or wrap past int64,
        -- where the general script goes on from the number).
        local m = uv[j]
        local had = m[user]
        if had then
          had = tonumber(had) + qty
          m[user] = had
          had = format('%d', had)
        else
          had = qs
          m[user] = had
        end
        local u = users[j]
        if u then u[nu - 1], u[nu] = user, had else users[j] = {user, had} end
      end
      local tail = qtail[j]
      if not slot and (not tail or dln >= tail) then
        local q = queue[j]
        if q then q[#q + 1] = sp .. id else queue[j] = {sp .. id} end
        qtail[j] = dln
      else
        local h = holds[j]
        if h then
          local m = #h
          h[m + 1], h[m + 2] = dl, id
        else
          holds[j] = {dl, id}
        end
      end
      local rec
      if slot then rec = 'h' .. qs .. pre .. ident .. '\ta' .. ARGV[a + 4] else rec = 'h' .. qs .. pre .. ident end
      local rs = recs[j]
      if rs then rs[r - 1], rs[r] = id, rec else recs[j] = {id, rec} end
    end
    if not slot then -- mode 'slot': the entries are written already
      if dirs then dirs[r - 1], dirs[r] = id, ident else dirs = {id, ident} end
    end
  end
  if code ~= 0 then code = code + 16 * at end
  out[i] = code
  a = a + stride
end
for i = first, n do out[i] = 15 end

if taken > 0 then
  -- Every SKU's new counts before the first write: a count that is not a
  -- number fails the call before it writes anything.
  for j = 1, k do
    held[j], ver[j] = format('%d', held[j] + avail0[j] - avail[j]), format('%d', ver[j] + taken)
  end
  for j = 1, k do
    local b = 4 * j - 3
    call('HSET', KEYS[b], 'avail', format('%d', avail[j]), 'held', held[j], 'ver', ver[j])
    if holds[j] then call('ZADD', KEYS[b + 1], unpack(holds[j])) end
    if queue[j] then call('RPUSH', KEYS[4 * k + 1 + j], unpack(queue[j])) end
    if nu > 0 then call('HSET', KEYS[b + 2], unpack(users[j])) end
    call('HSET', KEYS[b + 3], unpack(recs[j]))
  end
  if not slot then call('HSET', KEYS[4 * k + 1], unpack(dirs)) end
end
return out
