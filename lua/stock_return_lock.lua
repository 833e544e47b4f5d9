-- stock_return_lock.lua: take or give up the lock that keeps the partial
-- returns of one order on several slots of a Redis Cluster from running at
-- once (each checks every line, then applies slot by slot; two at once
-- could both pass the check and together ask more than the order has).
-- Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:dir:{<shard>}   hash order ID -> directory entry: the lock
--                              is the entry's extra l<lease>:<value>, so
--                              it lives no longer than the entry (its
--                              order's end, then Retention)
-- ARGV[1]  order ID
-- ARGV[2]  the return's operation ID
-- ARGV[3]  lease ms to take (or renew) the lock, or 0 to give it up
-- ARGV[4]  the value to store: the operation ID (when absent too), or,
--          once its applies are sent, that "\n" .. its signature .. "\n"
--          .. the ms it began applying (the caller's clock); a lock with
--          such a value is kept for as long as the entry, whatever the
--          lease. It is not replaced by a plain one when that operation
--          takes it again.
-- Reply    1 when the lock is (now) the operation's, or given up, or the
--          order has no entry (its return finds no line); when another
--          operation holds it, the lock's value (nothing written).
--
-- A return whose call failed leaves the lock to its retry (same operation
-- ID), to the lease, or, once it began applying, to the next return of the
-- order, which completes it (the value names its items), or to the end of
-- the entry. Running it twice is running it once.
local id, op = ARGV[1], ARGV[2]
local d = dir_decode(redis.call('HGET', KEYS[1], id))
if not d then return 1 end
local cur, holder
if d.l then
  local colon = string.find(d.l, ':', 1, true)
  local lease = tonumber(string.sub(d.l, 1, colon - 1))
  if lease == 0 or lease > clock() then
    cur = string.sub(d.l, colon + 1)
    holder = string.match(cur, '^[^\n]*')
  end
end
if tonumber(ARGV[3]) == 0 then
  if holder == op then
    d.l = nil
    redis.call('HSET', KEYS[1], id, dir_encode(d))
  end
  return 1
end
if cur and holder ~= op then return cur end
local value = ARGV[4] or op
local applying = string.find(value, '\n', 1, true)
if cur and string.find(cur, '\n', 1, true) and not applying then
  -- The operation began applying: its retry (or a return completing it)
  -- keeps that value until it takes the lock to apply again.
  return 1
end
d.l = (applying and 0 or clock() + tonumber(ARGV[3])) .. ':' .. value
redis.call('HSET', KEYS[1], id, dir_encode(d))
return 1
