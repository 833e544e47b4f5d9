-- stock_migrate.lua: convert one key of key layout 1 (stockguard before
-- layout 2) to layout 2, in place. Store.Migrate runs it, with traffic to
-- the prefix stopped. Runs after stock_lib.lua.
--
-- ARGV[1]  mode:
--            'state'  KEYS[1] <p>:{sku}:state: the hold time hold_ms
--                     becomes hold
--            'line'   KEYS[1] <p>:{sku}:o:<id>, the hash of one order line
--                     (st, qty, user, dl, mx, id, at, ret, r:<op>);
--                     KEYS[2] <p>:{sku}:lines; KEYS[3] <p>:{sku}:gone;
--                     ARGV[2] the order ID, ARGV[3] the retention, ms:
--                     the line becomes the ID's field of the lines hash,
--                     its TTL its end (the server's time + the TTL left;
--                     a line that ended without one, + the retention),
--                     and the key is deleted
--            'entry'  KEYS[1] <p>:dir:{<shard>}; KEYS[2] its gone list;
--                     KEYS[3] its open zset; ARGV[2] the order ID, ARGV[3]
--                     its identity (the value of its layout 1 entry),
--                     ARGV[4] that entry's TTL left (ms, or -1: none),
--                     ARGV[5] its attempts (the layout 1 set's members,
--                     comma-separated), ARGV[6] their set's TTL left (ms,
--                     or -1), ARGV[7] when the reclaimer checks it (ms,
--                     the Store's clock): the entry becomes the ID's
--                     field of the shard, its TTLs its end and its
--                     attempts' lease (the server's time + the TTL left),
--                     and one that has not ended gets its member in the
--                     open zset, as a bound entry does, unless the shard
--                     has a live entry of the ID already (a Migrate run
--                     before)
-- Reply    1 when something was converted, 0 when there was nothing to
--          convert (the key is gone, or converted before).
--
-- Each mode can run twice with the effect of running once.
local mode = ARGV[1]
if mode == 'state' then
  local s = redis.call('HMGET', KEYS[1], 'hold_ms', 'hold')
  if not s[1] then return 0 end
  if not s[2] then redis.call('HSET', KEYS[1], 'hold', s[1]) end
  redis.call('HDEL', KEYS[1], 'hold_ms')
  return 1
end
if mode == 'entry' then
  if dir_decode(redis.call('HGET', KEYS[1], ARGV[2])) then return 0 end
  local d = {id = ARGV[3], lease = 0, toks = ARGV[5]}
  local ttl, setttl = tonumber(ARGV[4]), tonumber(ARGV[6])
  if ttl > 0 then
    d.e = clock() + ttl
  elseif d.toks ~= '' and setttl > 0 then
    d.lease = clock() + setttl
  end
  redis.call('HSET', KEYS[1], ARGV[2], dir_encode(d))
  if d.e then
    redis.call('RPUSH', KEYS[2], d.e .. ' ' .. ARGV[2])
  else
    redis.call('ZADD', KEYS[3], ARGV[7], ARGV[2])
  end
  return 1
end
-- mode 'line'
local id = ARGV[2]
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
  r.e = clock() + ttl
elseif r.st ~= 'held' then
  r.e = clock() + tonumber(ARGV[3])
end
redis.call('HSET', KEYS[2], id, rec_encode(r))
if r.e then redis.call('RPUSH', KEYS[3], r.e .. ' ' .. id) end
redis.call('DEL', KEYS[1])
return 1
