-- limiter_fixed.lua: fixed window (the INCR + EXPIRE counter users know) over one
-- or more keys, all-or-nothing: n events are counted on every key or on none. A
-- key's window opens at the first event it admits and lasts one period; unlike a
-- bare INCR, a refused call adds nothing to any counter.
-- KEYS[i]          key i's state: a hash {s = window start (µs), c = events counted}
-- ARGV[1]          n, the events to admit (>= 1, <= every key's rate)
-- ARGV[3i-1..3i+1] key i's rate (events per window), period (window length, µs), unused
-- Time             Redis server TIME, read once per call; the callers' clocks play no part.
--                  The key's expiry only reclaims memory once its window is over.
-- Reply            {1, remaining, 0, 0, reset_us} when every key admits n (remaining is the
--                  least any key could still admit in its window), or {0, 0, retry_us, i,
--                  reset_us} when key i is the first that refuses (nothing is written;
--                  retry_us is the longest wait any refusing key asks for: until its window
--                  closes). reset_us is the longest time, over every key that has counted
--                  events, until its window closes; 0 if none has.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[1])
local starts, counts = {}, {}
local remaining = -1
local denied, retry, reset = 0, 0, 0
for i = 1, #KEYS do
  local rate = tonumber(ARGV[3 * i - 1])
  local period = tonumber(ARGV[3 * i])
  local st = redis.call('HMGET', KEYS[i], 's', 'c')
  local s, c = tonumber(st[1]), tonumber(st[2])
  if not s or not c or now >= s + period or now < s then
    s, c = now, 0
  end
  starts[i] = s
  if c + n > rate then
    if denied == 0 then denied = i end
    if s + period - now > retry then retry = s + period - now end
  else
    local r = rate - c - n
    if remaining < 0 or r < remaining then remaining = r end
  end
  if c > 0 and s + period - now > reset then reset = s + period - now end
  counts[i] = c + n
end
if denied > 0 then
  return {0, 0, math.ceil(retry), denied, math.ceil(reset)}
end
for i = 1, #KEYS do
  local period = tonumber(ARGV[3 * i])
  redis.call('HSET', KEYS[i], 's', string.format('%d', starts[i]), 'c', counts[i])
  redis.call('PEXPIRE', KEYS[i], math.ceil((starts[i] + period - now) / 1000) + 1)
  if starts[i] + period - now > reset then reset = starts[i] + period - now end
end
return {1, remaining, 0, 0, math.ceil(reset)}
