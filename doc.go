// Package stockguard is the composed shop: one constructor for the flow
// most shops want, a Redis gate in front of a SQL record, wired so that no
// setting two parts must agree on can be got wrong.
//
//	rdb := redis.NewUniversalClient(redisstock.FailFast(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}}))
//	db, err := sql.Open("mysql", "shop@tcp(127.0.0.1:3306)/shop?interpolateParams=true")
//	shop, err := stockguard.New(rdb, db, stockguard.Config{})
//	err = shop.CreateTables(ctx)
//	go shop.Run(ctx) // reclaimers, reconciliation, repairs
//	err = shop.PutOnSale(ctx, stock.Listing{SKU: "phone", Units: 100, PerUserLimit: 1, HoldTTL: 15 * time.Minute})
//	err = shop.Deduct(ctx, stock.Order{ID: "order-42", UserID: "alice", Items: []stock.Item{{SKU: "phone", Qty: 1}}})
//	err = shop.Confirm(ctx, "order-42")
//
// # What New builds
//
// A Shop is the parts of this module, composed:
//
//   - the gate, stock/redisstock over your Redis client, which admits
//     orders in one round trip;
//   - the record, stock/sqlstock over your database, the truth;
//   - the flow, stock/tiered: the gate first, then the record, directly
//     or through your queue (Config.Flow.Recorder and Shop.Settle);
//   - the breaker, package degrade, around the flow: while Redis fails,
//     orders go to the record alone at a limited rate, and back to Redis
//     only once it has been recalibrated;
//   - reconciliation, package reconcile: the recalibration, the repairs of
//     drift the flow reports, a full pass every minute and after Redis
//     lost its data;
//   - reclaimers that return unpaid holds at both tiers.
//
// Every part keeps its own promises (see each package), and New derives
// what they must agree on, once: one Clock and one Observer for all, the
// gate hold time a rebuilt gate gets back from the record's (the flow's
// grace), the record's dialect (asked of the server), the breaker's
// recalibration and fallback. A part Config in Config that sets one of
// them is refused. A part that you wire by hand instead derives the
// setting itself or refuses a contradictory one; the Shop is the wiring
// the project's system-level checker and fault matrix run.
//
// # Promises
//
// The six of the design, for the Shop as a whole, on any number of nodes:
// no oversell, exactly once per order ID, no leak past a deadline,
// agreement after reconciliation, one round trip on the hot path, and the
// gate never admitting more than the record can take. Errors follow the
// outcome rule of package stock: a business error is final; an error
// matching stock.ErrUnknownOutcome means retry the same call with the same
// order ID; any other error applied nothing.
package stockguard
