-- stock_available.lua: read a SKU's available units.
-- KEYS[1]  the SKU's state hash  (<prefix>:{<sku>}:state)
-- ARGV     none
-- Reply    {available} or {"unknown_sku"} when the SKU was never put on sale.
local a = redis.call('HGET', KEYS[1], 'avail')
if not a then return {'unknown_sku'} end
return {tonumber(a)}
