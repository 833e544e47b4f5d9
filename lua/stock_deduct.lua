-- stock_deduct.lua: place the holds of the lines that share one slot of one
-- or more orders, all of an order's lines or none, for one attempt of a
-- Deduct of each order. The orders of one call (concurrent Deducts coalesced
-- per slot) are taken one after another, each against the state the ones
-- before it left, each with its own reply. Runs after stock_lib.lua.
--
-- KEYS     per order j, 4 per line i (i = 1..n_j):
--            <p>:{sku}:state   hash avail, held, sold, limit, hold,
--                              max_ms, ver, gen
--            <p>:{sku}:holds   zset order ID -> deadline ms
--            <p>:{sku}:users   hash user -> units held + bought
--            <p>:{sku}:lines   hash order ID -> line record
-- ARGV     per order j, 12 + 2 n_j values:
--          now, in ms, from the caller's clock (not the server's TIME);
--          order ID;
--          user ID, or '' for none;
--          the order's identity (user + "\n" + canonical signature);
--          the attempt's token (random, one per Deduct call);
--          the order's deadline so far (ms: from the groups taken before
--          this one), or 0 for none;
--          the order's own hold time ms (Order.HoldTTL), or 0 for none;
--          the order's bound so far (ms: the latest deadline ExtendHold may
--          set), or 0 for none;
--          '1' to refuse an own hold time past the shortest maximum hold
--          time of the new lines here ('hold_too_long'; the Store sets it
--          for an order of one slot group and checks other orders itself,
--          across their groups), '0' not to, 'e' for an order whose
--          directory entry has ended: it takes no new line (a line without
--          a record is 'closed');
--          the latest deadline and the latest bound new lines may get (ms,
--          from the hold times of all the order's SKUs), or 0 for none:
--          they never move lines already held;
--          n_j; then for each line i its qty and the generation (gen) of
--          its SKU's state that the attempt read before it bound the
--          order ID ('' for a state it found missing, or without gen)
-- Reply    a list of one reply per order j:
--          {'ok', deadline, new, found, bound, maxhold, line, past} when every
--          line is held (newly or already) or confirmed: deadline is the
--          order's deadline after this group (0 if every line is
--          confirmed), new the lines taken now, found the lines that had a
--          record of the order already, bound the order's bound after this
--          group (0: none), maxhold the shortest maximum hold time (ms) of
--          the new lines and line the first line that has it (0, 0 when
--          none is new), past 1 when a held line found here has its
--          deadline past its bound (left by an attempt whose own hold time
--          was too long and that stopped before it was refused), else 0;
--          otherwise {code, i, found} naming the first failing line, with
--          nothing written: 'unknown_sku', 'sold_out', 'limit',
--          'need_user', 'conflict' (the ID holds other items), 'expired',
--          'closed' (reverted), 'hold_too_long' (with the check flag only);
--          found is 1 if a line before it had a record of the order; or
--          {'regen', i, found, gen} when a line to take new finds its SKU's
--          state of another generation than the attempt read (lost and
--          recreated since: a flush, a failover, then a rebuild), gen the
--          state's, with nothing written: the directory entry that named
--          the attempt may have been lost with it, so the attempt binds
--          again before it takes.
--
-- One order, one deadline: new lines get the earliest of the deadline so
-- far and the deadlines of the order's held lines here; an order with
-- neither (new) gets now + its own hold time, or + the shortest hold time
-- of the new lines' SKUs without one, capped by the latest deadline new
-- lines may get. Held lines with a later deadline are moved to it. One
-- bound likewise (mx): the earliest of the bound so far and the bounds of
-- the held lines here, or for a new order now + the shortest maximum hold
-- time of the new lines' SKUs (max_ms; hold for a state written without
-- it), capped likewise. So a line of a told-yes order never gets a
-- deadline past its bound; only an attempt whose own hold time is too long
-- writes one, and its check refuses it (a later attempt that finds such
-- lines drops them).
--
-- A record's attempts (a) are those that count on the hold (a new record:
-- this attempt; a held record of the same identity found here: this
-- attempt is added). An attempt that fails removes itself
-- (stock_release.lua, mode 'drop'), and a hold is dropped only when no
-- attempt is left on it, so an undo never removes what another attempt of
-- the same order counts on. A record without attempts (written by
-- stock_deduct_batch.lua, in one atomic step) is never dropped.
--
-- Every check of an order runs before any write of it, so each order is all
-- or nothing, and running the call twice takes the stock once: the second
-- run finds the records. The call reads each key once (HMGET of the lines,
-- the states, the users) and writes each once at its end (HSET of the
-- states, lines and users, a ZADD per SKU).
--
-- On a Redis Cluster the Store runs this script once per slot group, after
-- binding the order ID (HSETNX, or stock_dir_bind.lua). Without
-- hash slots it runs stock_deduct_batch.lua instead, which binds the ID
-- inside the script.

-- First pass: the fields each lines and users key is read for (a field
-- asked twice is read twice, harmlessly).
local want = {}
local function ask(key, field)
  local l = want[key]
  if l then l[#l + 1] = field else want[key] = {field} end
end
local nargv = #ARGV
do
  local k, a = 0, 1
  while a <= nargv do
    local id, user, n = ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 11])
    for b = k, k + 4 * n - 4, 4 do
      ask(KEYS[b + 4], id)
      if user ~= '' then ask(KEYS[b + 3], user) end
    end
    k, a = k + 4 * n, a + 12 + 2 * n
  end
end
local got = {} -- key -> field -> value (false: none)
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
-- Numbers read from the arguments, and times written: the orders of one
-- call mostly share them, and converting a number costs a script more
-- than a table lookup.
local nums, strs = {['0'] = 0}, {}
local function num(x)
  local v = nums[x]
  if not v then v = tonumber(x); nums[x] = v end
  return v
end
local function int(x)
  local v = strs[x]
  if not v then v = string.format('%d', x); strs[x] = v end
  return v
end

-- skus: state key -> the SKU's counters as this call has left them
-- (false: not on sale).
local skus, touched = {}, {}
local function sku(b)
  local c = skus[KEYS[b + 1]]
  if c ~= nil then return c end
  local s = redis.call('HMGET', KEYS[b + 1], 'avail', 'limit', 'hold', 'held', 'ver', 'max_ms', 'gen')
  -- A state without hold is not a SKU on sale (only PutOnSale writes it).
  if not s[1] or not s[3] then
    refuse_layout1(KEYS[b + 1])
    skus[KEYS[b + 1]] = false
    return false
  end
  c = {b = b, avail = tonumber(s[1]), limit = tonumber(s[2] or '0'), hold = tonumber(s[3]),
       held = tonumber(s[4] or '0'), ver = tonumber(s[5] or '0'), max = tonumber(s[6] or s[3]),
       gen = s[7] or '', users = read(KEYS[b + 3]), changed = {}, nchanged = 0, holds = {}}
  skus[KEYS[b + 1]] = c
  return c
end
local moves = {} -- {holds key, deadline, order ID}: held lines moved earlier
local dirty = {} -- lines key -> {order ID -> true}, records to write
local lkeys = {}
local function mark(key, id)
  local d = dirty[key]
  if not d then d = {}; dirty[key] = d; lkeys[#lkeys + 1] = key end
  d[id] = true
end

-- deduct takes one order: its keys start after KEYS[k], its arguments at
-- ARGV[a]; n is its line count.
-- The lines an order takes, reused from order to order.
local tb, tq, tqs, tc = {}, {}, {}, {}
local function deduct(k, a, n)
  local now = num(ARGV[a])
  local id, user, ident, token = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local dl = num(ARGV[a + 5])
  if dl <= 0 then dl = nil end
  local own = num(ARGV[a + 6])
  local bound = num(ARGV[a + 7])
  if bound <= 0 then bound = nil end
  local check = ARGV[a + 8] == '1'
  local capdl, capbound = num(ARGV[a + 9]), num(ARGV[a + 10])
  local minmax, maxline = nil, 0
  local nt, held = 0, nil
  local minhold = nil
  local found = 0
  local past = 0 -- a held line here has its deadline past its bound

  for i = 1, n do
    local b = k + 4 * (i - 1)
    local qs = ARGV[a + 10 + 2 * i]
    local v = read(KEYS[b + 4])[id]
    local r = v and rec_decode(v)
    if r then
      if r.id ~= ident then return {'conflict', i, math.min(found, 1)} end
      if r.st == 'held' and r.dl <= now then return {'expired', i, 1} end
      if r.st == 'expired' then return {'expired', i, 1} end
      if r.st == 'reverted' or r.st == 'refunded' then return {'closed', i, 1} end
      found = found + 1
      if r.st == 'held' then
        if r.dl > r.mx then past = 1 end
        held = held or {}
        held[#held + 1] = {b, r}
        if not dl or r.dl < dl then dl = r.dl end
        if not bound or r.mx < bound then bound = r.mx end
      end
    elseif ARGV[a + 8] == 'e' then
      return {'closed', i, math.min(found, 1)}
    else
      local c = sku(b)
      local qty = tonumber(qs)
      if not c then return {'unknown_sku', i, math.min(found, 1)} end
      if c.gen ~= ARGV[a + 11 + 2 * i] then return {'regen', i, math.min(found, 1), c.gen} end
      if c.avail < qty then return {'sold_out', i, math.min(found, 1)} end
      if c.limit > 0 then
        if user == '' then return {'need_user', i, math.min(found, 1)} end
        if (tonumber(c.users[user]) or 0) + qty > c.limit then return {'limit', i, math.min(found, 1)} end
      end
      if not minhold or c.hold < minhold then minhold = c.hold end
      if not minmax or c.max < minmax then minmax, maxline = c.max, i end
      nt = nt + 1
      tb[nt], tq[nt], tqs[nt], tc[nt] = b, qty, qs, c
    end
  end

  if check and minhold and own > 0 and own > minmax then
    return {'hold_too_long', maxline, math.min(found, 1)}
  end
  if minhold then
    local hold = minhold
    if own > 0 then hold = own end
    local ndl, nbound = now + hold, now + minmax
    if capdl > 0 and capdl < ndl then ndl = capdl end
    if capbound > 0 and capbound < nbound then nbound = capbound end
    if not dl then
      dl, bound = ndl, bound or nbound
    elseif not bound then
      bound = nbound
    end
    -- An order that holds lines already (here, or in the groups before
    -- this one: a retry completing it) gives its new lines its deadline
    -- and its bound, fixed when it was first taken: a relisting since
    -- does not lower them.
  end

  if nt > 0 then
    local sdl, sbound = int(dl), int(bound - dl)
    for t = 1, nt do
      local b, qs = tb[t], tqs[t]
      take_units(tc[t], touched, user, tq[t], qs, id, sdl)
      -- A new record: it lives until the hold is confirmed or returned.
      read(KEYS[b + 4])[id] = 'h' .. qs .. '\t' .. sdl .. '\t' .. sbound .. '\t' .. ident .. '\ta' .. token
      mark(KEYS[b + 4], id)
    end
  end
  if held then
    for _, h in ipairs(held) do
      local b, r = h[1], h[2]
      local changed = false
      if r.dl > dl then
        r.dl, changed = dl, true
        moves[#moves + 1] = {KEYS[b + 2], dl, id}
      end
      if r.mx > bound then r.mx, changed = bound, true end
      if r.at and r.at ~= '' and not has_token(r.at, token) then
        r.at, changed = r.at .. ',' .. token, true
      end
      if changed then
        read(KEYS[b + 4])[id] = rec_encode(r)
        mark(KEYS[b + 4], id)
      end
    end
  end
  return {'ok', dl or 0, nt, found, bound or 0, minmax or 0, maxline, past}
end

local out = {}
local k, a = 0, 1
while a <= nargv do
  local n = tonumber(ARGV[a + 11])
  out[#out + 1] = deduct(k, a, n)
  k, a = k + 4 * n, a + 12 + 2 * n
end

-- Writes: every SKU touched once (state, holds, users), then the records.
for _, c in ipairs(touched) do put_sku(c, KEYS[c.b + 1], KEYS[c.b + 2], KEYS[c.b + 3]) end
-- After the new holds: a line taken earlier in this call may have moved.
for _, m in ipairs(moves) do redis.call('ZADD', m[1], 'XX', m[2], m[3]) end
for _, key in ipairs(lkeys) do
  local g, fv = got[key], {}
  for id in pairs(dirty[key]) do
    fv[#fv + 1] = id
    fv[#fv + 1] = g[id]
  end
  put('HSET', key, fv)
end
return out
