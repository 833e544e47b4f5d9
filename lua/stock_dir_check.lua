-- stock_dir_check.lua: settle the directory entries of one shard whose
-- check time came (the reclaimer read each entry and its order's lines
-- first). Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:dir:{<shard>}        hash order ID -> directory entry
-- KEYS[2]  <p>:dir:{<shard>}:gone   list "<e> <order ID>" of ended entries
-- KEYS[3]  <p>:dir:{<shard>}:open   zset order ID -> when to check the
--                                   entry (ms, the Stores' clocks, as
--                                   deadlines): every entry that has not
--                                   ended is in it (a bind, a call about
--                                   to end the order, puts it there; its
--                                   end takes it out)
-- ARGV[1]  now (ms, the caller's clock): members due by then are settled
-- ARGV[2]  retention ms
-- ARGV     then per order: ID, the identity its entry had when read ('':
--          none, or ended), action, and for 'later' when (ms), for 'end'
--          the earliest end of its lines (ms, the server's time):
--            'later'  a line of the order is held: check again then
--            'end'    every line of the order has ended: end the entry,
--                     read no longer than its lines
--            'free'   the order has no line: it took nothing: delete the
--                     entry, once no attempt bound to it may still take
--                     (see below)
--            'take'   'free' for a Deduct of another order under the ID
--                     (stock_dir_bind.lua said 'stale'), only while no
--                     attempt is on the entry: it then binds the ID anew
--            'drop'   the entry was gone or ended: out of the zset
-- Reply    the number of entries ended or deleted.
--
-- An order whose member moved past now since the read (a bind, a call
-- about to end it) or whose entry changed identity or ended is left as it
-- is now (out of the zset if its entry is gone or ended). Running it twice
-- is safe.
--
-- A bind puts the member due when its attempt's lease ends, but a call
-- that may end the order moves the member earlier before it knows whether
-- the order has lines (a Confirm, Revert or RevertItems between a bind and
-- its take). So 'free' reads until when the attempts' leases run from
-- their tokens ("<random>.<lease end ms, base 36>", the callers' clock, as
-- the binding Store put it): while one runs its take may still come, and
-- the member is due again when the latest ends, as the binds had put it.
local now, keep = tonumber(ARGV[1]), tonumber(ARGV[2])

-- leased returns when the last lease of the attempts of the entry d ends
-- (the callers' clock), 0 for none whose token says.
local function leased(d)
  local last = 0
  if not dir_attempts(d) then return last end
  for t in string.gmatch(d.toks, '[^,]+') do
    local dot = string.find(t, '.', 1, true)
    local ends = dot and tonumber(string.sub(t, dot + 1), 36)
    if ends and ends > last then last = ends end
  end
  return last
end

local n = 0
for a = 3, #ARGV, 4 do
  local id, ident, action = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local at = redis.call('ZSCORE', KEYS[3], id)
  local d = dir_decode(redis.call('HGET', KEYS[1], id))
  if not d or d.e then
    redis.call('ZREM', KEYS[3], id)
  elseif at and tonumber(at) <= now and d.id == ident then
    if action == 'later' then
      redis.call('ZADD', KEYS[3], ARGV[a + 3], id)
    elseif action == 'end' then
      dir_end(KEYS[1], KEYS[2], KEYS[3], id, d, keep, tonumber(ARGV[a + 3]))
      n = n + 1
    elseif action == 'free' or action == 'take' and not dir_attempts(d) then
      local last = action == 'free' and leased(d) or 0
      if last > now then
        redis.call('ZADD', KEYS[3], last, id)
      else
        redis.call('HDEL', KEYS[1], id)
        redis.call('ZREM', KEYS[3], id)
        n = n + 1
      end
    end
  end
end
return n
