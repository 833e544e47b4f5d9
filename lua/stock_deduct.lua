-- stock_deduct.lua: place the holds of an order's lines that share one slot,
-- all of them or none, for one attempt of a Deduct.
--
-- KEYS     4 per line i (i = 1..n), at 4*(i-1)+1 ..:
--            <p>:{sku}:state   hash avail, held, sold, limit, hold_ms,
--                              max_ms, ver
--            <p>:{sku}:holds   zset order ID -> deadline ms
--            <p>:{sku}:users   hash user -> units held + bought
--            <p>:{sku}:o:<id>  hash record st, qty, user, dl, mx, id, at
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  user ID, or '' for none
-- ARGV[4]  the order's identity (user + "\n" + canonical signature)
-- ARGV[5]  the attempt's token (random, one per Deduct call)
-- ARGV[6]  the order's deadline so far (ms, from the groups taken before
--          this one), or 0 for none
-- ARGV[7]  the order's own hold time ms (Order.HoldTTL), or 0 for none
-- ARGV[8]  the order's bound so far (ms: the latest deadline ExtendHold may
--          set, from the groups taken before this one), or 0 for none
-- ARGV[9]  '1' to refuse an own hold time past the shortest maximum hold
--          time of the new lines here ('hold_too_long'; the Store sets it
--          for an order of one slot group and checks other orders itself,
--          across their groups), '0' not to
-- ARGV[9+i] qty of line i
-- Reply    {'ok', deadline, new, found, bound, maxhold, line} when every
--          line is held (newly or already) or confirmed: deadline is the
--          order's deadline after this group (0 if every line is
--          confirmed), new the lines taken now, found the lines that had a
--          record of the order already, bound the order's bound after this
--          group (0: none), maxhold the shortest maximum hold time (ms) of
--          the new lines and line the first line that has it (0, 0 when
--          none is new);
--          otherwise {code, i, found} naming the first failing line, with
--          nothing written: 'unknown_sku', 'sold_out', 'limit',
--          'need_user', 'conflict' (the ID holds other items), 'expired',
--          'closed' (reverted), 'hold_too_long' (ARGV[9] only); found is
--          1 if a line before it had a record of the order.
--
-- One order, one deadline: new lines get the earliest of ARGV[6], the
-- deadlines of the order's held lines here, and now + the order's own hold
-- time, or + the shortest hold time of the new lines' SKUs without one;
-- held lines with a later deadline are moved to it. One bound likewise
-- (field mx): the earliest of ARGV[8], the bounds of the held lines here
-- (their dl for a record written without mx) and now + the shortest
-- maximum hold time of the new lines' SKUs (max_ms; hold_ms for a state
-- written without it).
--
-- The record's at field lists the attempts that count on the hold (a new
-- record: this attempt; a held record of the same identity found here: this
-- attempt is added). An attempt that fails removes itself
-- (stock_release.lua, mode 'drop'), and a hold is dropped only when no
-- attempt is left on it, so an undo never removes what another attempt of
-- the same order counts on. A record without at (written by
-- stock_deduct_batch.lua, in one atomic step) is never dropped.
--
-- Every check runs before any write, so the script is all or nothing, and
-- running it twice takes the stock once: the second run finds the records.
--
-- On a Redis Cluster the Store runs this script once per slot group, after
-- binding the order ID (stock_dir_bind.lua) in the same pipeline. Without
-- hash slots it runs stock_deduct_batch.lua instead, which binds the ID
-- inside the script.
local now = tonumber(ARGV[1])
local id, user, ident, token = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local dl = tonumber(ARGV[6])
if dl <= 0 then dl = nil end
local own = tonumber(ARGV[7])
local bound = tonumber(ARGV[8])
if bound <= 0 then bound = nil end
local check = ARGV[9] == '1'
local minmax, maxline = nil, 0
local n = #KEYS / 4
local take, held = {}, {}
local minhold = nil
local found = 0

for i = 1, n do
  local b = 4 * (i - 1)
  local qty = tonumber(ARGV[9 + i])
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
  if not dl or now + hold < dl then dl = now + hold end
  if not bound or now + minmax < bound then bound = now + minmax end
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
return {'ok', dl or 0, #take, found, bound or 0, minmax or 0, maxline}
