-- stock_queue_peek.lua: read the head of one SKU's hold queue for the
-- reclaimer: the holds in it that are due, and whether the reclaim script
-- has anything to take off it. Writes nothing. Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{sku}:hq      list "<deadline ms> <order ID>": the hold
--                            queue, in deadline order
-- KEYS[2]  <p>:{sku}:lines   hash order ID -> line record
-- KEYS[3]  <p>:{sku}:holds   zset order ID -> deadline ms
-- ARGV[1]  now, in ms, from the caller's clock (not the server's TIME)
-- ARGV[2]  the most entries to read
-- Reply    {work, more, id, deadline, ...}: work 1 if the head holds an
--          entry stock_reclaim.lua takes off (an ended hold's, one whose
--          hold is in the holds zset too, or a due one), else 0; more 1 if
--          every entry read was such an entry (more may follow), else 0;
--          then the due holds held in the queue only, each with its
--          record's deadline (ms, a string).
--
-- It reads as stock_reclaim.lua takes the head off (stock_lib.lua's
-- q_head): entry by entry, up to the first hold that is in the queue only
-- and not due.
local now, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local es = redis.call('LRANGE', KEYS[1], 0, n - 1)
local out, work, more = {}, 0, #es == n and 1 or 0
for _, e in ipairs(es) do
  local class, id, r = q_head(KEYS[2], KEYS[3], e, now)
  if class == 'wait' then more = 0; break end
  if class == 'due' then
    out[#out + 1] = id
    out[#out + 1] = string.format('%d', r.dl)
  end
  work = 1
end
table.insert(out, 1, more)
table.insert(out, 1, work)
return out
