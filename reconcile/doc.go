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
//	                    recorded                                  InFlight
//	                  + units the database holds for orders Redis
//	                    has already returned                      Returning
//	                  - units of restocks the database applied
//	                    and Redis has not yet                     Restocking
//
// (a pass completes the restocks it finds in flight, so their term is 0
// once it is done), and Redis has the database's settings of the SKU: its
// per-user limit, and its hold time and maximum hold time as
// Config.GateHold maps them, compared gate to record: a gate setting that
// gives the record's is the record's, also where the cap at
// stock.MaxHoldTTL makes several gate settings give it. A listing changed
// at the database alone, by a fallback while Redis was down, is given to
// Redis with the count's correction, in the same fenced write
// (redisstock Store.Relist). The in-transit terms vanish once the orders
// and restocks in flight settle, leaving Redis available = database
// available. The seeds'
// reconciliation overwrites Redis with the database count, which sells
// every in-flight hold twice; here a correction is a delta (redisstock
// Store.Adjust), applied only if the SKU's fence is still the one read: a
// generation drawn at random when the Redis state is created, which never
// repeats across flushes, restarts and rebuilds, and an epoch moved by every
// administrative write (put on sale, restock, rebuild, warm-up, another
// correction). Otherwise it is recomputed. There is no blind write: a SKU
// whose Redis state is gone is recreated from the database only if it still
// has none (redisstock Store.Rebuild, create-if-absent; a state another
// reconciler rebuilt meanwhile, and the holds taken from it, are left
// alone), and WarmUp's writes are fenced and refuse live holds in the same
// atomic step (redisstock Store.Relist).
//
// # Why live orders cannot make a correction wrong
//
// A pass reads each batch of SKUs in this order:
//
//	t0  Redis: each SKU's fence (Inspect)
//	t1  database, one consistent read-only view (REPEATABLE READ; a read
//	    transaction on SQLite): the stock rows, the held ledger lines and
//	    the restocks applied within Config.RestockWindow (operation IDs)
//	t2  Redis, one atomic script per SKU: the available count and fence,
//	    the holds zset, the Redis state of each line the database listed
//	    as held, and which of those restocks Redis applied
//	t4  Adjust(sku, fence read at t0, delta), then Restock at Redis, by
//	    operation ID, of each restock the database had and Redis had not
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
//     it at t1, whatever it has by the time it is asked, since the view is
//     of t1. It is InFlight: counted on the Redis side only, subtracted
//     once. This is the race a naive design gets wrong: reading the order's
//     state after the database recorded it would count it on both sides.
//   - g before t1: both readings see it as they are; a hold the record
//     holds at t1 is counted by both (held there and held or confirmed in
//     Redis). A hold the record does not hold at t1 is InFlight while the
//     record does not know the order (not recorded yet). One whose order
//     the record had returned by t1 (reverted, refunded or expired; asked
//     in the same view, after t2), with the order's user and, on the SKU,
//     the units the record's line still takes, is a hold whose end Redis
//     missed, since every step of the flow ends an order at the gate
//     before the record (stock/tiered): an order cancelled at the record
//     alone by a node whose breaker kept traffic off Redis, or taken again
//     by a repeat Deduct at a gate that lost it (which the flow ends the
//     same way). The pass ends it at Redis with RevertHeld
//     (stock.HoldReverter: the hold's units and the user's quota go back
//     and the order ends expired there, only while Redis still holds it,
//     in one step), and reads the SKU again (ActionEnded). An order Redis
//     no longer holds is left as it is, and the pass reports no end of it:
//     one another pass or the flow ended meanwhile, or one a late Confirm
//     confirmed at Redis since the reading (a sale the next reading sees
//     as drift, never refunded by the pass). A Confirm or a repeat Deduct
//     of an order the pass ended is answered stock.ErrHoldExpired, as the
//     reclaimer's end at the hold's deadline would be. A hold under the ID of an order the record
//     returned that is not that order (another user or count: a gate past
//     its Retention took another order under a used ID) stays InFlight.
//     Until the pass ends it (a dry run) the hold is counted InFlight,
//     on the safe side: Redis is corrected down, and the next pass brings
//     it back up.
//   - A hold whose order the record confirmed by t1 (paid at the record
//     alone) stays InFlight, and the pass does not end it at Redis: the
//     gate cannot tell that order's own hold from a copy a retry past its
//     Retention took again (the record answers such a retry as the repeat
//     it is), and confirming a copy would count its user's units twice at
//     the gate for good (passes never repair per-user counts). This is a
//     limit: the hold keeps its units from sale at Redis (Redis is
//     corrected down by them) until its deadline, when Redis's reclaimer
//     returns it, and with it the user's quota there; the next pass then
//     finds the tiers agreeing.
//
// Confirm, Revert and the reclaimers move an order's units between counts
// on each side; the one-sided moments they pass through are the two
// in-transit terms: Redis holds, database does not (recording pending) is
// InFlight;
// database holds, Redis returned it (a Revert between its two steps, a hold
// the gate reclaimed first) is Returning. Anything between t2 and t4 moves
// units on both sides without changing the delta they should differ by,
// and an administrative write between t0 and t4 moves the fence, so the
// Adjust is refused and the SKU read again (Config.MaxAttempts). A fence
// read at t0 differing from the one at t2 means such a write fell between
// the readings: the SKU is read again before anything is computed. A flush
// and a rebuild between t0 and t4 (by another reconciler) give the SKU a
// new generation: the Adjust, computed for the state the flush destroyed,
// is refused, whatever epoch the new state has reached.
//
// # Partial reverts, own hold times and extended holds
//
// Both sides count what is left of each order line after partial reverts
// (stock.PartialReverter): Redis's holds and the database's held lines
// report the units less those given back. A partial revert reaches Redis
// first (stock/tiered), so a held line Redis holds less of than the
// database is Returning by the difference, and one it holds more of
// (given back at the database alone, by a fallback) is InFlight by it. A
// refund of a confirmed order between the two steps, and a line a partial
// revert emptied at Redis alone, are not visible as in transit: a pass
// then corrects Redis down by those units (never above what the database
// can take), and the next pass, once the database has them, back up.
//
// A pass compares counts, not deadlines, so an order's own hold time or an
// extended deadline changes nothing in the promise. A gate rebuilt from the
// database gets the SKU's settings back through Config.GateHold: its hold
// time and its MaxHoldTTL (the record's less the same grace), so the
// bounds of own hold times and extensions hold again. By default that is
// the mapping of stock/tiered with its default Config (the record holds
// twice as long as the gate); a tiered flow with its own RecordGrace
// passes its Manager's GateHold, and a Reconciler over the stores of a
// stockguard.Shop is made with Shop.NewReconciler, which passes the
// Shop's (New cannot tell a gate's grace). The holds the
// database kept are counted taken by the rebuilt state; stock/tiered's
// reclaimer returns each record copy at the gate deadline it reads back
// from the record's, extended or not.
//
// # Restocks in flight
//
// A restock (stock/tiered) reaches the database at r, then Redis at g > r,
// each applied once per operation ID. For a restock of the window:
//
//   - r and g before t0: both sides count it; Redis reports it applied.
//   - r before t1, g after t2: the database counts it, Redis does not and
//     says so at t2. It is Restocking: left out of the target (it is not
//     drift), then completed at t4 by a Restock with its operation ID,
//     which Redis applies once whether that call or the restock's own
//     second step comes first.
//   - g between t0 and t2: the fence moved between the readings; the SKU
//     is read again.
//   - r after t1 (so g after t0): if g is before t2, the fence moved; if
//     after, neither reading counts it and the delta leaves it alone.
//
// A rebuild counts every restock the view of t1 saw (they are in the
// database's count) and marks them applied on the new state, so their
// second step adds nothing. A restock that reached the database more than
// the window ago and never reached Redis is drift, which the correction
// repairs: a restock's second step must reach Redis within the window (the
// window is under the gate's Retention, which New checks). The window is
// the horizon of a restock's retry, so by default it is as long as the
// gate's memory of operation IDs lets a pass trust Redis's answer, with
// room for clocks and the pass: half the gate's Retention. A Redis outage
// shorter than that leaves every restock it caught in flight, completed
// under its operation ID, and a retry of one adds nothing more; counted as
// drift it would add the units a second time.
//
// One interleaving escapes a single reading: an order recorded at the
// database after t1 and confirmed at the gate before t2 (Redis counts it
// sold; the view of t1 does not know it, and it is in neither the holds
// nor the held lines), which raises the target by its units. So a
// correction is applied only when a second reading, made right after the
// first, computes the same one; a SKU whose two readings differ is read
// again (Config.MaxAttempts). On a busy SKU under load each reading can
// catch another such order, and two readings then agree on a rise that
// live traffic alone explains; so the second reading also reads the
// database again after Redis (t3), in a second view. From t2 and t3 the
// error runs the other way (an order taken at the gate after t2 and
// recorded before t3 is counted by the database alone), and an order sold
// at the gate by t2 is known to the view of t3: a correction upward is at
// most what that reading shows, so no order between t1 and t2 raises
// Redis. (Only an order refunded at both tiers between t2 and t3 raises
// that reading; both readings must be raised at once for a rise to pass.)
// A correction downward is the second reading of t1 and t2. A hold
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
// error wrapping ErrUnresolved. An order the record returned and Redis
// still holds is ended at Redis whatever its size (ActionEnded): it is
// the order's own end, applied once, not a correction of a count. Each
// SKU is reported once, by its final reading: a SKU whose holds the pass
// ended is ActionEnded if that reading needed nothing, or carries
// Correction.Ended on the entry of what it did need; Delta is never the
// units ended. Only the ends RevertHeld made count: two passes racing to
// end one order report it once. A pass that stops on an error (Redis
// down) after ending holds of a SKU it has not read again reports that
// SKU with ActionFailed, the error and Correction.Ended, so that every
// end is reported once.
// Config.DryRun only reports. Every SKU found out of agreement reaches
// Config.OnCorrection with its before and after figures and the terms
// above.
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
//     the database has it is rebuilt from the database by any pass, only
//     if it still has no state when the rebuild runs. A pass whose rebuild
//     was refused because another pass claimed the SKU since waits for
//     that pass's rebuild (up to twice as long as its own attempt took)
//     before reading the SKU again: claiming it again at once would void
//     the other pass's claim, and two passes doing so to each other never
//     rebuild. A pass also puts a SKU whose Redis state it read back in
//     the gate's registry if a loss of the registry's key alone (its
//     Cluster master lost its data) dropped it, so that the gate's
//     reclaimer returns that SKU's holds again (redisstock
//     Store.Snapshot).
//   - Before a breaker closes: Recalibrate has the signature of
//     degrade.Config.Recalibrate.
//
// # Cost
//
// A batch of Config.BatchSize SKUs costs a few Redis round trips (fences,
// the atomic snapshots, the hold quantities) and one short read-only
// database transaction of three statements (the stock rows, the held lines, the restocks), whatever the batch
// size; SKUs that need a correction are read a second time (with a second
// read-only transaction after the Redis reading) and corrected with one
// Adjust each, and each restock in flight costs one Restock. Holds Redis
// has that the database does not hold (usually the few orders between
// the tiers) cost one more statement per 1000 in the first transaction;
// each of those orders the database had returned costs one RevertHeld at
// Redis, and its SKU a reading again.
// RepairAll works on Config.Workers batches at once. Any number of
// Reconcilers may run at once; they are safe for concurrent use.
//
// # Stores
//
// New takes the gate and the record as interfaces (Gate, Record), which
// *redisstock.Store and *sqlstock.Store implement, so a wrapped store
// (metrics, tracing, fault injection) that forwards those methods can be
// reconciled; a nil store fails at construction.
package reconcile
