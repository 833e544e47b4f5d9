-- stock_deduct_one.lua: place the hold of one order on one server, as
-- stock_deduct_hot.lua places a batch of one in mode 'one': the same
-- KEYS, ARGV and reply, the same commands in the same order (each read
-- before any write: the state, the hold queue's tail, the order's line
-- records and directory entry, the user's counts; then the writes), the
-- same records written, with less Lua around them (no per-call tables of
-- a batch, a few strings). The Store sends a batch of a single order of
-- the flash sale's shape here (Config.MaxBatch 1, or a lone caller). It
-- needs nothing of stock_lib.lua.
--
-- KEYS     as stock_deduct_hot.lua, mode 'one': 4 per SKU j (state, holds,
--          users, lines), the directory, then the hold queue of each SKU j
-- ARGV     now (ms, the caller's clock), 'one', k, then the order's ID,
--          user ID ('' for none), identity, own hold time ms (0 for none),
--          and the units of each line j
-- Reply    a list of one integer: 0 held; code + 16 * line (3 sold_out,
--          4 limit, 5 need_user, 9 hold_too_long); or 15: not decided here
--          (a record or a directory entry under the order's ID: a repeat,
--          a conflict, an ended order; a SKU not on sale)
--
-- Counts are read as the hot script reads them (tonumber: a count that is
-- not a number fails the call only where the hot script's would), and
-- every count the writes need is computed before the first write.

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
for j = 1, k do
  local e = call('LINDEX', KEYS[4 * k + 1 + j], -1)
  st[j][8] = e and tonumber(string.sub(e, 1, string.find(e, ' ', 1, true) - 1))
end
-- A record or a directory entry under the order's ID: left.
for j = 1, k + 1 do
  if call('HEXISTS', j <= k and KEYS[4 * j] or dir, id) == 1 then return {15} end
end

for j = 1, k do
  if user ~= '' then st[j][7] = call('HGET', KEYS[4 * j - 1], user) end
end

local code = 0
for j = 1, k do
  local s, qty = st[j], ARGV[7 + j] + 0
  if s[1] < qty then
    code = 3 + 16 * j
  elseif s[2] > 0 then
    if user == '' then
      code = 5 + 16 * j
    elseif (s[7] and tonumber(s[7]) or 0) + qty > s[2] then
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
if code ~= 0 then return {code} end

-- Every value the writes need, before the first write.
local dl = format('%d', now + hold)
local rec = '\t' .. dl .. '\t' .. format('%d', minmax - hold) .. '\t' .. ident
for j = 1, k do
  local s, qs = st[j], ARGV[7 + j]
  local qty = qs + 0
  s[1], s[4], s[5] = format('%d', s[1] - qty), format('%d', s[4] + qty), format('%d', s[5] + 1)
  s[7] = s[7] and format('%d', tonumber(s[7]) + qty) or qs
end

for j = 1, k do
  local s, b = st[j], 4 * j - 3
  call('HSET', KEYS[b], 'avail', s[1], 'held', s[4], 'ver', s[5])
  if not s[8] or now + hold >= s[8] then
    call('RPUSH', KEYS[4 * k + 1 + j], dl .. ' ' .. id)
  else
    call('ZADD', KEYS[b + 1], dl, id)
  end
  if user ~= '' then call('HSET', KEYS[b + 2], user, s[7]) end
  call('HSET', KEYS[b + 3], id, 'h' .. ARGV[7 + j] .. rec)
end
call('HSET', dir, id, ident)
return {0}
