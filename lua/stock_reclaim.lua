-- stock_reclaim.lua: return the units of one SKU's holds whose deadline has
-- passed. The caller peeks the due order IDs first (ZRANGEBYSCORE, and the
-- head of the hold queue); this script re-checks each one.
-- Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{sku}:state   hash avail, held, ...
-- KEYS[2]  <p>:{sku}:holds   zset order ID -> deadline ms
-- KEYS[3]  <p>:{sku}:users   hash user -> units held + bought
-- KEYS[4]  <p>:{sku}:rc:<pass>  list: this pass's reply, kept briefly
-- KEYS[5]  <p>:{sku}:ends    zset order ID + "\n" + identity -> when the
--                            reclaimer ended a line of it (ms): orders
--                            whose directory entry (and other slots) the
--                            pass still has to end
-- KEYS[6]  <p>:{sku}:lines   hash order ID -> line record
-- KEYS[7]  <p>:{sku}:gone    list "<e> <order ID>" of ended records
-- KEYS[8]  <p>:{sku}:hq      list "<deadline ms> <order ID>": the hold
--                            queue, in deadline order
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  retention ms: records live this long after the change
-- ARGV[3]  ms to keep this pass's reply (KEYS[4])
-- ARGV[4]  the most entries to take off the hold queue
-- ARGV[4+i] order ID of candidate i
-- Reply    flat list {id, user, qty, identity, ...} (all strings) of the
--          holds returned by this pass; qty is what the line still held
--          (its qty less what partial reverts gave back), '0' for a line
--          they emptied (ended too, not a unit returned).
--
-- First the hold queue's head: an entry leaves it when its line is no
-- longer held, or is in the holds zset too (ExtendHold moved it there), or
-- is due (its deadline <= now): a due line still held goes into the holds
-- zset, at its record's deadline, for the loop below. It stops at the
-- first hold that is in the queue only and not due (every later one is
-- due no sooner), or after ARGV[4] entries. So the queue keeps every hold
-- placed in it until it ends or its deadline passes, and an ended one
-- leaves it once the holds before it have.
--
-- A candidate is returned only if it is still in the holds zset with a
-- deadline <= now and its record is still 'held'. Confirm and revert remove
-- the order from the zset in the same step as they change the record, so a
-- confirmed hold is never returned, and of several reclaimers racing for
-- one hold exactly one returns it.
--
-- Each line it ends goes into the SKU's ends zset in the same step, and
-- leaves it (ZREM, by the Store) once the pass has ended the order's
-- directory entry and its lines on other slots: a pass that stops in
-- between leaves the order there for a later pass to finish.
--
-- The reply survives a resend: the first run records it under the pass's
-- key (KEYS[4], named by a token the caller draws once per pass), and a
-- second run of the same pass (a client retrying after a lost reply)
-- returns the recorded reply and changes nothing.
local memo = redis.call('LRANGE', KEYS[4], 0, -1)
if #memo > 0 then
  local out = {}
  for i = 2, #memo do out[#out + 1] = memo[i] end
  return out
end
local now = tonumber(ARGV[1])
local keep = tonumber(ARGV[2])
local out = {}
-- A SKU whose state is gone (flushed, evicted) is rebuilt from the
-- database: its holds end, the missing counters are not recreated.
local live = redis.call('HEXISTS', KEYS[1], 'hold') == 1
if not live then refuse_layout1(KEYS[1]) end
local qmax, popped, stop = tonumber(ARGV[4]), 0, false
while popped < qmax and not stop do
  local es = redis.call('LRANGE', KEYS[8], popped, popped + math.min(63, qmax - popped - 1))
  if #es == 0 then break end
  for _, e in ipairs(es) do
    local class, id, r = q_head(KEYS[6], KEYS[2], e, now)
    if class == 'wait' then stop = true; break end
    if class == 'due' then redis.call('ZADD', KEYS[2], string.format('%d', r.dl), id) end
    popped = popped + 1
  end
end
if popped > 0 then redis.call('LTRIM', KEYS[8], popped, -1) end
for i = 5, #ARGV do
  local id = ARGV[i]
  local score = redis.call('ZSCORE', KEYS[2], id)
  if score and tonumber(score) <= now then
    redis.call('ZREM', KEYS[2], id)
    local r = rec_get(KEYS[6], id)
    if r and r.st == 'held' then
      local qty = r.qty - r.ret
      if live and qty > 0 then
        redis.call('HINCRBY', KEYS[1], 'held', -qty)
        redis.call('HINCRBY', KEYS[1], 'avail', qty)
        redis.call('HINCRBY', KEYS[1], 'ver', 1)
      end
      if r.user ~= '' and qty > 0 and redis.call('HINCRBY', KEYS[3], r.user, -qty) <= 0 then
        redis.call('HDEL', KEYS[3], r.user)
      end
      r.st = 'expired'
      rec_end(KEYS[6], KEYS[7], id, r, keep)
      redis.call('ZADD', KEYS[5], now, id .. '\n' .. r.id)
      out[#out + 1] = id
      out[#out + 1] = r.user
      out[#out + 1] = string.format('%d', qty)
      out[#out + 1] = r.id
    end
  end
end
redis.call('RPUSH', KEYS[4], 'pass')
for i = 1, #out, 1000 do
  redis.call('RPUSH', KEYS[4], unpack(out, i, math.min(i + 999, #out)))
end
redis.call('PEXPIRE', KEYS[4], ARGV[3])
return out
