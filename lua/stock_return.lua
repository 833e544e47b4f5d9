-- stock_return.lua: give back part of an order (a partial cancel of a held
-- order, a partial refund of a confirmed one), on the lines of the order
-- that share one slot, once per operation ID. Runs after stock_lib.lua.
--
-- KEYS     5 per line i of the order here (i = 1..n), as in
--          stock_confirm.lua: state (its rn counts the partial returns,
--          of held and confirmed lines, and the dropped holds), holds,
--          users, lines (the line's record: its units given back, and
--          the signature of each return applied), gone
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  the order's identity, as in stock_deduct.lua
-- ARGV[4]  retention ms: the records of an order this ends live this long
-- ARGV[5]  the return's operation ID
-- ARGV[6]  the return's signature (its canonical items)
-- ARGV[7]  mode:
--            'all'    KEYS hold every line of the order: check it all
--                     (state, what each line still has), write nothing on
--                     a refusal, and end the order (reverted, or refunded)
--                     when no line has anything left
--            'part'   one slot group of an order on several, after the
--                     Store checked every line (stock_return_lock.lua
--                     keeps other returns of the order out meanwhile):
--                     apply what the lines still allow (a line confirmed
--                     meanwhile is refunded, one returned meanwhile gives
--                     nothing more), never past what a line has
--            'close'  as 'part', then end the lines here that have
--                     nothing left (the Store found the return empties
--                     the order)
-- ARGV[8]  m, the return's lines; then per return line j (sorted by SKU)
--          ARGV[7+2j] the index i of its order line here (0: the order has
--          no such line) and ARGV[8+2j] its units
-- Reply    {'ok', ended} (applied now), {'dup', ended} (the operation was
--          applied here before, with the same items: nothing written),
--          ended 1 when every line here is reverted, refunded or
--          expired;
--          otherwise, with nothing written: {'unknown', i} (no record of
--          line i, or another identity's), {'conflict'} (the operation
--          was applied with other items), and in mode 'all' {'expired'}
--          (past the deadline, reclaimed or not), {'closed'} (reverted or
--          refunded), {'exceeds', j} (return line j asks more than its
--          line has left, or names a SKU the order lacks); {'unavailable',
--          i} when line i would change but its SKU's state is gone.
--
-- The checks run in the order the contract gives (an applied operation
-- first) and before any write, so the script is all or nothing. Running
-- it twice applies it once: the second run finds the operation.
local now = tonumber(ARGV[1])
local id, ident = ARGV[2], ARGV[3]
local keep = tonumber(ARGV[4])
local opf, sig, mode = ARGV[5], ARGV[6], ARGV[7]
local n = #KEYS / 5
local m = tonumber(ARGV[8])

local recs = {}
local applied = nil
for i = 1, n do
  local r = rec_get(KEYS[5 * (i - 1) + 4], id)
  if not r or r.id ~= ident then return {'unknown', i} end
  recs[i] = r
  if r.ops and r.ops[opf] then applied = r.ops[opf] end
end

-- Every line here has ended: reverted, refunded, or expired (a reclaimer
-- may end a line of an order on several slots between a return's check
-- and its apply there).
local function ended()
  for i = 1, n do
    local st = recs[i].st
    if st == 'held' or st == 'confirmed' then return 0 end
  end
  return 1
end

if applied then
  if applied ~= sig then return {'conflict'} end
  return {'dup', ended()}
end

if mode == 'all' then
  for i = 1, n do
    local r = recs[i]
    if r.st == 'expired' or (r.st == 'held' and r.dl <= now) then return {'expired'} end
  end
  for i = 1, n do
    if recs[i].st == 'reverted' or recs[i].st == 'refunded' then return {'closed'} end
  end
end

local give = {}
for j = 1, m do
  local i, q = tonumber(ARGV[7 + 2 * j]), tonumber(ARGV[8 + 2 * j])
  local r = recs[i]
  if mode == 'all' then
    if i == 0 or q > r.qty - r.ret then return {'exceeds', j} end
  elseif i == 0 or (r.st ~= 'held' and r.st ~= 'confirmed') then
    q = 0
  else
    q = math.min(q, r.qty - r.ret)
  end
  if q > 0 then
    give[i] = q
    if redis.call('HEXISTS', KEYS[5 * (i - 1) + 1], 'hold') == 0 then
      return {'unavailable', i}
    end
  end
end

for i = 1, n do
  local b = 5 * (i - 1)
  local r, q = recs[i], give[i]
  if q then
    redis.call('HINCRBY', KEYS[b + 1], r.st == 'held' and 'held' or 'sold', -q)
    redis.call('HINCRBY', KEYS[b + 1], 'avail', q)
    redis.call('HINCRBY', KEYS[b + 1], 'ver', 1)
    -- A line's units changed: Snapshot reads the holds' quantities after
    -- stock_snapshot.lua's atomic step, and tells by rn that one changed
    -- in between (a line confirmed since that step, then refunded in
    -- part, was a hold of the snapshot too).
    redis.call('HINCRBY', KEYS[b + 1], 'rn', 1)
    if r.user ~= '' and redis.call('HINCRBY', KEYS[b + 3], r.user, -q) <= 0 then
      redis.call('HDEL', KEYS[b + 3], r.user)
    end
    r.ret = r.ret + q
  end
  rec_op(r, opf, sig)
end

-- End the order when nothing is left: as a Revert would, but with no units
-- to move.
local close = mode == 'close'
if mode == 'all' then
  close = true
  for i = 1, n do
    if recs[i].qty - recs[i].ret > 0 then close = false end
  end
end
for i = 1, n do
  local b = 5 * (i - 1)
  local r = recs[i]
  if close and (r.st == 'held' or r.st == 'confirmed') and r.qty - r.ret <= 0 then
    r.st = (r.st == 'held') and 'reverted' or 'refunded'
    redis.call('ZREM', KEYS[b + 2], id)
    rec_end(KEYS[b + 4], KEYS[b + 5], id, r, keep)
  else
    rec_put(KEYS[b + 4], id, r)
  end
end
return {'ok', ended()}
