-- stock_lib.lua: the codec of the gate's per-order data (layout 2), put
-- before every stock script that reads or writes it (see lua.WithLib). It
-- defines local functions only, and touches no key of its own: each
-- function is given the keys its caller was passed.
--
-- An order line's record is one field of its gate state's lines hash
-- (<p>:{sku}:lines, field: the order ID), and an order's directory entry
-- one field of its directory shard (<p>:dir:{<shard>}, field: the order
-- ID): no key per order. Both are strings of tokens separated by tabs (no
-- ID, identity, signature or bucket name contains one; shown as spaces
-- here):
--
--   record    <st><qty> <dl> <mx - dl> <identity> [extras]
--   entry     <identity> [extras]
--
-- st is one letter (h held, c confirmed, v reverted, f refunded, x
-- expired), qty the units as ordered, dl the deadline and mx the bound (the
-- latest deadline an extension may set), ms, kept as its distance from dl
-- (mostly a short number: the SKU's maximum less its hold time); the
-- identity is user .. "\n"
-- .. canonical signature. The extras, each a letter and a value: a record
-- may have a<tokens> (the Deduct attempts that count on a held line, on a
-- Redis Cluster, comma-separated), t<units> (given back by partial
-- returns), r<op>"\n"<signature> (one per partial return applied) and
-- e<ms>; an entry may have a<lease>:<tokens> (the attempts bound to it, on
-- a Redis Cluster, and until when that set lives, ms; 0: for as long as
-- the entry; a token is random, then "." and when its attempt's lease
-- ends, ms in base 36, see stock_dir_check.lua), l<lease>:<value> (its
-- order's return lock, see stock_return_lock.lua; lease as a's) and e<ms>.
--
-- e is set when the record or entry ends (its order confirmed, returned or
-- expired): it is kept Retention after that, and from e on it reads as
-- absent, whatever the time the reclaimer deletes it (it pops the key's
-- gone list, "<e> <order ID>" per ending, and deletes what has passed its
-- e). e, and the lease of an entry's attempts, are the server's time (TIME,
-- ms: clock()), as the Redis TTLs they replace were, so they do not depend
-- on the Stores' clocks agreeing; deadlines are the callers' clock, passed
-- in. Numbers in a record are below 10^14 (ms until year 5138, units at
-- most 10^9), so Lua's number-to-string conversion writes them exactly.

-- clock returns the server's time in ms, read once per script call.
local server_ms
local function clock()
  if not server_ms then
    local t = redis.call('TIME')
    server_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return server_ms
end

-- refuse_layout1 raises the error of a state of key layout 1 (hold_ms and
-- no hold: an earlier version wrote it, with a key per order line this
-- version does not read), which the Store answers with ErrLayout. A script
-- calls it, before any write, on a state it finds without hold.
local function refuse_layout1(state)
  if redis.call('HEXISTS', state, 'hold_ms') == 1 and redis.call('HEXISTS', state, 'hold') == 0 then
    error('LAYOUT1 ' .. state .. ' is a state of key layout 1')
  end
end

-- stname and stcode map a record's state letter to its name and back
-- (comparisons, not tables: a table built on every call costs more).
local function stname(c)
  if c == 'h' then return 'held' elseif c == 'c' then return 'confirmed'
  elseif c == 'v' then return 'reverted' elseif c == 'f' then return 'refunded'
  elseif c == 'x' then return 'expired' end
end
local function stcode(st)
  if st == 'held' then return 'h' elseif st == 'confirmed' then return 'c'
  elseif st == 'reverted' then return 'v' elseif st == 'refunded' then return 'f'
  else return 'x' end
end

-- rec_decode returns the record v (an HGET or HMGET value: false when
-- absent) as a table {st, qty, dl, mx, id (identity), user, at (tokens or
-- nil), ret, e (or nil), ops (op -> signature, or nil), opl (ops in order)},
-- or nil when there is none, or when its retention has passed (unless all).
local function rec_decode(v, all)
  if not v then return nil end
  local _, e, s, q, dl, mx = string.find(v, '^(%a)(%d+)\t(%d+)\t(%-?%d+)\t')
  if not s then return nil end
  dl = tonumber(dl)
  -- The identity, then the extras: split at plain tabs (no pattern
  -- backtracks over a long value).
  local sp = string.find(v, '\t', e + 1, true)
  local r = {st = stname(s), qty = tonumber(q), dl = dl, mx = dl + tonumber(mx),
             id = string.sub(v, e + 1, (sp or 0) - 1), ret = 0}
  r.user = string.sub(r.id, 1, (string.find(r.id, '\n', 1, true) or 0) - 1)
  while sp do
    local nx = string.find(v, '\t', sp + 1, true)
    local k, x = string.sub(v, sp + 1, sp + 1), string.sub(v, sp + 2, (nx or 0) - 1)
    if k == 'a' then
      r.at = x
    elseif k == 't' then
      r.ret = tonumber(x)
    elseif k == 'e' then
      r.e = tonumber(x)
    elseif k == 'r' then
      local nl = string.find(x, '\n', 1, true)
      if nl then
        local op = string.sub(x, 1, nl - 1)
        if not r.ops then r.ops, r.opl = {}, {} end
        r.ops[op] = string.sub(x, nl + 1)
        r.opl[#r.opl + 1] = op
      end
    end
    sp = nx
  end
  if r.e and not all and r.e <= clock() then return nil end
  return r
end

-- rec_encode returns the record r as stored.
local function rec_encode(r)
  local v = stcode(r.st) .. r.qty .. '\t' .. r.dl .. '\t' .. (r.mx - r.dl) .. '\t' .. r.id
  if r.at and r.at ~= '' then v = v .. '\ta' .. r.at end
  if r.ret > 0 then v = v .. '\tt' .. r.ret end
  if r.opl then
    for _, op in ipairs(r.opl) do v = v .. '\tr' .. op .. '\n' .. r.ops[op] end
  end
  if r.e then v = v .. '\te' .. r.e end
  return v
end

local function rec_get(key, id)
  return rec_decode(redis.call('HGET', key, id))
end

-- q_head classifies an entry e ("<deadline ms> <order ID>") of a hold
-- queue, as the reclaimer reads the queue's head at now: 'wait' (the hold
-- is held in the queue only and not due: it and every later entry stay),
-- 'due' (held in the queue only, due), or 'gone' (the hold ended, or is in
-- the holds zset too). It returns the class, the order ID and its record.
local function q_head(lines, holds, e, now)
  local sp = string.find(e, ' ', 1, true)
  local id = string.sub(e, sp + 1)
  local r = rec_get(lines, id)
  if not r or r.st ~= 'held' or redis.call('ZSCORE', holds, id) then return 'gone', id, r end
  if tonumber(string.sub(e, 1, sp - 1)) > now and r.dl > now then return 'wait', id, r end
  return 'due', id, r
end

-- q_ids returns the order IDs of the hold queue entries q that seen does
-- not name, in queue order, and adds them to seen.
local function q_ids(q, seen)
  local ids = {}
  for _, e in ipairs(q) do
    local id = string.sub(e, string.find(e, ' ', 1, true) + 1)
    if not seen[id] then ids[#ids + 1] = id; seen[id] = true end
  end
  return ids
end

-- each_value calls f(id, v) for each of ids with the value of its field
-- in the hash key (false when absent), 1000 fields per HMGET.
local function each_value(key, ids, f)
  for from = 1, #ids, 1000 do
    local to = math.min(from + 999, #ids)
    local v = redis.call('HMGET', key, unpack(ids, from, to))
    for i = 1, to - from + 1 do f(ids[from + i - 1], v[i]) end
  end
end

local function rec_put(key, id, r)
  redis.call('HSET', key, id, rec_encode(r))
end

-- rec_end writes r as ended now: kept keep ms, and listed in gone for the
-- reclaimer to delete after that.
local function rec_end(key, gone, id, r, keep)
  r.e = clock() + keep
  redis.call('HSET', key, id, rec_encode(r))
  redis.call('RPUSH', gone, r.e .. ' ' .. id)
end

-- rec_op records the return op (signature sig) on r.
local function rec_op(r, op, sig)
  if not r.ops then r.ops, r.opl = {}, {} end
  if not r.ops[op] then r.opl[#r.opl + 1] = op end
  r.ops[op] = sig
end

-- dir_decode returns the directory entry v as a table {id (identity),
-- lease, toks ('' for none), l (or nil), e (or nil)}, or nil when there is
-- none or its retention has passed (unless all).
local function dir_decode(v, all)
  if not v then return nil end
  local sp = string.find(v, '\t', 1, true)
  local d = {id = string.sub(v, 1, (sp or 0) - 1), lease = 0, toks = ''}
  while sp do
    local nx = string.find(v, '\t', sp + 1, true)
    local k, x = string.sub(v, sp + 1, sp + 1), string.sub(v, sp + 2, (nx or 0) - 1)
    if k == 'a' then
      local colon = string.find(x, ':', 1, true)
      if colon then d.lease, d.toks = tonumber(string.sub(x, 1, colon - 1)), string.sub(x, colon + 1) end
    elseif k == 'e' then
      d.e = tonumber(x)
    elseif k == 'l' then
      d.l = x
    end
    sp = nx
  end
  if d.e and not all and d.e <= clock() then return nil end
  return d
end

local function dir_encode(d)
  local v = d.id
  if d.toks ~= '' then v = v .. '\ta' .. d.lease .. ':' .. d.toks end
  if d.l then v = v .. '\tl' .. d.l end
  if d.e then v = v .. '\te' .. d.e end
  return v
end

-- dir_end ends the entry d of order id in shard dir (gone: its gone list,
-- open: its open zset): kept keep ms more, or until upto (ms, 0 for none:
-- the earliest end of the order's lines, where the caller read them) if
-- that comes first, so the entry is never read after its lines are; out
-- of the open zset. Its attempt set, if it lives, lives as long as the
-- entry now.
local function dir_end(dir, gone, open, id, d, keep, upto)
  if d.toks ~= '' and (d.lease == 0 or d.lease > clock()) then d.lease = 0 else d.toks = '' end
  d.e = clock() + keep
  if upto and upto > 0 and upto < d.e then d.e = upto end
  redis.call('HSET', dir, id, dir_encode(d))
  redis.call('RPUSH', gone, d.e .. ' ' .. id)
  redis.call('ZREM', open, id)
end

-- dir_attempts reports whether the entry's attempt set exists: it has
-- tokens, and its lease (if any) has not run out.
local function dir_attempts(d)
  return d.toks ~= '' and (d.lease == 0 or d.lease > clock())
end

-- has_token reports whether the comma-separated list toks holds tok.
local function has_token(toks, tok)
  return toks ~= nil and string.find(',' .. toks .. ',', ',' .. tok .. ',', 1, true) ~= nil
end

-- without_token returns toks without tok ('*': without every token).
local function without_token(toks, tok)
  if tok == '*' or not toks then return '' end
  local at = string.find(',' .. toks .. ',', ',' .. tok .. ',', 1, true)
  if not at then return toks end
  -- at is where tok starts in toks (the leading comma makes up for the
  -- 1-based index).
  local before, after = '', string.sub(toks, at + #tok + 1)
  if at > 1 then before = string.sub(toks, 1, at - 2) end
  if before == '' then return after end
  if after == '' then return before end
  return before .. ',' .. after
end

-- The SKU cache of stock_deduct.lua and stock_deduct_batch.lua: c holds a
-- SKU's counts (avail, held, ver), its users hash as read (users), the
-- users it changed (changed: user -> true, and in order 1..nchanged), the
-- new members of its holds zset (holds), and whether it is in the
-- script's touched list (dirty).

-- take_units takes qty units (qs: the order's decimal form) of the SKU c
-- for user ('' for none) and order id, due at sdl, into c.
local function take_units(c, touched, user, qty, qs, id, sdl)
  if not c.dirty then c.dirty = true; touched[#touched + 1] = c end
  c.avail, c.held, c.ver = c.avail - qty, c.held + qty, c.ver + 1
  if user ~= '' then
    local had = c.users[user]
    -- A user new to the SKU holds what it takes: its decimal form is the
    -- order's own.
    if had then c.users[user] = tonumber(had) + qty else c.users[user] = qs end
    if not c.changed[user] then
      c.changed[user] = true
      c.nchanged = c.nchanged + 1
      c.changed[c.nchanged] = user
    end
  end
  local h = c.holds
  h[#h + 1] = sdl
  h[#h + 1] = id
end

-- put runs cmd on key with the arguments of list, 1000 at a time.
local function put(cmd, key, list)
  for from = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, from, math.min(from + 999, #list)))
  end
end

-- put_sku writes what the script changed in the SKU c: its counts to its
-- state hash, its new holds, its changed users.
local function put_sku(c, state, holds, users)
  redis.call('HSET', state, 'avail', string.format('%d', c.avail), 'held', string.format('%d', c.held),
    'ver', string.format('%d', c.ver))
  put('ZADD', holds, c.holds)
  if c.nchanged > 0 then
    local fv = {}
    for i = 1, c.nchanged do
      local u = c.changed[i]
      local x = c.users[u]
      if type(x) == 'number' then x = string.format('%d', x) end
      fv[#fv + 1] = u
      fv[#fv + 1] = x
    end
    put('HSET', users, fv)
  end
end
