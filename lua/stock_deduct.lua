-- stock_deduct.lua: place the holds of the lines that share one slot of one
-- or more orders, all of an order's lines or none, for one attempt of a
-- Deduct of each order. The orders of one call (concurrent Deducts coalesced
-- per slot) are taken one after another, each against the state the ones
-- before it left, each with its own reply.
--
-- KEYS     per order j, 4 per line i (i = 1..n_j):
--            <p>:{sku}:state   hash avail, held, sold, limit, hold_ms,
--                              max_ms, ver
--            <p>:{sku}:holds   zset order ID -> deadline ms
--            <p>:{sku}:users   hash user -> units held + bought
--            <p>:{sku}:o:<id>  hash record st, qty, user, dl, mx, id, at
-- ARGV     per order j, 12 + n_j values:
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
--          across their groups), '0' not to;
--          the latest deadline and the latest bound new lines may get (ms,
--          from the hold times of all the order's SKUs), or 0 for none:
--          they never move lines already held;
--          n_j; then the qty of each line i
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
--          found is 1 if a line before it had a record of the order.
--
-- One order, one deadline: new lines get the earliest of the deadline so
-- far and the deadlines of the order's held lines here; an order with
-- neither (new) gets now + its own hold time, or + the shortest hold time
-- of the new lines' SKUs without one, capped by the latest deadline new
-- lines may get. Held lines with a later deadline are moved to it. One
-- bound likewise (field mx): the earliest of the bound so far and the
-- bounds of the held lines here (their dl for a record written without
-- mx), or for a new order now + the shortest maximum hold time of the new
-- lines' SKUs (max_ms; hold_ms for a state written without it), capped
-- likewise. So a line of a told-yes order never gets a deadline past its
-- bound; only an attempt whose own hold time is too long writes one, and
-- its check refuses it (a later attempt that finds such lines drops them).
--
-- The record's at field lists the attempts that count on the hold (a new
-- record: this attempt; a held record of the same identity found here: this
-- attempt is added). An attempt that fails removes itself
-- (stock_release.lua, mode 'drop'), and a hold is dropped only when no
-- attempt is left on it, so an undo never removes what another attempt of
-- the same order counts on. A record without at (written by
-- stock_deduct_batch.lua, in one atomic step) is never dropped.
--
-- Every check of an order runs before any write of it, so each order is all
-- or nothing, and running the call twice takes the stock once: the second
-- run finds the records.
--
-- On a Redis Cluster the Store runs this script once per slot group, after
-- binding the order ID (stock_dir_bind.lua) in the same pipeline. Without
-- hash slots it runs stock_deduct_batch.lua instead, which binds the ID
-- inside the script.
-- deduct takes one order: its keys start after KEYS[k], its arguments at
-- ARGV[a]; n is its line count.
local function deduct(k, a, n)
  local now = tonumber(ARGV[a])
  local id, user, ident, token = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local dl = tonumber(ARGV[a + 5])
  if dl <= 0 then dl = nil end
  local own = tonumber(ARGV[a + 6])
  local bound = tonumber(ARGV[a + 7])
  if bound <= 0 then bound = nil end
  local check = ARGV[a + 8] == '1'
  local capdl, capbound = tonumber(ARGV[a + 9]), tonumber(ARGV[a + 10])
  local minmax, maxline = nil, 0
  local take, held = {}, {}
  local minhold = nil
  local found = 0
  local past = 0 -- a held line here has its deadline past its bound

  for i = 1, n do
    local b = k + 4 * (i - 1)
    local qty = tonumber(ARGV[a + 11 + i])
    local r = redis.call('HMGET', KEYS[b + 4], 'st', 'id', 'dl', 'at', 'mx')
    if r[1] then
      if r[2] ~= ident then return {'conflict', i, math.min(found, 1)} end
      local d = tonumber(r[3])
      if r[1] == 'held' and d <= now then return {'expired', i, 1} end
      if r[1] == 'expired' then return {'expired', i, 1} end
      if r[1] == 'reverted' or r[1] == 'refunded' then return {'closed', i, 1} end
      found = found + 1
      if r[1] == 'held' then
        local m = tonumber(r[5] or r[3])
        if d > m then past = 1 end
        held[#held + 1] = {b, d, r[4], m}
        if not dl or d < dl then dl = d end
        if not bound or m < bound then bound = m end
      end
    else
      local s = redis.call('HMGET', KEYS[b + 1], 'avail', 'limit', 'hold_ms', 'held', 'ver', 'max_ms')
      -- A state without hold_ms is not a SKU on sale (only PutOnSale writes it).
      if not s[1] or not s[3] then return {'unknown_sku', i, math.min(found, 1)} end
      if tonumber(s[1]) < qty then return {'sold_out', i, math.min(found, 1)} end
      local limit = tonumber(s[2] or '0')
      if limit > 0 then
        if user == '' then return {'need_user', i, math.min(found, 1)} end
        local had = tonumber(redis.call('HGET', KEYS[b + 3], user) or '0')
        if had + qty > limit then return {'limit', i, math.min(found, 1)} end
      end
      local h = tonumber(s[3])
      if not minhold or h < minhold then minhold = h end
      local mh = tonumber(s[6] or s[3])
      if not minmax or mh < minmax then minmax, maxline = mh, i end
      take[#take + 1] = {b, qty, tonumber(s[1]), tonumber(s[4] or '0'), tonumber(s[5] or '0')}
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
  local sdl = string.format('%d', dl or 0)
  local sbound = string.format('%d', bound or 0)

  for _, t in ipairs(take) do
    local b, qty = t[1], t[2]
    redis.call('HSET', KEYS[b + 1], 'avail', string.format('%d', t[3] - qty),
      'held', string.format('%d', t[4] + qty), 'ver', string.format('%d', t[5] + 1))
    if user ~= '' then redis.call('HINCRBY', KEYS[b + 3], user, qty) end
    redis.call('ZADD', KEYS[b + 2], sdl, id)
    -- A new record, with no TTL: a hold keeps its record until it is
    -- confirmed or returned, which gives it one.
    redis.call('HSET', KEYS[b + 4], 'st', 'held', 'qty', qty, 'user', user, 'dl', sdl, 'mx', sbound, 'id', ident, 'at', token)
  end
  for _, h in ipairs(held) do
    local b, d, at, m = h[1], h[2], h[3], h[4]
    if d > dl then
      redis.call('HSET', KEYS[b + 4], 'dl', sdl)
      redis.call('ZADD', KEYS[b + 2], 'XX', sdl, id)
    end
    if m > bound then redis.call('HSET', KEYS[b + 4], 'mx', sbound) end
    if at and at ~= '' and not string.find(' ' .. at .. ' ', ' ' .. token .. ' ', 1, true) then
      redis.call('HSET', KEYS[b + 4], 'at', at .. ' ' .. token)
    end
  end
  return {'ok', dl or 0, #take, found, bound or 0, minmax or 0, maxline, past}
end

local out = {}
local k, a = 0, 1
while a <= #ARGV do
  local n = tonumber(ARGV[a + 11])
  out[#out + 1] = deduct(k, a, n)
  k, a = k + 4 * n, a + 12 + n
end
return out
