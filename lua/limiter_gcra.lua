-- limiter_gcra.lua: GCRA (token bucket semantics, as go-redis/redis_rate) over
-- one or more keys, all-or-nothing: n events are charged to every key or to none.
-- KEYS[i]          key i's state: a string "<us> <f>", its theoretical arrival time (TAT)
--                  us + f/rate µs (0 <= f < rate); a bare "<us>" reads as f = 0
-- ARGV[1]          n, the events to admit (>= 1, <= every key's burst)
-- ARGV[3i-1..3i+1] key i's rate (events per period), period (µs), burst (events)
-- Time             Redis server TIME, read once per call; the callers' clocks play no part.
-- Arithmetic       exact: an event's interval, period/rate µs, is kept as whole µs plus a
--                  remainder in 1/rate µs, and every number is an integer below 2^53 (a
--                  Lua number is a double), so no call rounds and nothing drifts. Needs
--                  rate, burst, n < 2^30 and burst * period / rate < 2^53 µs.
-- Reply            {1, remaining, 0, 0, reset_us} when every key admits n (all are charged;
--                  remaining is the least, over the keys, number of further single events
--                  the key admits now), or {0, 0, retry_us, i, reset_us} when key i is the
--                  first that refuses (nothing is written; retry_us is the longest wait any
--                  refusing key asks for, rounded up to a µs: the same call passes then and
--                  not a µs earlier). reset_us is the longest time, over every key, until
--                  its bucket is full again (its TAT is reached) if nothing more is
--                  charged, rounded up to a µs; 0 if all are full.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[1])
local B = 1048576 -- 2^20

-- times returns k intervals, k * (q + m/rate) µs, as whole µs and a remainder
-- in 1/rate µs: k * m (up to 2^60) is split at 2^20 so every product and sum
-- stays below 2^53.
local function times(k, q, m, rate)
  local hi = math.floor(k / B)
  local lo = k - hi * B
  local a = hi * m
  local ar = a % rate
  local b = ar * B + lo * m
  local f = b % rate
  return k * q + (a - ar) / rate * B + (b - f) / rate, f
end

-- ceilus is the time from now to (u, f), rounded up to a µs (at least 0).
local function ceilus(u, f)
  local d = u - now
  if f > 0 then d = d + 1 end
  if d < 0 then return 0 end
  return d
end

local tu, tf, nu, nf = {}, {}, {}, {}
local remaining = -1
local denied, retry, reset = 0, 0, 0
for i = 1, #KEYS do
  local rate = tonumber(ARGV[3 * i - 1])
  local period = tonumber(ARGV[3 * i])
  local burst = tonumber(ARGV[3 * i + 1])
  local q = math.floor(period / rate)
  local m = period - q * rate
  local su, sf = string.match(redis.call('GET', KEYS[i]) or '', '^(%d+) ?(%d*)$')
  su, sf = tonumber(su), tonumber(sf) or 0
  if sf >= rate then sf = rate - 1 end -- written under another rate
  if not su or su < now then su, sf = now, 0 end
  tu[i], tf[i] = su, sf
  -- the new TAT: tat + n intervals
  local du, df = times(n, q, m, rate)
  local u, f = su + du, sf + df
  if f >= rate then u, f = u + 1, f - rate end
  -- the call passes once now reaches allowAt = new TAT - burst intervals
  local bu, bf = times(burst, q, m, rate)
  local au, af = u - bu, f - bf
  if af < 0 then au, af = au - 1, af + rate end
  if au > now or (au == now and af > 0) then
    if denied == 0 then denied = i end
    local w = ceilus(au, af)
    if w > retry then retry = w end
  else
    nu[i], nf[i] = u, f
    -- remaining: the most k with allowAt + k intervals <= now, at most burst - n
    local xu, xf = now - au, -af
    if xf < 0 then xu, xf = xu - 1, xf + rate end
    local k = math.floor((xu + xf / rate) * rate / period)
    if k > burst - n then k = burst - n end
    if k < 0 then k = 0 end
    while k > 0 do
      local ku, kf = times(k, q, m, rate)
      if ku < xu or (ku == xu and kf <= xf) then break end
      k = k - 1
    end
    while k < burst - n do
      local ku, kf = times(k + 1, q, m, rate)
      if ku > xu or (ku == xu and kf > xf) then break end
      k = k + 1
    end
    if remaining < 0 or k < remaining then remaining = k end
  end
end
if denied > 0 then
  for i = 1, #KEYS do
    local w = ceilus(tu[i], tf[i])
    if w > reset then reset = w end
  end
  return {0, 0, retry, denied, reset}
end
for i = 1, #KEYS do
  local w = ceilus(nu[i], nf[i])
  redis.call('SET', KEYS[i], string.format('%d %d', nu[i], nf[i]), 'PX', math.ceil(w / 1000) + 1)
  if w > reset then reset = w end
end
return {1, remaining, 0, 0, reset}
