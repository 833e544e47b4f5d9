-- stock_dir_release.lua: delete an order's directory entry if it still
-- holds the given identity (a failed first Deduct frees its order ID).
--
-- KEYS[1]  <p>:order:{<id>}   string: the order's identity
-- ARGV[1]  the identity the caller wrote
-- Reply    1 if deleted, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
