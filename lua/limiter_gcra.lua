-- limiter_gcra.lua: GCRA (token bucket semantics, as go-redis/redis_rate) over
-- one or more keys, all-or-nothing: n events are charged to every key or to none.
-- KEYS[i]          key i's state: a string holding its theoretical arrival time (TAT), in µs
-- ARGV[1]          n, the events to admit (>= 1, <= every key's burst)
-- ARGV[3i-1..3i+1] key i's rate (events per period), period (µs), burst (events)
-- Time             Redis server TIME, read once per call; the callers' clocks play no part.
-- Reply            {1, remaining, 0, 0, reset_us} when every key admits n (all are charged;
--                  remaining is the least any key could still admit now), or
--                  {0, 0, retry_us, i, reset_us} when key i is the first that refuses (nothing
--                  is written; retry_us is the longest wait any refusing key asks for).
--                  reset_us is the longest time, over every key, until its bucket is full
--                  again (its TAT is reached) if nothing more is charged; 0 if all are full.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[1])
local tats, newtat = {}, {}
local remaining = -1
local denied, retry, reset = 0, 0, 0
for i = 1, #KEYS do
  local rate = tonumber(ARGV[3 * i - 1])
  local period = tonumber(ARGV[3 * i])
  local burst = tonumber(ARGV[3 * i + 1])
  local interval = period / rate
  local tat = tonumber(redis.call('GET', KEYS[i]) or now) or now
  if tat < now then tat = now end
  tats[i] = tat
  local nt = tat + interval * n
  local allowAt = nt - interval * burst
  if now < allowAt then
    if denied == 0 then denied = i end
    if allowAt - now > retry then retry = allowAt - now end
  else
    newtat[i] = nt
    local r = math.floor((now - allowAt) / interval)
    if remaining < 0 or r < remaining then remaining = r end
  end
end
if denied > 0 then
  for i = 1, #KEYS do
    if tats[i] - now > reset then reset = tats[i] - now end
  end
  return {0, 0, math.ceil(retry), denied, math.ceil(reset)}
end
for i = 1, #KEYS do
  local nt = math.ceil(newtat[i])
  redis.call('SET', KEYS[i], string.format('%d', nt), 'PX', math.ceil((nt - now) / 1000) + 1)
  if nt - now > reset then reset = nt - now end
end
return {1, remaining, 0, 0, reset}
