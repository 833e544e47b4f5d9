-- stock_deduct_one.lua: place the hold of one order on one server, as
-- stock_deduct_hot.lua places a batch of one in mode 'one' (same KEYS,
-- same ARGV, same records, same reply), with fewer commands: an order
-- whose ID has a directory entry (a repeat, a conflict) is found by a read
-- before anything is written, as the hot script finds it (so a server that
-- refuses writes, at its maxmemory or without its replicas, still answers
-- it); an order's line records are not looked for before they are written
-- (HSETNX: a record found deletes what the call wrote and leaves the
-- order, answered 15), and an order refused looks for them before it
-- answers (found: left). The Store sends a batch of a single order of the
-- flash sale's shape here (Config.MaxBatch 1, or a lone caller). It needs
-- nothing of stock_lib.lua.
--
-- KEYS     as stock_deduct_hot.lua, mode 'one': 4 per SKU j (state, holds,
--          users, lines), the directory, then the hold queue of each SKU j
-- ARGV     now (ms, the caller's clock), 'one', k, then the order's ID,
--          user ID ('' for none), identity, own hold time ms (0 for none),
--          and the units of each line j
-- Reply    a list of one integer: 0 held; code + 16 * line (3 sold_out,
--          4 limit, 5 need_user, 9 hold_too_long); or 15: not decided here
--          (a repeat, a conflict, a SKU not on sale)
--
-- Counts are read as the hot script reads them (tonumber: a count that is
-- not a number fails the call only where the hot script's would fail),
-- and every read, and every count the writes need, comes before the first
-- write.

local tonumber, format, call = tonumber, string.format, redis.call
-- The arguments are the Store's numbers: read by arithmetic (s + 0), one
-- conversion where tonumber makes two.
local now, k = ARGV[1] + 0, ARGV[3] + 0
local id, user, ident, own = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local dir = KEYS[4 * k + 1]

-- st[j]: SKU j's state as HMGET reads it (missing: not on sale, lost, or
-- of key layout 1: the general script tells), its fields then replaced by
-- what the call needs: 1 avail, 2 limit, 4 held, 5 ver as numbers, 7 the
-- user's count, 8 the hold queue's tail deadline (false: empty).
local st, minhold, minmax, maxline = {}, nil, nil, nil
for j = 1, k do
  local s = call('HMGET', KEYS[4 * j - 3], 'avail', 'limit', 'hold', 'held', 'ver', 'max_ms')
  if not s[1] or not s[3] then return {15} end
  local hold = tonumber(s[3])
  local max = (not s[6] or s[6] == s[3]) and hold or tonumber(s[6])
  if not minhold or hold < minhold then minhold = hold end
  if not minmax or max < minmax then minmax, maxline = max, j end
  s[1], s[2], s[4], s[5] = tonumber(s[1]), tonumber(s[2] or '0'), tonumber(s[4] or '0'), tonumber(s[5] or '0')
  st[j] = s
end
if call('HEXISTS', dir, id) == 1 then return {15} end -- a repeat, a conflict

local code = 0
for j = 1, k do
  local s, qty = st[j], ARGV[7 + j] + 0
  local h = user ~= '' and call('HGET', KEYS[4 * j - 1], user)
  s[7] = h
  if s[1] < qty then
    code = 3 + 16 * j
  elseif s[2] > 0 then
    if user == '' then
      code = 5 + 16 * j
    elseif (h and tonumber(h) or 0) + qty > s[2] then
      code = 4 + 16 * j
    end
  end
  if code ~= 0 then break end
end
local hold = minhold
if code == 0 and own ~= '0' then
  hold = own + 0
  if hold > minmax then code = 9 + 16 * maxline end
end
if code ~= 0 then
  for j = 1, k do
    if call('HEXISTS', KEYS[4 * j], id) == 1 then return {15} end -- a record: left
  end
  return {code}
end

-- Every value the writes need, before the first write.
local dl = format('%d', now + hold)
local rec = '\t' .. dl .. '\t' .. format('%d', minmax - hold) .. '\t' .. ident
for j = 1, k do
  local s, qs = st[j], ARGV[7 + j]
  local qty = qs + 0
  local e = call('LINDEX', KEYS[4 * k + 1 + j], -1)
  s[1], s[4], s[5] = format('%d', s[1] - qty), format('%d', s[4] + qty), format('%d', s[5] + 1)
  s[7] = s[7] and format('%d', tonumber(s[7]) + qty) or qs
  s[8] = e and tonumber(string.sub(e, 1, string.find(e, ' ', 1, true) - 1))
end

for j = 1, k do
  if call('HSETNX', KEYS[4 * j], id, 'h' .. ARGV[7 + j] .. rec) == 0 then
    -- A record without a directory entry: take back what this call wrote.
    for m = 1, j - 1 do call('HDEL', KEYS[4 * m], id) end
    return {15}
  end
end
call('HSET', dir, id, ident)
for j = 1, k do
  local s, b = st[j], 4 * j - 3
  call('HSET', KEYS[b], 'avail', s[1], 'held', s[4], 'ver', s[5])
  if not s[8] or now + hold >= s[8] then
    call('RPUSH', KEYS[4 * k + 1 + j], dl .. ' ' .. id)
  else
    call('ZADD', KEYS[b + 1], dl, id)
  end
  if user ~= '' then call('HSET', KEYS[b + 2], user, s[7]) end
end
return {0}
