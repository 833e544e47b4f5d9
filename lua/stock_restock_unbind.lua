-- stock_restock_unbind.lua: free a restock operation ID that this call bound
-- and then did not apply (the SKU was unknown or would have too many units),
-- so that the ID stays free for the operation it is meant for.
--
-- KEYS[1]  <p>:restock:{<op ID>}   string: the SKU and units bound to the ID
-- ARGV[1]  the binding the caller wrote
-- Reply    1 if deleted, 0 otherwise (someone else's binding is kept).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
