// Package redisstock is the Redis+Lua backend of stock.Manager: the fast
// gate a flash sale runs through. A *Store implements stock.Manager and
// stock.Reclaimer on any redis.UniversalClient (standalone, Sentinel or
// Cluster). All its methods are safe for concurrent use by any number of
// processes sharing one Redis.
//
// # Key layout
//
// Every key of one SKU carries the hash tag {sku}, so every script touches
// one slot and is legal on Redis Cluster:
//
//	<prefix>:{<sku>}:state     hash avail, held, sold, limit, hold_ms, ver, epoch
//	<prefix>:{<sku>}:holds     zset order ID -> hold deadline (ms)
//	<prefix>:{<sku>}:users     hash user -> units held + bought
//	<prefix>:{<sku>}:o:<order> hash record of one order line: st (held,
//	                           confirmed, reverted, refunded, expired), qty,
//	                           user, dl (deadline ms), id (the order's identity)
//	<prefix>:order:{<order>}   string, the order's directory entry: its
//	                           identity, user + "\n" + canonical items
//	<prefix>:skus              set of SKUs ever put on sale (the reclaimer's map)
//
// ver counts every write to a SKU; epoch counts only the administrative ones
// (PutOnSale, Restock, Adjust), which is what a reconciler compares before it
// corrects a count (see [Store.Adjust]).
//
// # Deduct: one script call, shared
//
// Deduct takes one of two paths, chosen by the client New is given.
//
// Without hash slots (a *redis.Client, Sentinel failover: anything but a
// *redis.ClusterClient) every key lives on one server, so the order's
// directory entry goes into the same script as its lines
// (stock_deduct_batch.lua): the script checks every line (record, SKU,
// stock, per-user limit), then binds the order ID (SET NX GET; other items
// under that ID are stock.ErrConflict), then takes the stock, adds the
// per-user count, writes each line's record and adds the order to each
// SKU's holds zset with its deadline — one atomic step. A refused order
// (sold out, the common case once a sale is gone) writes nothing, not even
// its directory entry, and costs no second round trip.
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
// dispatch, the per-SKU reads and writes: one HMGET and one HSET of the
// state, one ZADD, per SKU per call).
//
// On a *redis.ClusterClient every script must stay in one slot, and the
// directory entry's slot is not its SKUs'. Deduct sends one pipeline: SET
// <directory> NX GET (binding the order ID to its items) and the deduct
// script (stock_deduct.lua) for the first slot group. When the directory
// names other items the call fails with stock.ErrConflict and undoes what
// the script took; a refused order frees the directory entry in a second
// round trip. This path is not batched.
//
// An order whose SKUs share a slot (always, on a non-cluster client) is one
// script: all lines or none, without a lock. On a Cluster the lines are
// grouped by slot and the groups are taken one after another in sorted
// order; when a group fails, the groups already taken are undone. If the
// process dies midway, the lines it took are in their SKUs' holds zsets and
// the reclaimer returns them at their deadline: nothing is oversold and
// nothing stays held.
//
// # Time
//
// Deadlines are computed from the Store's stock.Clock and passed to the
// scripts in milliseconds; the scripts never read the server's TIME. Record
// lifetimes (Redis TTLs) are relative, so they do not depend on the two
// clocks agreeing.
//
// # Idempotency and unknown outcomes
//
// Every script can run twice with the effect of running once: go-redis
// retries a command after a read timeout, and the caller retries after
// stock.ErrUnknownOutcome. A held line's record has no TTL, so a hold never
// loses its record before it is confirmed or returned (however long the
// reclaimer is down); once it ends, the record and the order's directory
// entry are kept [Config.Retention] longer, so a retry within that time
// learns the true outcome.
//
// A SKU whose state hash is gone (flushed, evicted) is an unknown SKU until
// it is put on sale again (package reconcile rebuilds it from the
// database): confirm, revert and reclaim still close its orders' records,
// but never recreate a partial count that could be sold from. An error returned after a
// request may have reached Redis (a timeout, a reset connection, a canceled
// context) matches stock.ErrUnknownOutcome; one from before it was sent
// (dial failure, pool timeout) does not.
//
// # Reclaim
//
// [Store.ReclaimExpired] visits the SKUs of the registry set, peeks each
// one's due holds (pipelined), and runs one script per SKU with due holds
// that returns them atomically. A pass costs one cheap peek per SKU on sale
// plus work in proportion to the holds it returns; the keyspace is never
// scanned.
//
// # Limits
//
// A confirmed order can be refunded through Revert while its record lives
// (Retention after confirmation); later refunds are the database's business.
// Confirm and Revert take two round trips (the directory, then the lines).
package redisstock
