-- stock_migrate.lua: convert one key of key layout 1 (stockguard before
-- layout 2) to layout 2, in place. Store.Migrate runs it, with traffic to
-- the prefix stopped. Runs after stock_lib.lua.
--
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  mode:
--            'state'  KEYS[1] <p>:{sku}:state: the hold time hold_ms
--                     becomes hold
--            'line'   KEYS[1] <p>:{sku}:o:<id>, the hash of one order line
--                     (st, qty, user, dl, mx, id, at, ret, r:<op>);
--                     KEYS[2] <p>:{sku}:lines; KEYS[3] <p>:{sku}:gone;
--                     ARGV[3] the order ID, ARGV[4] the retention, ms:
--                     the line becomes the ID's field of the lines hash,
--                     its TTL its end (now + the TTL left; a line that
--                     ended without one, now + the retention), and the
--                     key is deleted
--            'entry'  KEYS[1] <p>:dir:{<shard>}; KEYS[2] its gone list;
--                     ARGV[3] the order ID, ARGV[4] the entry as the
--                     caller built it from the order's layout 1 keys,
--                     ARGV[5] its end (ms), or 0 while the order lives:
--                     written unless the shard has a live entry of the ID
--                     already (a Migrate run before)
-- Reply    1 when something was converted, 0 when there was nothing to
--          convert (the key is gone, or converted before).
--
-- Each mode can run twice with the effect of running once.
local now, mode = tonumber(ARGV[1]), ARGV[2]
if mode == 'state' then
  local s = redis.call('HMGET', KEYS[1], 'hold_ms', 'hold')
  if not s[1] then return 0 end
  if not s[2] then redis.call('HSET', KEYS[1], 'hold', s[1]) end
  redis.call('HDEL', KEYS[1], 'hold_ms')
  return 1
end
if mode == 'entry' then
  if dir_decode(redis.call('HGET', KEYS[1], ARGV[3]), now) then return 0 end
  redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
  local e = tonumber(ARGV[5])
  if e > 0 then redis.call('RPUSH', KEYS[2], e .. ' ' .. ARGV[3]) end
  return 1
end
-- mode 'line'
local id = ARGV[3]
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then return 0 end
local f = {}
for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
local names = {held = true, confirmed = true, reverted = true, refunded = true, expired = true}
if not names[f.st] or not f.qty or not f.dl or not f.id then
  return redis.error_reply('malformed line record ' .. KEYS[1])
end
local r = {st = f.st, qty = tonumber(f.qty), dl = tonumber(f.dl), mx = tonumber(f.mx or f.dl), id = f.id,
           ret = tonumber(f.ret or '0')}
if f.at and f.at ~= '' then r.at = string.gsub(f.at, ' ', ',') end
for i = 1, #h, 2 do
  local op = string.match(h[i], '^r:(.*)$')
  if op then rec_op(r, op, h[i + 1]) end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  r.e = now + ttl
elseif r.st ~= 'held' then
  r.e = now + tonumber(ARGV[4])
end
redis.call('HSET', KEYS[2], id, rec_encode(r))
if r.e then redis.call('RPUSH', KEYS[3], r.e .. ' ' .. id) end
redis.call('DEL', KEYS[1])
return 1
