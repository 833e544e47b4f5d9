// Package stocktest is the conformance suite of the stock.Manager contract,
// shaped like testing/fstest: every stockguard backend runs it, and so can
// any implementation of your own.
//
//	func TestConformance(t *testing.T) {
//		stocktest.Run(t, func(t *testing.T, clock stock.Clock) stock.Manager {
//			return mybackend.New(..., clock) // empty: no SKUs on sale
//		})
//	}
//
// The factory is called once per subtest and must return a Manager over an
// empty store (no SKUs on sale, no orders) that reads time only from clock.
// The Manager must also implement stock.Reclaimer. Subtests place orders
// from many goroutines, so the store must allow concurrent use.
//
// The suite proves the promises of package stock: exact counts under
// concurrency (no oversell, no lost unit), exactly-once deduct and revert,
// per-user limits, expiry and reclaim with several reclaimers, the order
// state machine, validation before I/O, and a linearizability check of a
// concurrent history (github.com/anishathalye/porcupine).
package stocktest
