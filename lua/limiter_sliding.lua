-- limiter_sliding.lua: sliding window log over one or more keys, all-or-nothing:
-- at most rate events in any period-long window (no burst at a window edge), and
-- n events are logged on every key or on none.
-- KEYS[i]          key i's log: a sorted set, one member per admitted event, scored by
--                  its time (µs); members are "<time>:<ordinal>"
-- ARGV[1]          n, the events to admit (>= 1, <= every key's rate)
-- ARGV[3i-1..3i+1] key i's rate (events per window), period (window length, µs), unused
-- Time             Redis server TIME, read once per call; the callers' clocks play no part.
--                  An event logged at t stops counting at t + period exactly.
-- Reply            {1, remaining, 0, 0, reset_us} when every key admits n (remaining is the
--                  least any key could still admit now), or {0, 0, retry_us, i, reset_us}
--                  when key i is the first that refuses (only expired entries are removed;
--                  retry_us is the longest wait any refusing key asks for: until enough
--                  entries expire). reset_us is the longest time, over every key, until its
--                  newest entry stops counting; 0 if every log is empty.
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[1])
local counts = {}
local remaining = -1
local denied, retry, reset = 0, 0, 0
for i = 1, #KEYS do
  local rate = tonumber(ARGV[3 * i - 1])
  local period = tonumber(ARGV[3 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', string.format('%d', now - period))
  local c = redis.call('ZCARD', KEYS[i])
  counts[i] = c
  if c + n > rate then
    if denied == 0 then denied = i end
    local k = c + n - rate - 1
    local e = redis.call('ZRANGE', KEYS[i], k, k, 'WITHSCORES')
    local wait = 1
    if e[2] then wait = tonumber(e[2]) + period - now end
    if wait > retry then retry = wait end
  else
    local r = rate - c - n
    if remaining < 0 or r < remaining then remaining = r end
  end
end
if denied > 0 then
  for i = 1, #KEYS do
    local period = tonumber(ARGV[3 * i])
    if counts[i] > 0 then
      local e = redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')
      if e[2] and tonumber(e[2]) + period - now > reset then reset = tonumber(e[2]) + period - now end
    end
  end
  return {0, 0, math.ceil(retry), denied, math.ceil(reset)}
end
local ts = string.format('%d', now)
for i = 1, #KEYS do
  local period = tonumber(ARGV[3 * i])
  local j = 1
  while j <= n do -- ZADD in batches of up to 256 members
    local batch = {}
    for k = j, math.min(n, j + 255) do
      batch[#batch + 1] = ts
      batch[#batch + 1] = ts .. ':' .. (counts[i] + k)
    end
    redis.call('ZADD', KEYS[i], unpack(batch))
    j = j + 256
  end
  redis.call('PEXPIRE', KEYS[i], math.ceil(period / 1000) + 1)
  if period > reset then reset = period end
end
return {1, remaining, 0, 0, reset}
