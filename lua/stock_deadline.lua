-- stock_deadline.lua: move the held lines of an order that share one slot
-- to the order's deadline and bound, when a later slot group of a Deduct on
-- a Redis Cluster found a shorter hold time or a shorter maximum hold time
-- (one order, one deadline, one bound). Runs after stock_lib.lua.
--
-- KEYS     4 per line, as in stock_deduct.lua: state, holds, users, lines
-- ARGV[1]  order ID
-- ARGV[2]  the order's identity; records with another identity are skipped
-- ARGV[3]  the order's deadline, ms
-- ARGV[4]  the order's bound (mx), ms, or 0 to leave bounds alone
-- ARGV[5]  now, in ms, from the caller's clock (not the server's TIME)
-- Reply    the number of lines changed.
--
-- Only held lines with a later deadline or bound move, and only earlier:
-- running it twice is running it once.
local id, ident = ARGV[1], ARGV[2]
local dl = tonumber(ARGV[3])
local bound = tonumber(ARGV[4] or '0')
local now = tonumber(ARGV[5])
local n = #KEYS / 4
local moved = 0
for i = 1, n do
  local b = 4 * (i - 1)
  local r = rec_get(KEYS[b + 4], id)
  if r and r.st == 'held' and r.id == ident then
    local changed = false
    if r.dl > dl then
      r.dl, changed = dl, true
      redis.call('ZADD', KEYS[b + 2], 'XX', ARGV[3], id)
    end
    if bound > 0 and r.mx > bound then r.mx, changed = bound, true end
    if changed then
      rec_put(KEYS[b + 4], id, r)
      moved = moved + 1
    end
  end
end
return moved
