-- stock_purge.lua: delete the line records (or directory entries) whose
-- retention has passed, oldest first. The reclaimer runs it when the first
-- item of a gone list is due. Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:{sku}:lines, or <p>:dir:{<shard>}: the hash of records
--          (entries)
-- KEYS[2]  <p>:{sku}:gone, or <p>:dir:{<shard>}:gone: list "<e> <order
--          ID>", one item per ending, in the order they ended
-- ARGV[1]  the most items to take off the list
-- ARGV[2]  'line' (KEYS[1] holds line records) or 'dir' (directory entries)
-- Reply    {deleted, taken, more}: records deleted, items taken off the
--          list, and 1 when the list still starts with a due item.
--
-- An item is taken off once its time has come; the record it names is
-- deleted only if it has ended and its own e has passed (it may have been
-- written again since: an order reusing the ID, or a refund that ended it
-- again later, with an item of its own). The list is in ending order (one
-- Retention for the Store); an item due behind one that is not waits for
-- it, so a record is kept at least Retention, a little longer where
-- Stores with another Retention share the prefix. Running it twice is
-- safe.
-- Ends are the server's time (see stock_lib.lua).
local now, max = clock(), tonumber(ARGV[1])
local decode = rec_decode
if ARGV[2] == 'dir' then decode = dir_decode end
local deleted, taken = 0, 0
while taken < max do
  local item = redis.call('LINDEX', KEYS[2], 0)
  if not item then break end
  local e, id = string.match(item, '^(%d+) (.*)$')
  if e and tonumber(e) > now then break end
  redis.call('LPOP', KEYS[2])
  taken = taken + 1
  if id then
    -- Decoded whole: a record past its e is read, not hidden.
    local r = decode(redis.call('HGET', KEYS[1], id), true)
    if r and r.e and r.e <= now then
      redis.call('HDEL', KEYS[1], id)
      deleted = deleted + 1
    end
  end
end
local more = 0
local head = redis.call('LINDEX', KEYS[2], 0)
if head then
  local e = string.match(head, '^(%d+) ')
  if not e or tonumber(e) <= now then more = 1 end
end
return {deleted, taken, more}
