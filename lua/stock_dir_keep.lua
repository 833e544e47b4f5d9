-- stock_dir_keep.lua: end an order's directory entry, or keep it again. An
-- entry that ends lives Retention more (its records' lifetime), then reads
-- as absent; the reclaimer deletes it. Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:dir:{<shard>}        hash order ID -> directory entry
-- KEYS[2]  <p>:dir:{<shard>}:gone   list "<e> <order ID>" of ended entries
-- KEYS[3]  <p>:dir:{<shard>}:open   zset order ID -> when the reclaimer
--                                   checks the entry (see stock_dir_check.lua)
-- ARGV[1]  order ID
-- ARGV[2]  the identity whose order ended (mode 'end'), or when to check
--          the entry (mode 'keep': ms, the caller's clock)
-- ARGV[3]  retention ms
-- ARGV[4]  mode: 'end' gives the entry Retention from now (the server's
--          time), if it names ARGV[2]; 'keep' takes that end off again, whatever the
--          identity (the order still holds stock: a Confirm or Revert
--          that ended the entry could not end every line), makes its
--          attempt set (if any) live as long as the entry, and puts it
--          back in the open zset.
-- Reply    1 if the entry was changed, 0 otherwise.
--
-- An entry naming another identity belongs to a newer order under the same
-- ID and is left alone. Running it twice is safe.
local id = ARGV[1]
local d = dir_decode(redis.call('HGET', KEYS[1], id))
if not d then return 0 end
if ARGV[4] == 'keep' then
  d.e, d.lease = nil, 0
  redis.call('HSET', KEYS[1], id, dir_encode(d))
  redis.call('ZADD', KEYS[3], ARGV[2], id)
  return 1
end
if d.id ~= ARGV[2] then return 0 end
dir_end(KEYS[1], KEYS[2], KEYS[3], id, d, tonumber(ARGV[3]))
return 1
