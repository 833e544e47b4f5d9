// Package systemtest is the system-level checker of stockguard: where
// package stocktest proves one stock.Manager at a time, systemtest drives
// the composed flow (several application nodes, each with its own gate
// and record composed by stock/tiered, sharing one Redis and one database,
// plus reconcile passes, reclaimers and restocks) through random
// interleavings with faults at every hand-off, and checks the design's
// invariants after every step and at rest. The defects it is built for
// live at the seams: gate to record, one Cluster slot to the next, a call
// to its retry.
//
// # What a run does
//
// Run takes Config.Steps steps chosen by Config.Seed, one at a time:
// buyers place multi-SKU orders (per-user limits apply), pay, cancel or
// never pay; callers retry calls whose answer was lost, with the same
// order or operation ID, on any node, and now and then repeat a Deduct
// already told yes (a redelivered message); the clock moves by up to
// Config.MaxTick (hold times are seconds); where the flows implement
// them, buyers give back some units of an order (stock.PartialReverter,
// under a new operation ID, retried with it), extend a hold within its
// bound (stock.HoldExtender) and place orders with their own hold time
// (stock.Order.HoldTTL; Config.NoPartial leaves these out); nodes run the reclaimer
// (tiered ReclaimExpired); a reconcile pass runs (Config.Repair); SKUs are
// restocked under new operation IDs; the gate loses its data
// (Config.Flush) or its server restarts (Config.Restart).
//
// About a third of the calls get a fault, at a hand-off chosen by the
// seed: before or after the n-th call to a tier (the checker wraps each
// node's gate and record), or the n-th Redis command (through RedisHook):
//
//   - gate-down, record-down: the call fails before it is sent;
//   - gate-lost, record-lost, redis-lost: it runs and its reply is lost;
//   - record-refuses: the record refuses a Deduct as sold out;
//   - redis-resend: go-redis sends the command twice (its retry after a
//     timeout) and the caller gets the second reply;
//   - dies, redis-dies: the node dies there, so the call is abandoned
//     half-way (every later hand-off fails unsent, its context ends);
//   - parks, redis-parks: the call stops there while other steps run,
//     until a later step resumes it or kills its node. This is how a
//     reconcile pass is made to stall between its reading and its
//     correction, a restock between its record and gate steps, or a
//     Cluster Deduct between two slots.
//
// Only one call runs at a time (parked ones wait at their hand-off), so a
// seed replays the same interleaving.
//
// At the end the run comes to rest: every parked call is resumed or its
// node dies, what the nodes that died left to lapse by itself lapses
// (Config.Lapse: a gate's transfer leases), a reconcile pass rebuilds
// what a flush lost, restocks still in doubt are retried with their IDs,
// the clock moves past every hold (Config.Settle), a reclaim drains
// everything due and a last reconcile pass runs, all without faults.
//
// # What it checks
//
// The checker keeps its own books: the units put on sale and restocked
// (restocks told nil, and those in doubt), and for every order what it
// asked, when, and what it was told. With the two tiers' levels and order
// states it checks, after every step:
//
//   - record-oversold, conservation: the record's held + sold never
//     exceed the units put on sale plus restocked, and available + held +
//     sold equals them (up to restocks whose answer was lost);
//   - exactly-once: the record's held and sold units are the sums of its
//     held and confirmed orders (what partial returns left of each line,
//     as each tier reports it), each order's lines are the ones asked, and
//     neither tier gave back more of a line than the returns sent for it;
//   - gate-holds: the gate's held units belong to orders it reports held;
//   - gate-bound (design invariant 6), below;
//   - user-limit: no user holds or bought more of a SKU than its limit, at
//     the record, nor (settled orders) at the gate;
//   - told-yes: an order told nil is in the record (held or confirmed)
//     with its lines; a Confirm told nil is confirmed there; a Revert told
//     nil is held by neither tier; a return told nil is given back at the
//     record; an extension told nil holds at each tier until at least its
//     deadline; a buyer told yes who then pays, or repeats the Deduct,
//     before the deadline (the latest extension told nil included) is not
//     refused;
//   - refusal-took-stock: an order refused for good (sold out, limit,
//     conflict) on its only attempt holds nothing at either tier;
//   - contract: no ErrUnknownSKU for a SKU on sale, no ErrInvalid for a
//     valid call, no ErrExceedsOrder or ErrConflict for a return within
//     what the order has left, no ErrHoldTooLong for an extension within
//     the order's bound;
//   - held-past-deadline: after a reclaim that returned nil and left
//     nothing due, no order whose deadline (at the latest: its last Deduct
//     plus its hold time, or the latest extension sent) passed before the
//     reclaim began is held at either tier.
//
// The gate bound is checked for every SKU the gate has a state for (one
// that lost it admits nothing):
//
//	gate available <= record available - in flight + returning
//
// In flight is the units of settled orders the gate holds and the record
// neither holds nor confirmed: holds at the gate not yet in the record.
// Returning is the units the record still holds or sold for orders a call
// is half-way through: parked, died, answered with an infrastructure
// error and not yet retried, or past their deadline while the latest
// reclaim failed (it may have returned their holds at the gate only).
// That is the one window in which the gate may count a unit before the
// record has it back; a settled order never loosens the bound. An order
// is settled when no call about it is parked and its latest call got a
// definitive answer (nil or a business error).
//
// At rest it checks again, and exactly: nothing is held at either tier,
// every restock is applied once (record available + held + sold = units
// put on sale + restocked), and drift is 0 (gate available == record
// available, nothing being in flight).
//
// A run stops at the first step that broke anything. Result.Err names the
// seed, the violations and the trace of the steps before: one line per
// step with the node, the call, its planned faults, its answer and the
// hand-offs it passed (the faulted one marked with "!").
//
// # Wiring
//
// The core takes its parts through Config: Node builds a node's flow over
// its own gate and record, putting the checker's hand-off points (the Wrap
// it is given) around the two (stockguard.Config.Wrap takes it as it is),
// Gate and Record read the tiers for the checks, Clock is the clock they
// all read, Repair runs a reconcile pass, Flush and Restart make the gate
// lose its data. Install RedisHook on the gate's and the reconcilers'
// Redis clients for the Redis-level faults, and give redisstock MaxBatch 1
// (a parked call inside a shared batch would hold up the others). The
// gate's Retention must outlast a run's clock (default Settle is 1h), or a
// late retry is rightly not recognised.
//
// The package's own tests build every node as a stockguard.Shop, the shop
// a user wires from the README, with breakers that never open: the gate
// bound it checks assumes every node sends its orders to the gate (the
// breaker's outage paths are proven by package degrade's tests and the
// fault matrix, internal/chaos). They run on miniredis (alone, behind a
// Cluster client, and two behind a Ring) and SQLite always, and real
// Redis, a Redis Cluster, MariaDB and PostgreSQL when the STOCKGUARD_*
// variables name them (a redis-server the test starts on a port of its own
// for restarts; shared servers are only ever cleared of the run's keys).
//
// Config.Script replaces the random steps with given ones (Step), for
// tests of one interleaving.
//
// # Reproducing a seed
//
// A failure prints its seed; run it again alone with
//
//	STOCKGUARD_SYSTEMTEST_SEED=<seed> go test -run TestSystem/<backend> ./stock/systemtest/
//
// (Seeds returns only that seed), and add STOCKGUARD_SYSTEMTEST_TRACE=1 to
// see every step as it runs. The interleaving and the faults depend only
// on the seed and the wiring; what the servers answer may still differ
// between runs where a backend draws random tokens or reads the wall
// clock (real Redis key lifetimes).
//
// A Run is not safe for concurrent use with itself on the same wiring; its
// Config functions are called from one goroutine at a time, except that a
// parked call stays blocked inside them while later ones run.
package systemtest
