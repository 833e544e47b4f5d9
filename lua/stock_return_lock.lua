-- stock_return_lock.lua: take or give up the lock that keeps the partial
-- returns of one order on several slots of a Redis Cluster from running at
-- once (each checks every line, then applies slot by slot; two at once
-- could both pass the check and together ask more than the order has).
--
-- KEYS[1]  <p>:rl:{<id>}   string: the operation ID of the return running
-- ARGV[1]  the return's operation ID
-- ARGV[2]  lease ms to take (or renew) the lock, or 0 to give it up
-- Reply    1 when the lock is (now) the operation's, or given up; 0 when
--          another operation holds it (nothing written).
--
-- A return whose call failed leaves the lock to its retry (same operation
-- ID) or to the lease. Running it twice is running it once.
local cur = redis.call('GET', KEYS[1])
if tonumber(ARGV[2]) == 0 then
  if cur == ARGV[1] then redis.call('DEL', KEYS[1]) end
  return 1
end
if cur and cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
