-- limiter_reset.lua: clears one or more limiter keys (of any algorithm), so each
-- admits as a fresh key would.
-- KEYS[i]  key i's state: a GCRA TAT string, a fixed-window hash or a sliding-window log
-- ARGV     none
-- Time     not read.
-- Reply    the number of keys that held state (0 to #KEYS).
return redis.call('DEL', unpack(KEYS))
