// Package redisstock is the Redis+Lua backend of stock.Manager: the fast
// gate a flash sale runs through. A *Store implements stock.Manager,
// stock.Reclaimer, stock.OrderReader, stock.PartialReverter,
// stock.HoldReverter and stock.HoldExtender on any redis.UniversalClient
// (standalone, Sentinel or Cluster). All its methods are safe for
// concurrent use by any number of processes sharing one Redis. [FailFast]
// fills a client's options so that, with the server down, a call fails
// within tens of milliseconds.
//
// # Key layout
//
// Key layout 3 (the package constant Layout): no key per order. Every key
// of one SKU carries the hash tag {sku}, so every script touches one slot
// and is legal on Redis Cluster; an order costs fields in per-SKU hashes
// and in one of 16 directory shards:
//
//	<prefix>:{<sku>}:state     hash avail, held, sold, limit, hold (the
//	                           hold time, ms), max_ms (the longest hold,
//	                           Listing.MaxHoldTTL; a state written without
//	                           it reads as hold), ver, epoch, gen, adj (the
//	                           token of the last Adjust call applied), rn
//	                           (partial returns, of held and confirmed
//	                           lines, and holds dropped by an undone
//	                           Deduct: Snapshot tells by it that a hold's
//	                           record changed while it read)
//	<prefix>:{<sku>}:holds     zset order ID -> hold deadline (ms)
//	<prefix>:{<sku>}:hq        list "<deadline ms> <order ID>", the hold
//	                           queue: the holds stock_deduct_hot.lua
//	                           places on one server, in arrival order,
//	                           their deadlines never decreasing (a hold
//	                           whose deadline would come before the
//	                           tail's goes into the holds zset). A live
//	                           hold is in the zset or the queue (both,
//	                           once ExtendHold moved it: the zset's
//	                           deadline is its record's); an entry of an
//	                           ended hold stays until the reclaimer takes
//	                           it off the head (see Reclaim)
//	<prefix>:{<sku>}:users     hash user -> units held + bought
//	<prefix>:{<sku>}:lines     hash order ID -> the record of the order's
//	                           line of the SKU: its state (held,
//	                           confirmed, reverted, refunded, expired), qty
//	                           (as ordered), deadline, bound (the latest
//	                           deadline ExtendHold may set), the order's
//	                           identity (user + "\n" + canonical items); on
//	                           a Cluster the Deduct attempts that count on
//	                           a hold; after partial reverts, the units
//	                           they gave back (the line takes qty less
//	                           them) and each return's operation ID and
//	                           signature; once ended, when it stops being
//	                           read (e)
//	<prefix>:{<sku>}:gone      list "<e> <order ID>", one per line record
//	                           that ended, in the order they ended
//	<prefix>:dir:{<shard>}     hash order ID -> the order's directory
//	                           entry: its identity; on a Cluster the Deduct
//	                           attempts bound to it (and until when that
//	                           set lives); on a Cluster or Ring its return
//	                           lock (l: the operation ID of the partial
//	                           revert of the order on several slots that is
//	                           running, kept ReturnLease while it checks;
//	                           once its applies are sent, + "\n" + its
//	                           signature + "\n" + when they began (ms),
//	                           kept until it completes, or with the entry);
//	                           once ended, when it stops being
//	                           read (e). One shard on one server; 16 where
//	                           keys live on several (a Cluster, a Ring):
//	                           an order's is FNV-1a of its ID mod 16, and
//	                           shard i's tag "d<i>.<k>" is in the i-th of
//	                           16 equal slot ranges
//	<prefix>:dir:{<shard>}:gone  list "<e> <order ID>" of ended entries
//	<prefix>:dir:{<shard>}:open  zset order ID -> when the reclaimer checks
//	                           the entry (ms): entries bound or being
//	                           ended (see The life of an order)
//	<prefix>:{<sku>}:rc:<pass> list, one reclaim pass's reply, kept a minute
//	<prefix>:{<sku>}:ends      zset order ID + "\n" + identity -> when a
//	                           reclaim pass ended a line of it (ms): orders
//	                           the pass has not finished yet (their
//	                           directory entry, their lines on other slots)
//	<prefix>:{<sku>}:rs:<op>   string, marker of a restock operation applied
//	                           to the SKU (its units; "r": counted by a
//	                           rebuild), kept Retention
//	<prefix>:{<sku>}:rb        string, the SKU's rebuild claim (the token
//	                           of the last ClaimRebuild), kept Retention
//	<prefix>:restock:{<op>}    string, a restock operation ID's binding to
//	                           its SKU and units, kept Retention
//	<prefix>:skus              set of SKUs ever put on sale (the reclaimer's
//	                           map), the buckets of SKUs split into
//	                           buckets, and the layout mark "{layout:3/n}"
//	                           (n: the directory's shards)
//	<prefix>:buckets           hash SKU -> bucket count, of the SKUs split
//	                           into buckets
//	<prefix>:{<sku>}:bl        string, the SKU's transfer lease (see Buckets)
//	<prefix>:{<bucket>}:xo     hash, a bucket's departure records: transfer
//	                           ID -> destination bucket, units, when (ms)
//	<prefix>:{<bucket>}:xi:<t> string, arrival marker of transfer t ('in',
//	                           or 'void': its units went back), kept
//	                           Retention
//
// A line record and a directory entry are packed strings, tab-separated,
// written and read by one codec in Lua (lua/stock_lib.lua, which the
// scripts that touch them run after) and one in Go. They live as long as
// their order holds stock, whatever the time; when the order ends they get
// e, Retention from the end by the server's clock, and from then on read
// as absent (a retry past Retention meets a new order, as with the TTLs of
// layout 1). The reclaimer deletes them: each pass takes the due items off
// the gone lists of the SKUs it visits and of the 16 shards, and deletes a
// record or entry only if it has ended and its own e has passed (an ID
// reused since has a new record, with an item of its own).
//
// The registry carries the layout mark, with the directory's shard count
// (a Store follows the count its prefix was created with): a Store whose
// registry exists without it finds data an earlier version wrote (one key per order line
// and per order, states with hold_ms), which this version would misread,
// and answers every call with ErrLayout (which matches
// stock.ErrUnavailable) until [Store.Migrate] converts it. A Store of the
// earlier version reads a state of layout 2 as lost (it has no hold_ms),
// so it sells nothing from it. A registry with the mark of layout 2
// ("{layout:2/n}": the same keys, without hold queues) is refused the same
// way: its Stores neither read nor place queued holds, so they would miss
// this version's. Migrate replaces its mark; a Store of layout 2 refuses a
// prefix of layout 3 (it finds no mark it knows).
//
// A bucket of a SKU split into buckets is a gate state of its own under
// the bucket's name (see Buckets): the SKU itself for the first, and
// "<sku> <i>.<k>" for the others, with every key above that a SKU has
// (state, holds, users, line records, reclaim replies, ends); a bucket's
// state also has bk, the SKU's bucket count, and xv, the count of the
// transfer steps that touched it.
//
// ver counts every write to a SKU; epoch counts only the administrative ones
// (PutOnSale, Restock, Adjust, Rebuild, Relist); gen is drawn at random when
// the state is created. gen and epoch make the SKU's [Fence], which never
// repeats across flushes and rebuilds and is what a reconciler compares
// before it corrects a count ([Store.Adjust], [Store.Relist]). A state is
// restored from the record only where none exists ([Store.Rebuild]), and,
// with a claim taken before the record was read ([Store.ClaimRebuild]),
// only if no flush and no other creation of the state came in between;
// the restored state counts as held the holds the gate still has.
//
// # Deduct: one script call, shared
//
// Deduct takes one of two paths, chosen by the client New is given.
//
// Without hash slots (a *redis.Client, Sentinel failover: anything but a
// *redis.ClusterClient) every key lives on one server, so the order's
// directory entry goes into the same script as its lines
// (stock_deduct_batch.lua): the script checks every line (record, SKU,
// stock, per-user limit), then binds the order ID (its directory entry;
// other items under that ID are stock.ErrConflict), then takes the stock,
// adds the per-user count, writes each line's record and adds the order to
// each SKU's holds zset with its deadline — one atomic step. A refused order
// (sold out, the common case once a sale is gone) writes nothing, not even
// its directory entry, and costs no second round trip.
//
// A batch of the flash sale's shape (orders of the same SKUs, one line of
// each, with distinct order IDs: one hot SKU, or a few sold together) goes
// through stock_deduct_hot.lua instead, on one server and on a Cluster
// slot alike: the same checks and writes for a new order, with the SKUs'
// counts in locals and about half the server work per order, and one
// integer in the reply for each; on one server its holds go to the tail
// of each SKU's hold queue (an RPUSH) rather than into the holds zset (a
// ZADD, whose skip list costs the server several times more per member,
// and a hold about 60 bytes more); an order it
// finds already recorded (a repeat, a conflict) it leaves untouched, with
// every order after it, and the Store sends those through the general
// script in one more call: every order is decided in the batch's order.
// On one server a batch of a single such order (a lone caller, or every
// call with [Config.MaxBatch] 1) goes through stock_deduct_one.lua, which
// runs the hot script's commands in the hot script's order (every read
// before any write) and writes the same records, with less Lua around them
// (none of a batch's per-call tables): about a quarter fewer server
// instructions for such an order.
//
// On that path concurrent Deducts are coalesced (group commit, see
// [Config.MaxBatch]): while a script call is in flight the next callers
// queue, and leave together, up to MaxBatch orders in one call, each order
// checked and taken all or nothing on its own, against the state the
// orders before it left, with its own reply. A lone caller is sent at once,
// so an idle Store adds no latency. A caller whose context ends while
// queued leaves with nothing sent; once sent, it gets its order's outcome,
// or stock.ErrUnknownOutcome if its context ends first. A failed call gives
// every order in it the same classified error. Batching amortizes what a
// script call costs the server and the client (a round trip, the command's
// dispatch, and every read and write: one HMGET and one HSET of each key
// the call touches — a SKU's state, users and lines, a directory shard —
// and one ZADD per SKU, whatever the number of orders). The
// call's keys and arguments are passed by pointer into each caller's own
// copy of its order, and each order's outcome comes back as one small
// integer, so a batched Deduct costs the client a few allocations.
//
// On a *redis.ClusterClient every script must stay in one slot, and the
// directory shard's slot is not its SKUs'. Deduct first binds the order ID
// to its items: an HSETNX of its directory entry, which creates the entry
// naming the order and the attempt; an ID whose entry exists (a repeat,
// another attempt of the order, a conflict, an entry past its Retention)
// then goes through the bind script, stock_dir_bind.lua. Only a bound
// attempt takes stock, in the next round trip (stock_deduct.lua for the
// first slot group, then the others): a caller that stops anywhere leaves
// no hold that its order's entry does not name, and an order whose ID
// names other items fails with stock.ErrConflict having taken nothing. A
// refused order frees the directory entry in one more round trip. The
// take also checks that each SKU's state is of the generation the attempt
// knew before it bound (the Store keeps the last it saw, and reads a SKU
// it has not): a gate that lost its data between the bind and the take
// lost the entry too, and a state put back meanwhile (a rebuild) has a new
// generation, so the take refuses it, with nothing written, and the
// Deduct binds again once (then stock.ErrUnavailable). A Cluster master
// that loses its data alone (a failover to a replica that had not
// replicated it) loses the entries of its directory shard while the SKUs'
// states elsewhere keep their generation: a take then may still hold
// stock under an entry that is gone, like every order held on that shard
// at the loss; the reclaimer returns such holds at their deadline. Orders
// of one slot group (every single-SKU order, and orders whose SKUs share
// a hash tag) are batched as on a single server ([Config.MaxBatch]), in
// two stages that overlap. The binds of concurrent Deducts, whatever their
// slots, go together: one pipeline carries every order's HSETNX (each on
// its directory shard's master), one more the bind script calls for the
// IDs whose entries exist (one per directory shard). The orders a batch of
// binds bound then queue together on their slot's batcher, and one deduct
// script call takes a slot's queued orders one after another, each all or
// nothing with its own reply and the deadline its own call's time gives,
// while the next batch of binds is in flight. Each caller then goes on as
// an unbatched one (a refusal frees its own entry; a caller whose context
// ends while its take is queued leaves nothing taken and frees its entry
// too). Orders on several slots are not batched, nor are Deducts on a
// Ring.
//
// Each Deduct call on this path is an attempt with a random token of its
// own, which goes into the directory entry's attempt set and into the
// attempts of every hold the attempt takes or finds (a hold of the same
// order taken by another attempt, such as a retry on another node while
// the first still runs); a command the client resends after a lost reply
// carries the same token. An undo takes only its own token off the holds
// and drops a hold no attempt is left on, so two attempts of one order
// never undo each other's holds, and a Deduct that returns nil holds every
// line for good. An attempt answers a refusal (sold out, limit, conflict
// and the like) only if the order holds nothing as it leaves: one that
// found a line of the order, left a line another attempt still counts on,
// or whose undo failed answers stock.ErrUnknownOutcome, which the caller's
// retry or Revert settles (on several slots, the reclaimer: see Limits).
// A refused attempt that found no record of the order gives the attempt
// set of an entry other attempts are still on a lease (the default hold
// time plus Retention), never the entry itself; once that set has
// expired, a Deduct of other items under the same ID takes the entry over
// if the order it names holds nothing (no record of its first line).
//
// An order has one deadline: now plus its own hold time (Order.HoldTTL) or,
// without one, the shortest hold time of its SKUs; and one bound, the
// latest deadline ExtendHold may give it: now plus the shortest maximum
// hold time (max_ms) of its SKUs, fixed at the Deduct. Both are on every
// line from its first write, whatever the path: on a Cluster, an order on
// several slots first reads the hold times of all its SKUs (one round trip
// that writes nothing), so a call that stops between slot groups leaves
// the groups it took due at the order's deadline, not at their own SKUs'
// longer one; should a SKU's hold times change between that read and a
// later group, that group moves the lines taken before it, in one more
// round trip. An own hold time past
// the bound is stock.ErrHoldTooLong, with nothing written: in the script on
// a single server or a single slot; on several Cluster slots once every
// group passed its other checks (as memstock checks it last), by undoing
// the groups as for any refusal. The lines of an order expire together:
// Confirm refuses at the deadline, a repeat Deduct past it is
// stock.ErrHoldExpired and releases nothing, and the reclaimer returns
// every line.
//
// # The life of an order
//
// An order's directory entry is its transaction record: the one item that
// says whether the order lives, and the last of its items to end. Each
// line record names it (the order ID and identity); a reader in doubt
// about a line reads the entry first (Confirm, Revert, RevertItems,
// ExtendHold and Orders look the entry up before any line; a Deduct binds
// it before it takes).
//
//   - bound (a Cluster or a Ring): an attempt wrote the entry (HSETNX, or
//     stock_dir_bind.lua) after its member in the shard's open zset
//     (<prefix>:dir:{<shard>}:open, due after the attempt lease: the
//     default hold time plus Retention; a member already there stays
//     where it is due, so a bind of other items under the ID moves
//     nothing). A retry binds "same"; other
//     items are stock.ErrConflict. An attempt refused with nothing taken
//     leaves the entry; the last to leave deletes it, member and all. On
//     one server the Deduct's script writes the entry with the holds, so
//     an order is never bound without holding.
//   - holding: an attempt took lines (each record names the attempts that
//     count on it). A repeat Deduct binds "same" and takes nothing twice.
//   - ending: Confirm, Revert, a return that empties the order, or the
//     reclaimer end the lines; the same call ends the entry last (stock_dir_keep.lua),
//     after putting its member in the open zset, due a minute later, and
//     only once the lines answered that they ended: a Confirm or Revert
//     that finds no line (on a Cluster or a Ring, one that runs between
//     a Deduct's bind and its take) leaves the entry to the take.
//     Every line the call reaches (including lines an earlier call ended:
//     a retried Confirm confirms every line again) gets its end, e,
//     Retention from this call, as the entry does a round trip later, so
//     no line of the order reads as absent while its entry is ended and
//     still read (but for that round trip); the reclaimer's check of an
//     entry a call left open (it stopped before the entry's end), which
//     may come long after the lines ended, gives the entry no later end
//     than the earliest of theirs. A line of an order on several Cluster
//     slots may end while another still holds (a Confirm that reached
//     some slots): it is read Retention from then (see Limits).
//   - ended: the entry and the lines have e. A repeat Deduct binds
//     "ended" (on one server, its script reads the entry the same way):
//     it takes no new line and answers as the lines' records do (a line
//     without a record answers stock.ErrOrderClosed). A repeat
//     Confirm or Revert answers as the lines do. A refused attempt never
//     deletes an ended entry (it is not on it).
//   - gone: from e on the items read as absent (the ID is free); the
//     reclaimer deletes them from their gone lists.
//
// A call that stops between steps leaves the member in the open zset; the
// reclaimer settles each member when it is due (stock_dir_check.lua, after
// reading the entry and its order's lines): an order with a held line is
// checked again after its deadline; one whose lines have all ended has
// its entry ended; one with no line record (it took nothing, and no
// attempt bound it for a lease) has its entry deleted; an entry gone or
// ended leaves the zset. A call that may end the order moves its member
// earlier before it knows whether the order has lines (a Confirm between
// a bind and its take finds none), so an entry is not deleted while the
// lease of an attempt bound to it runs (its token says until when, as the
// binding Store set it): it is checked again when the last one ends. So
// every entry ends: an order that took nothing within its attempt lease,
// any other by its deadline or end. [Store.Audit] reports, at rest, any
// item that is neither ended nor live for one of these reasons.
//
// # Buckets
//
// On a Redis Cluster every key of a SKU lives in one hash slot, so one
// master takes a SKU's whole sale. A SKU put on sale with
// stock.Listing.Buckets = B > 1 (on a *redis.ClusterClient; other clients
// ignore it) is split into B buckets, each a full gate state (available,
// held and sold units, holds, per-user counts, line records) in a slot of
// its own: the first is the SKU itself, so one bucket is the layout of any
// SKU; bucket i > 0 is named "<sku> <i>.<k>" (a space, which no SKU
// has), with the smallest k that puts it in the i-th of B equal slot
// ranges after the SKU's own, so that on a Cluster whose masters own equal
// contiguous ranges (as redis-cli --cluster create assigns them) B buckets
// on B masters are one per master. PutOnSale splits the units evenly.
//
// Each line of an order goes to one bucket of its SKU: hash(user) mod B
// (the order ID's hash for an order without a user), so every order of a
// user lands in the user's bucket, whose users hash counts the user: the
// per-user limit is checked in the one script that takes the stock, exact
// across buckets, with no cross-slot step. A single-SKU order is one
// script call on its bucket, batched with the concurrent Deducts of that
// slot ([Config.MaxBatch]); orders on several slots take the compensated
// path of any multi-slot order, all or nothing. The order's directory
// entry names the buckets it took, so Confirm, Revert, RevertItems,
// ExtendHold, the reclaimer and Orders work per order as for any SKU;
// everything the Store reports (errors, Orders, Reclaimed, HeldOrders,
// Snapshot) names the SKU, never a bucket.
//
// A bucket that cannot take a line asks for a refill before the order is
// refused: under the SKU's transfer lease (<prefix>:{<sku>}:bl, one
// refill of a SKU at a time, the others wait for it, at most the lease's
// two seconds: then stock.ErrContention), it reads every bucket, moves to
// the short bucket what each other bucket has above an even share (more,
// from the fullest first, if that does not cover the line), and the order
// is tried again. Sold out is exact: a line is refused with
// stock.ErrSoldOut only when a refill found the other buckets unable to
// cover it, each giving all it had; at that instant the buckets together
// held fewer units than the line asks for (units returned later, by a
// Revert or the reclaimer, come back to the bucket that held them). A
// move is three steps on three slots, each atomic and each once per
// transfer ID: stock_bucket_out.lua takes the units from a bucket and
// writes a departure record there; stock_bucket_in.lua adds them to the
// destination once (its arrival marker), or marks the transfer void if
// the destination has no state; stock_bucket_clear.lua removes the
// departure record (giving the units back when void). A refill that stops
// anywhere leaves a departure record, which the next refill of the SKU
// (or PutOnSale) settles before it reads; a reader (Available, Levels,
// Inspect, Snapshot) counts the units of a departure record whose
// destination has no 'in' marker, so every unit counts once whatever step
// a refill stopped at. The lease's steps bump the SKU's epoch (take,
// after the units arrived, and at the end), and Adjust and Relist are
// refused while the lease is held, so a reconciler's fenced correction
// computed from counts read while units moved is refused (read again).
// The steps in between (out, in, clear) each bump the bucket's transfer
// count (field xv): Snapshot reads every bucket and the units on their way
// between two readings of every transfer count, and reads again when one
// moved, so it counts each unit once (after 8 tries it answers the last
// reading with a zero Fence: no correction computed from it applies).
//
// The counts: Available, Levels and Inspect sum the buckets (each bucket
// read atomically, the buckets one after another; settings, Exists and
// the Fence are the first bucket's). Snapshot merges the buckets' holds
// and the requested lines. Adjust and Relist correct the first bucket
// (fenced, as any SKU), Restock adds to it; a negative correction larger
// than the first bucket has first gathers units there (a refill) and
// answers "not applied" (the fence moved: read again), or is out of range
// when all the buckets together have less. Relist's new settings go to
// every bucket. A bucket whose state is lost while the first lives is
// given an empty state by the next Deduct that needs it (its lost units
// come back through a reconciler's correction of the first bucket).
// Relist writes the other buckets' settings first and the fenced write on
// the first bucket last, so a Relist that stops halfway shows (Inspect
// reads the first bucket's settings) as not applied. A
// Rebuild of a SKU whose first state is lost gives it the record's units
// only when no other bucket survived, and no units otherwise; it finds the
// bucket count in the surviving buckets' states or the counts hash
// (<prefix>:buckets) when the first state is gone.
//
// A SKU's count is set by the PutOnSale that creates its state, and does
// not change after (another count is stock.ErrInvalid: sell it under a
// new SKU); PutOnSale with Buckets 0 keeps it, also when the first state
// was lost (the count is in the other buckets' states and the counts
// hash). Every process routes by the count it read, at most a second ago
// (a Deduct then costs one more read), so a count that changed under a
// live SKU would send one user's orders to two buckets; a SKU new to the
// gate is read before its first order. PutOnSale drops every transfer
// still on its way (it overwrites the counts), so a late arrival adds
// nothing on top. A transfer names the generation of the state it is
// meant for, and one whose destination was lost and recreated since is
// dropped instead of arriving twice (the gate errs low; a reconciler adds
// the units back).
//
// # Partial reverts and hold extensions
//
// [Store.RevertItems] and [Store.ExtendHold] read the order's directory
// entry, then run one script over all the order's lines when they share a
// server (any client but a *redis.ClusterClient or a Ring) or a slot:
// checked in the contract's order and applied in one atomic step, or
// refused with nothing written. A return adds to the units each line gave
// back and records its OpID and signature on every line it ran on, so its
// resend or retry answers nil and changes nothing, and the same OpID with
// other items is stock.ErrConflict. An extension moves each line's
// deadline and its score in the SKU's holds zset together (a line held in
// the hold queue joins the zset), only later and never past the order's
// bound, so the
// reclaimer honours it and a repeat changes nothing. A return that leaves
// nothing on any line ends the order (reverted, or refunded) as Revert
// does, and its directory entry gets Retention.
//
// On a Cluster (or a Ring) an order on several slots cannot be one script.
// RevertItems then takes the order's return lock (in its directory
// entry, for ReturnLease; another return of the order meanwhile is
// stock.ErrContention, the same OpID takes it again), reads every line and
// checks them all (a refusal writes nothing), takes the lock again until
// it completes, and applies slot group by slot group in one pipeline, each
// group atomic and applied once per OpID (a retry after
// stock.ErrUnknownOutcome applies the groups the first call did not reach;
// until it does, no other return of the order runs, so none is checked
// against lines the first has not reached; the next return that comes
// ReturnLease after the applies began completes it first, from the items
// the lock names). ExtendHold reads and checks every line, then moves each
// slot group's lines in one step each; deadlines only grow, so a retry
// completes it. What is atomic there is each slot group, not the order:
// a Confirm, Revert or reclaim of the order running at the same time may
// land between the groups. A return then gives back, per line, what the
// line still allows (a line confirmed meanwhile is refunded, one returned
// meanwhile gives nothing more; never more than a line has); an
// extension that finds a line expired meanwhile answers
// stock.ErrHoldExpired (Confirm then expires the order whole).
//
// After partial reverts every other path counts only what is left (qty
// less what came back): Confirm sells it, Revert and the reclaimer return it (the
// reclaimer reports only lines with something left), Rebuild counts it as
// held, Snapshot and HeldOrders report it (leaving out lines with nothing
// left), and Orders reports the order's Items as ordered with Returned.
//
// # Time
//
// Deadlines are computed from the Store's stock.Clock and passed to the
// scripts in milliseconds. Lifetimes are the servers': the end of a line
// record or a directory entry (Retention after its order ended) and the
// lease of a Cluster entry's attempt set are the time of the server that
// holds them (TIME, read by the script that writes or reads them, as Redis
// judges a TTL), and the reclaimer deletes by it too; so they do not
// depend on the Stores' clocks agreeing. The restock markers, rebuild
// claims and reclaim replies keep relative Redis TTLs.
//
// # Idempotency and unknown outcomes
//
// Every script can run twice with the effect of running once: go-redis
// retries a command after a read timeout, and the caller retries after
// stock.ErrUnknownOutcome. A hold never loses its record or its order ID
// before it is confirmed or returned, however long the reclaimer is down,
// and a retry within [Config.Retention] of the order's end learns the true
// outcome (see Key layout). Ending an order never touches a directory
// entry that names another identity (a newer order under the same ID).
//
// A SKU whose state hash is gone (flushed, evicted, a restarted server) is
// a gate that lost its data, not a SKU never on sale: when the registry
// (<prefix>:skus) names the SKU, or the registry itself is gone (the Redis
// lost everything), Deduct, Confirm and Revert fail with
// stock.ErrUnavailable (an infrastructure failure: nothing applied; retry
// later or use another tier) until the SKU is put on sale again or rebuilt
// (package reconcile rebuilds it from the database); a SKU the registry
// does not name is stock.ErrUnknownSKU. Confirm and Revert of an order ID
// without a directory entry in a Redis that lost its registry answer
// stock.ErrUnavailable too. The reclaimer still closes the records
// of such a SKU's due holds, and nothing ever recreates a partial count
// that could be sold from.
//
// A call whose context is done before it starts returns the context's error
// with nothing sent. An error returned after a request that may write may
// have reached Redis (a timeout, a reset connection, a canceled context)
// matches stock.ErrUnknownOutcome; one from before it was sent (dial
// failure, pool timeout) does not.
//
// # Replication wait
//
// Redis replicates asynchronously: a write the master acknowledged can be
// lost when a replica that never received it is promoted. A shop that runs
// the gate without the SQL record can make every call that writes wait
// for its replicas: [Config.WaitReplicas] n sends WAIT n <WaitTimeout>
// after the call's writes, in the same pipeline on the same connection (WAIT
// counts the writes of its own connection), so the call answers only once
// n replicas acknowledged them. On a *redis.ClusterClient the commands go
// to the master of their keys' slot (MasterForKey), each master's commands
// and a WAIT in one pipeline on that master's connection; a command that
// meets a redirection there (MOVED, ASK: a slot moving or failing over)
// answers it as a certain error, nothing applied, and the slot map is
// reloaded for the retry. Calls that only read (Available, Levels, Orders,
// UserUnits, Snapshot, HeldOrders, the reclaimer's peeks) do not wait; a
// refused write (a sold-out Deduct) waits like any other. With a live
// replica the wait costs about one round trip from master to replica;
// concurrent Deducts still share one script call and one WAIT.
//
// When fewer than n replicas acknowledge within WaitTimeout, or the wait
// itself fails, the call fails with a [*ReplicationError], which matches
// stock.ErrUnknownOutcome: the write ran on the master, and may or may not
// survive a failover. The caller retries with the same order ID (every
// call is idempotent); the retry answers nil once the replicas are back.
// So an acknowledged hold survives the failure of the master as long as
// the replica promoted is one of those that acknowledged: with n of m
// replicas, Sentinel and Cluster prefer the replica with the most data,
// and n = m makes it certain, at the price that any replica down stops
// every write. WAIT does not make Redis strongly consistent (a replica can
// still be promoted without the write, and an acknowledged write lives only
// in the replicas' memory); [Config.WaitAOF] waits with WAITAOF 0 n instead,
// until n replicas wrote the writes to their append-only file (Redis 7.2
// or later, Valkey 8; the replicas need appendonly yes). A server without
// WAITAOF is found before anything is sent (one WAITAOF 0 0 0 per server):
// every call that writes then fails with an error that names it, nothing
// applied and not stock.ErrUnknownOutcome, and asks the server again on
// the next call; it never falls back to WAIT. New refuses a wait on a
// Ring, whose shards it cannot follow, with stock.ErrInvalid.
//
// # Reclaim
//
// [Store.ReclaimExpired] visits the SKUs of the registry set, peeks each
// one's due holds (pipelined), and runs one script per SKU with due holds
// (or entries to take off its hold queue's head: of ended holds, or of
// holds ExtendHold moved into the zset) that returns them atomically. The script first takes
// the hold queue's head off: entries of ended holds, and due ones (a due
// hold still held goes into the holds zset, where it is returned with the
// others), up to the first hold that is in the queue only and not due. As
// the queue's deadlines never decrease, no due hold is behind it; an ended
// hold's entry behind it waits for it (a few dozen bytes, at most one hold
// time). A pass costs four cheap peeks per SKU on sale (its holds, its
// hold queue's head: a read-only script, stock_queue_peek.lua, that reads
// the entries and their records up to the first hold not due, at most 32;
// its unfinished ends, the first of its ended records)
// and one per directory shard, plus work in proportion to the holds it
// returns and the ended records and entries it deletes (those past
// Retention, at most 1000 per list and pass); the keyspace is never
// scanned. Run it, or the records of ended orders are never deleted. Each
// script records its reply under a token drawn for the pass,
// so when the client resends it after a lost reply, the resend returns the
// recorded reply: the report of what a pass returned survives the retry.
// A line partial reverts emptied ends with its order but is not reported
// (it returns nothing); when such lines took part of a pass's limit, the
// pass peeks the same SKUs again, so a pass reports fewer holds than its
// limit only when no more are due. On a Cluster, a Confirm of an order on
// several slots that stopped between slot groups leaves some lines
// confirmed and others held; a pass that returns the held lines past the
// deadline expires the confirmed ones too (as a Confirm past the deadline
// would), in the round trip that ends the order's directory entry, so no
// unit stays sold that nothing sold. Orders reports a confirmed line beside
// an ended one as ended.
//
// What a pass does after its scripts (ending directory entries, expiring
// such confirmed lines) is not lost when the pass stops in between (a
// crash, a failed round trip): each script puts the orders whose lines it
// ends into the SKU's ends zset in the same step, and the pass takes them
// out only once it has finished them. Every pass peeks the ends zsets of
// the SKUs it visits for orders left there longer than a minute (the pass
// that put them there is then gone) and finishes them, if they are still
// the order it ended (its line's record still expired under the identity
// the entry names; or, once that record is gone, a directory entry of that
// identity that never got its Retention): a newer order under the same ID
// is left alone. Finishing twice changes nothing.
//
// # Limits
//
// A confirmed order can be refunded through Revert while its record lives
// (Retention after confirmation); later refunds are the database's business.
// On a Cluster or a Ring a Deduct's take trusts the bind before it: an
// attempt whose take is held up (a stalled client or server) until
// Retention after its order ended (its retry held the order, and the
// order was then reverted) meets no record, as a retry past Retention
// does, and holds anew under no directory entry: that hold cannot be
// confirmed and comes back at its deadline. Keep Retention well above
// the longest a Deduct call can stall.
//
// An order on several Cluster slots that holds some of its lines and not
// others (its Deduct under way between slot groups, stopped there, or
// refused with an undo that failed) cannot be settled before its
// deadline: Confirm and Revert answer stock.ErrUnknownOrder (the order is
// not there until every line is), a retry of the Deduct holds the order
// only if it can take the lines missing, and otherwise the reclaimer
// returns the lines held at the order's deadline and ends its entry. Settling it earlier needs the order's
// decision in one place that a take on another slot reads; a record of the
// missing lines written by Revert is not that place (a resent, concurrent
// or undone Revert cannot tell its own records from the order's).
//
// A line of an order on several Cluster slots that ends while another
// line of the order still holds (a Confirm or Revert that reached some
// slots and stopped) is read Retention from then, like any ended line.
// Keep Retention longer than the longest such an order can hold after
// that (its SKUs' MaxHoldTTL, and the reclaimer's delay past the
// deadline): with a shorter one the line reads as absent while the order
// holds, so a repeat Deduct takes it again, and the order's deadline
// returns the held line but leaves the ended one sold. The default (24h)
// covers orders that hold for less than a day.
//
// Confirm and Revert take three round trips on one server or slot (the
// directory, the lines, then the directory's end); RevertItems two (three
// when it empties the order), ExtendHold two. On n Cluster slots Revert
// takes four (a read of every line first), Confirm n + 3 (that read, then
// one call per slot group but the last, which carries them all),
// ExtendHold three, RevertItems five or six.
package redisstock
