-- stock_release.lua: return the units of an order's lines that share one
-- slot: revert (cancel or refund), expire, or drop (undo a failed Deduct).
-- Runs after stock_lib.lua.
--
-- KEYS     5 per line, as in stock_confirm.lua: state, holds, users, lines,
--          gone
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  the order's identity; records with another identity are skipped
-- ARGV[4]  retention ms: records live this long after the call, ended
--          now or before (modes 'revert', 'expire': the order's end; mode
--          'held': ended now)
-- ARGV[5]  mode:
--            'revert'  held -> reverted (expired if past its deadline),
--                      confirmed -> refunded
--            'expire'  held or confirmed -> expired
--            'held'    held -> expired, whatever its deadline; every other
--                      state is left alone (stock.HoldReverter)
--            'drop'    the attempt ARGV[6] leaves each held record it
--                      counts on (its attempts); a record no attempt is
--                      left on is deleted, as if never taken; ARGV[6] '*':
--                      every attempt leaves. Records without attempts, and
--                      confirmed lines, are left alone.
-- ARGV[6]  the attempt's token (mode 'drop'), else ''
-- Reply    {found, changed}: lines with a record of this identity, and
--          lines whose units were returned by this run; in mode 'held' a
--          third element, the state the last of those records was found in
--          ('' for none); in modes 'revert' and 'held', {'unavailable', i}
--          with nothing written when line i would change but its SKU's
--          state hash is gone (flushed, evicted, not rebuilt).
--
-- A line's units are its qty less what partial reverts gave back (ret,
-- stock_return.lua): only those return.
--
-- Final states are left alone, so running it twice returns units once.
local now = tonumber(ARGV[1])
local id, ident = ARGV[2], ARGV[3]
local keep = tonumber(ARGV[4])
local mode = ARGV[5]
local token = ARGV[6] or ''
local n = #KEYS / 5
local found, changed = 0, 0
local seen = ''

local recs = {}
for i = 1, n do
  local b = 5 * (i - 1)
  local r = rec_get(KEYS[b + 4], id)
  recs[i] = r
  -- A revert counts on the SKU's state: a gate that lost it answers
  -- nothing until it is rebuilt.
  if r and r.id == ident and redis.call('HEXISTS', KEYS[b + 1], 'hold') == 0
      and ((mode == 'revert' and (r.st == 'held' or r.st == 'confirmed')) or (mode == 'held' and r.st == 'held')) then
    return {'unavailable', i}
  end
end

for i = 1, n do
  local b = 5 * (i - 1)
  local r = recs[i]
  if r and r.id == ident then
    found = found + 1
    local st = r.st
    local to = nil
    seen = st
    if st == 'held' then
      if mode == 'held' then
        to = 'expired'
      elseif mode == 'drop' then
        if r.at and r.at ~= '' and (token == '*' or has_token(r.at, token)) then
          local rest = without_token(r.at, token)
          if rest == '' then
            to = 'gone'
          else
            r.at = rest
            rec_put(KEYS[b + 4], id, r)
          end
        end
      elseif mode == 'revert' and r.dl > now then
        to = 'reverted'
      else
        to = 'expired'
      end
    elseif st == 'confirmed' and mode ~= 'drop' and mode ~= 'held' then
      to = (mode == 'revert') and 'refunded' or 'expired'
    end
    if not to and mode ~= 'drop' and mode ~= 'held' and r.e then
      rec_end(KEYS[b + 4], KEYS[b + 5], id, r, keep) -- ended before: lives as long as the entry the call ends
    end
    if to then
      local qty = r.qty - r.ret
      changed = changed + 1
      -- A SKU whose state is gone (flushed, evicted) is rebuilt from the
      -- database; counting into it would make a partial state that sells.
      -- A line partial returns emptied (qty 0) changes state only: Redis
      -- refuses the increment "-0".
      if qty > 0 and redis.call('HEXISTS', KEYS[b + 1], 'hold') == 1 then
        redis.call('HINCRBY', KEYS[b + 1], st == 'held' and 'held' or 'sold', -qty)
        redis.call('HINCRBY', KEYS[b + 1], 'avail', qty)
        redis.call('HINCRBY', KEYS[b + 1], 'ver', 1)
      end
      if r.user ~= '' and qty > 0 and redis.call('HINCRBY', KEYS[b + 3], r.user, -qty) <= 0 then
        redis.call('HDEL', KEYS[b + 3], r.user)
      end
      redis.call('ZREM', KEYS[b + 2], id)
      if to == 'gone' then
        -- Deleted as if never taken: its ID may hold again, under
        -- another order's record, before Snapshot reads the holds'
        -- records after its script; rn tells it.
        if redis.call('HEXISTS', KEYS[b + 1], 'hold') == 1 then redis.call('HINCRBY', KEYS[b + 1], 'rn', 1) end
        redis.call('HDEL', KEYS[b + 4], id)
      else
        r.st = to
        rec_end(KEYS[b + 4], KEYS[b + 5], id, r, keep)
      end
    end
  end
end
if mode == 'held' then
  return {found, changed, seen}
end
return {found, changed}
