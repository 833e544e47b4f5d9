-- stock_deadline.lua: move the held lines of an order that share one slot
-- to the order's deadline and bound, when a later slot group of a Deduct on
-- a Redis Cluster found a shorter hold time or a shorter maximum hold time
-- (one order, one deadline, one bound).
--
-- KEYS     4 per line, as in stock_deduct.lua: state, holds, users, record
-- ARGV[1]  order ID
-- ARGV[2]  the order's identity; records with another identity are skipped
-- ARGV[3]  the order's deadline, ms
-- ARGV[4]  the order's bound (field mx), ms, or 0 to leave bounds alone
-- Reply    the number of lines changed.
--
-- Only held lines with a later deadline or bound move, and only earlier:
-- running it twice is running it once.
local id, ident = ARGV[1], ARGV[2]
local dl = tonumber(ARGV[3])
local bound = tonumber(ARGV[4] or '0')
local n = #KEYS / 4
local moved = 0
for i = 1, n do
  local b = 4 * (i - 1)
  local r = redis.call('HMGET', KEYS[b + 4], 'st', 'id', 'dl', 'mx')
  if r[1] == 'held' and r[2] == ident then
    local changed = false
    if tonumber(r[3]) > dl then
      redis.call('HSET', KEYS[b + 4], 'dl', ARGV[3])
      redis.call('ZADD', KEYS[b + 2], 'XX', ARGV[3], id)
      changed = true
    end
    if bound > 0 and r[4] and tonumber(r[4]) > bound then
      redis.call('HSET', KEYS[b + 4], 'mx', ARGV[4])
      changed = true
    end
    if changed then moved = moved + 1 end
  end
end
return moved
