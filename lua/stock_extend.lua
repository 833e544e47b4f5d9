-- stock_extend.lua: move a held order's deadline out, on the lines of the
-- order that share one slot: each record's deadline and the order's score
-- in each SKU's holds zset (which the reclaimer reads), together. A line
-- held in its SKU's hold queue only joins the zset (its queue entry, of
-- the old deadline, then stays there until the reclaimer takes it off).
-- Runs after stock_lib.lua.
--
-- KEYS     4 per line i of the order here, as in stock_deduct.lua: state,
--          holds, users, lines (the line's record: its state, deadline,
--          identity and bound, the latest deadline it may get)
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  the order's identity, as in stock_deduct.lua
-- ARGV[4]  the new deadline, ms
-- ARGV[5]  mode:
--            'all'   KEYS hold every line of the order: check it all, in
--                    the contract's order, and move every line or none
--            'part'  one slot group of an order on several, after the
--                    Store checked every line: move each held line not
--                    yet due whose deadline is earlier
-- Reply    {'ok', moved, due}: moved the lines moved now, due the lines
--          here expired or held at or past their deadline ('part': left as
--          they are); in mode 'all', with nothing written:
--          {'unknown', i} (no record of line i, or another identity's),
--          {'confirmed'}, {'closed'} (reverted or refunded), {'expired'}
--          (reclaimed, or held with now at or past the deadline),
--          {'too_long', bound} (the new deadline passes the order's
--          bound); a new deadline at or before the current one is
--          {'ok', 0, 0}.
--
-- Deadlines only grow, so running it twice is running it once.
local now = tonumber(ARGV[1])
local id, ident = ARGV[2], ARGV[3]
local want = tonumber(ARGV[4])
local mode = ARGV[5]
local n = #KEYS / 4

local recs = {}
for i = 1, n do
  local r = rec_get(KEYS[4 * (i - 1) + 4], id)
  if not r or r.id ~= ident then return {'unknown', i} end
  recs[i] = r
end

if mode == 'all' then
  for i = 1, n do
    if recs[i].st == 'confirmed' then return {'confirmed'} end
  end
  for i = 1, n do
    if recs[i].st == 'reverted' or recs[i].st == 'refunded' then return {'closed'} end
  end
  local cur, bound = nil, nil
  for i = 1, n do
    local r = recs[i]
    if r.st == 'expired' or r.dl <= now then return {'expired'} end
    if not cur or r.dl < cur then cur = r.dl end
    if not bound or r.mx < bound then bound = r.mx end
  end
  if want <= cur then return {'ok', 0, 0} end
  if want > bound then return {'too_long', bound} end
end

local moved, due = 0, 0
for i = 1, n do
  local b = 4 * (i - 1)
  local r = recs[i]
  if r.st == 'expired' then
    due = due + 1
  elseif r.st == 'held' then
    if r.dl <= now then
      due = due + 1
    elseif r.dl < want then
      r.dl = want
      rec_put(KEYS[b + 4], id, r)
      redis.call('ZADD', KEYS[b + 2], ARGV[4], id)
      moved = moved + 1
    end
  end
end
return {'ok', moved, due}
