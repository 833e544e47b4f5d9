// Package reconcile keeps the Redis gate (stock/redisstock) in agreement
// with the SQL record (stock/sqlstock), the source of truth: it warms Redis
// up before a sale, repairs drift while the sale runs, rebuilds what a
// flush or a restart lost, and recalibrates Redis before a degrade breaker
// sends traffic back to it.
//
// # The promise
//
// After a pass, for every SKU (design invariant 4):
//
//	Redis available = database available
//	                  - units Redis holds for orders the database has not
//	                    recorded (or has already returned)        InFlight
//	                  + units the database holds for orders Redis
//	                    has already returned                      Returning
//
// Both in-transit terms vanish once the orders in flight settle, leaving
// Redis available = database available. The seeds' reconciliation
// overwrites Redis with the database count, which sells every in-flight
// hold twice; here a correction is a delta (redisstock Store.Adjust), applied
// only if no administrative write (put on sale, restock, another
// correction) touched the SKU since it was read, and recomputed otherwise.
// Never a blind SET, except where there is nothing to race: a SKU whose
// Redis state is gone is put on sale again (ActionRebuilt), and WarmUp
// overwrites SKUs that have no live holds (or when forced).
//
// # Why live orders cannot make a correction wrong
//
// A pass reads each batch of SKUs in this order:
//
//	t0  Redis: each SKU's administrative epoch (Inspect)
//	t1  database, one consistent read-only view (REPEATABLE READ; a read
//	    transaction on SQLite): the stock rows and the held ledger lines
//	t2  Redis, one atomic script per SKU: the available count, the holds
//	    zset, and the Redis state of each line the database listed as held
//	t3  the same database view, so still as of t1: the state of the orders
//	    Redis holds that the database did not list as held
//	t4  Adjust(sku, epoch read at t0, delta)
//
// Every figure of one SKU is then as of t1 on the database side and as of t2
// on the Redis side, and the orders known to only one side are exactly the
// ones that explain the difference. An order takes stock at the gate first
// and at the record after (stock/tiered), so for an order whose gate hold
// was placed at g:
//
//   - g after t2: neither reading sees it (the record cannot have it at t1
//     < g). The correction is a delta, so the units it takes later are not
//     overwritten.
//   - g between t1 and t2: Redis counts it at t2; the database did not have
//     it at t1, whatever it has by t3, because t3 reads the view of t1. It
//     is InFlight: counted on the Redis side only, subtracted once. This is
//     the race a naive design gets wrong: reading the order's state after
//     the database recorded it would count it on both sides.
//   - g before t1: both readings see it as they are; a hold the record has
//     at t1 is counted by both (held there and held or confirmed in Redis),
//     one it has not recorded yet is InFlight.
//
// Confirm, Revert and the reclaimers move an order's units between counts
// on each side; the one-sided moments they pass through are the two
// in-transit terms: Redis holds, database does not (recording pending, or
// the database already returned it: Redis will return it too) is InFlight;
// database holds, Redis returned it (a Revert between its two steps, a hold
// the gate reclaimed first) is Returning. Anything between t2 and t4 moves
// units on both sides without changing the delta they should differ by,
// and an administrative write between t0 and t4 moves the epoch, so the
// Adjust is refused and the SKU read again (Config.MaxAttempts).
//
// One interleaving escapes a single reading: an order recorded and
// confirmed at the database and confirmed at the gate, all between t1 and
// t2 (Redis counts it sold; the view of t1 does not know it, and it is in
// neither the holds nor the held lines). So a correction is applied only
// when a second reading, made right after the first, computes the same one;
// a SKU whose two readings differ is read again (Config.MaxAttempts). Such
// a moment does not recur identically, while real drift does. A hold
// whose line record is gone (a flush that kept the holds zset) is not in
// flight: Redis can never return it. What no reading can see is a step the
// flows have not taken yet, e.g. a sale confirmed by the database after the
// gate's hold expired (stock/tiered refunds it there afterwards): Redis is
// then corrected down, the safe direction, and the next pass brings it
// back. A database write made
// without Redis (an order taken by the degrade fallback, a restock that
// reached only the database) is drift, and a pass repairs it.
//
// # Policy
//
// Corrections up to Config.MaxAutoFix units are applied; larger ones are
// reported (ActionLeft) and left for a person, and the pass returns an
// error wrapping ErrUnresolved. Config.DryRun only reports. Every SKU found
// out of agreement reaches Config.OnCorrection with its before and after
// figures and the terms above.
//
// # When it runs
//
//   - On demand: Repair (some SKUs), RepairAll (every SKU of the database,
//     paged), WarmUp (before a sale).
//   - On a schedule: Run, a full pass every Config.Interval.
//   - When Redis lost its data: Run checks every Config.WatchInterval for a
//     changed run_id on any server (each master of a Cluster restarts and
//     fails over on its own) and for the marker key each full pass sets
//     (FLUSHALL keeps the run_id). A SKU whose Redis state is missing while
//     the database has it is rebuilt from the database by any pass.
//   - Before a breaker closes: Recalibrate has the signature of
//     degrade.Config.Recalibrate.
//
// # Cost
//
// A batch of Config.BatchSize SKUs costs a few Redis round trips (epochs,
// the atomic snapshots, the hold quantities) and one short read-only
// database transaction of three or four statements, whatever the batch
// size; SKUs that need a correction are read a second time and corrected
// with one Adjust each. RepairAll works on Config.Workers batches at once.
// Any number of Reconcilers may run at once; they are safe for concurrent
// use.
package reconcile
