-- stock_return_lock.lua: take or give up the lock that keeps the partial
-- returns of one order on several slots of a Redis Cluster from running at
-- once (each checks every line, then applies slot by slot; two at once
-- could both pass the check and together ask more than the order has).
--
-- KEYS[1]  <p>:rl:{<id>}   string: the return running, its operation ID,
--                          then, once its applies are sent,
--                          "\n" .. its signature .. "\n" .. the ms it
--                          began applying (the caller's clock)
-- ARGV[1]  the return's operation ID
-- ARGV[2]  lease ms to take (or renew) the lock, or 0 to give it up
-- ARGV[3]  the value to store (its operation ID, or as above); the
--          operation ID when absent. A lock whose value says its operation
--          began applying is not replaced by a plain one (nor its lease
--          shortened) when that operation takes it again.
-- Reply    1 when the lock is (now) the operation's, or given up; when
--          another operation holds it, the lock's value (nothing written).
--
-- A return whose call failed leaves the lock to its retry (same operation
-- ID), to the lease, or, once it began applying, to the next return of the
-- order, which completes it (the value names its items). Running it twice
-- is running it once.
local cur = redis.call('GET', KEYS[1])
local holder = cur and string.match(cur, '^[^\n]*')
if tonumber(ARGV[2]) == 0 then
  if holder == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 1
end
if cur and holder ~= ARGV[1] then return cur end
local value = ARGV[3] or ARGV[1]
if cur and string.find(cur, '\n', 1, true) and not string.find(value, '\n', 1, true) then
  -- The operation began applying: its retry (or a return completing it)
  -- keeps that value and its lease until it takes the lock to apply again.
  return 1
end
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return 1
