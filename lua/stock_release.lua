-- stock_release.lua: return the units of an order's lines that share one
-- slot: revert (cancel or refund), expire, or drop (undo a failed Deduct).
--
-- KEYS     4 per line, as in stock_deduct.lua: state, holds, users, record
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  order ID
-- ARGV[3]  the order's identity; records with another identity are skipped
-- ARGV[4]  retention ms: records live this long after the change
-- ARGV[5]  mode:
--            'revert'  held -> reverted (expired if past its deadline),
--                      confirmed -> refunded
--            'expire'  held or confirmed -> expired
--            'drop'    the attempt ARGV[6] leaves each held record it
--                      counts on (field at); a record no attempt is left
--                      on is deleted, as if never taken; ARGV[6] '*': every
--                      attempt leaves. Records without at, and confirmed
--                      lines, are left alone.
-- ARGV[6]  the attempt's token (mode 'drop'), else ''
-- Reply    {found, changed}: lines with a record of this identity, and
--          lines whose units were returned by this run; in mode 'revert',
--          {'unavailable', i} with nothing written when line i would change
--          but its SKU's state hash is gone (flushed, evicted, not rebuilt).
--
-- A line's units are its qty less what partial reverts gave back (field
-- ret, stock_return.lua): only those return.
--
-- Final states are left alone, so running it twice returns units once.
local now = tonumber(ARGV[1])
local id, ident = ARGV[2], ARGV[3]
local keep = tonumber(ARGV[4])
local mode = ARGV[5]
local token = ARGV[6] or ''
local n = #KEYS / 4
local found, changed = 0, 0

local recs = {}
for i = 1, n do
  local b = 4 * (i - 1)
  local r = redis.call('HMGET', KEYS[b + 4], 'st', 'qty', 'user', 'dl', 'id', 'at', 'ret')
  recs[i] = r
  -- A revert counts on the SKU's state: a gate that lost it answers
  -- nothing until it is rebuilt.
  if mode == 'revert' and r[1] and r[5] == ident and (r[1] == 'held' or r[1] == 'confirmed')
      and redis.call('HEXISTS', KEYS[b + 1], 'hold_ms') == 0 then
    return {'unavailable', i}
  end
end

for i = 1, n do
  local b = 4 * (i - 1)
  local r = recs[i]
  if r[1] and r[5] == ident then
    found = found + 1
    local st = r[1]
    local to = nil
    if st == 'held' then
      if mode == 'drop' then
        local at = r[6] or ''
        local padded = ' ' .. at .. ' '
        if at ~= '' and (token == '*' or string.find(padded, ' ' .. token .. ' ', 1, true)) then
          local rest = {}
          for t in string.gmatch(at, '%S+') do
            if t ~= token and token ~= '*' then rest[#rest + 1] = t end
          end
          if #rest == 0 then
            to = 'gone'
          else
            redis.call('HSET', KEYS[b + 4], 'at', table.concat(rest, ' '))
          end
        end
      elseif mode == 'revert' and tonumber(r[4]) > now then
        to = 'reverted'
      else
        to = 'expired'
      end
    elseif st == 'confirmed' and mode ~= 'drop' then
      to = (mode == 'revert') and 'refunded' or 'expired'
    end
    if to then
      local qty = tonumber(r[2]) - tonumber(r[7] or '0')
      changed = changed + 1
      -- A SKU whose state is gone (flushed, evicted) is rebuilt from the
      -- database; counting into it would make a partial state that sells.
      -- A line partial returns emptied (qty 0) changes state only: Redis
      -- refuses the increment "-0".
      if qty > 0 and redis.call('HEXISTS', KEYS[b + 1], 'hold_ms') == 1 then
        redis.call('HINCRBY', KEYS[b + 1], st == 'held' and 'held' or 'sold', -qty)
        redis.call('HINCRBY', KEYS[b + 1], 'avail', qty)
        redis.call('HINCRBY', KEYS[b + 1], 'ver', 1)
      end
      if r[3] ~= '' and qty > 0 and redis.call('HINCRBY', KEYS[b + 3], r[3], -qty) <= 0 then
        redis.call('HDEL', KEYS[b + 3], r[3])
      end
      redis.call('ZREM', KEYS[b + 2], id)
      if to == 'gone' then
        redis.call('DEL', KEYS[b + 4])
      else
        redis.call('HSET', KEYS[b + 4], 'st', to)
        redis.call('PEXPIRE', KEYS[b + 4], keep)
      end
    end
  end
end
return {found, changed}
