-- stock_dir_keep.lua: end an order's directory entry, or keep it again. An
-- entry that ends lives Retention more (its records' lifetime), then reads
-- as absent; the reclaimer deletes it. Runs after stock_lib.lua.
--
-- KEYS[1]  <p>:dir:{<shard>}        hash order ID -> directory entry
-- KEYS[2]  <p>:dir:{<shard>}:gone   list "<e> <order ID>" of ended entries
-- ARGV[1]  order ID
-- ARGV[2]  the identity whose order ended (mode 'end'), or '' (mode 'keep')
-- ARGV[3]  retention ms
-- ARGV[4]  mode: 'end' gives the entry Retention from now (the server's
--          time), if it names ARGV[2]; 'keep' takes that end off again, whatever the
--          identity (the order still holds stock: a Confirm or Revert
--          that ended the entry could not end every line), and makes its
--          attempt set (if any) live as long as the entry.
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
  return 1
end
if d.id ~= ARGV[2] then return 0 end
-- The attempt set, if it lives, lives as long as the entry now.
if dir_attempts(d) then d.lease = 0 else d.toks = '' end
d.e = clock() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], id, dir_encode(d))
redis.call('RPUSH', KEYS[2], d.e .. ' ' .. id)
return 1
