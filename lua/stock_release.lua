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
--            'drop'    held -> record deleted, as if never taken;
--                      confirmed lines are left alone
-- Reply    {found, changed}: lines with a record of this identity, and
--          lines whose units were returned by this run.
--
-- Final states are left alone, so running it twice returns units once.
local now = tonumber(ARGV[1])
local id, ident = ARGV[2], ARGV[3]
local keep = tonumber(ARGV[4])
local mode = ARGV[5]
local n = #KEYS / 4
local found, changed = 0, 0

for i = 1, n do
  local b = 4 * (i - 1)
  local r = redis.call('HMGET', KEYS[b + 4], 'st', 'qty', 'user', 'dl', 'id')
  if r[1] and r[5] == ident then
    found = found + 1
    local st = r[1]
    local to = nil
    if st == 'held' then
      if mode == 'drop' then
        to = 'gone'
      elseif mode == 'revert' and tonumber(r[4]) > now then
        to = 'reverted'
      else
        to = 'expired'
      end
    elseif st == 'confirmed' and mode ~= 'drop' then
      to = (mode == 'revert') and 'refunded' or 'expired'
    end
    if to then
      local qty = tonumber(r[2])
      changed = changed + 1
      -- A SKU whose state is gone (flushed, evicted) is rebuilt from the
      -- database; counting into it would make a partial state that sells.
      if redis.call('HEXISTS', KEYS[b + 1], 'hold_ms') == 1 then
        redis.call('HINCRBY', KEYS[b + 1], st == 'held' and 'held' or 'sold', -qty)
        redis.call('HINCRBY', KEYS[b + 1], 'avail', qty)
        redis.call('HINCRBY', KEYS[b + 1], 'ver', 1)
      end
      if r[3] ~= '' and redis.call('HINCRBY', KEYS[b + 3], r[3], -qty) <= 0 then
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
