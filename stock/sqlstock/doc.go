// Package sqlstock is the SQL record of sale: stock.Manager,
// stock.Reclaimer, stock.OrderReader, stock.HoldLister,
// stock.HoldReverter, stock.PartialReverter and stock.HoldExtender over
// MySQL, MariaDB, PostgreSQL or SQLite (modernc.org/sqlite or
// github.com/mattn/go-sqlite3), with a ledger that makes every call
// exactly-once by order ID, an operations table that makes every restock
// exactly-once by operation ID and a returns table that does the same for
// every partial revert. Use it alone for a shop
// whose database can take its peak, behind the Redis gate (package
// stock/redisstock) as the record that survives a Redis failover, or as
// the degraded path when Redis is down.
//
//	db, _ := sql.Open("mysql", "user@tcp(db:3306)/shop?interpolateParams=true")
//	s, _ := sqlstock.New(db, sqlstock.Config{}) // MySQL or MariaDB: the server says which
//	_ = s.CreateTables(ctx) // or run sqlstock.Schema(...) in your migrations
//
// New takes the *sql.DB of database/sql: sql.Open's, one wrapped for
// tracing (otelsql: set Config.Dialect), or pgx's stdlib.OpenDBFromPool on a pgxpool.Pool
// (see ExampleNew_pgxpool); a sqlx user passes db.DB. The driver names
// the dialect: pgx's stdlib and lib/pq are PostgreSQL, modernc.org/sqlite
// and mattn/go-sqlite3 SQLite. A driver New cannot tell (another one, or
// one wrapped by another) is refused unless Config.Dialect names the
// dialect. go-sql-driver/mysql serves MySQL and MariaDB alike, and their
// servers bound a lock wait differently (MariaDB reads MySQL's bound as a
// comment, and waits its own 50s). With
// Config.Dialect zero, the Store's first call that reaches the database
// asks the server which it is, with one query (SELECT VERSION()) on that
// call's context; concurrent first calls wait for that one answer, and
// every later call pays one atomic load. A question that fails is
// returned as it is (nothing was written) and asked again by the next
// call. The same query checks a Config.Dialect that is set: one the
// server contradicts is refused by every call, before anything is
// written. New itself sends nothing.
//
// # Tables
//
// The application's stock table has one row per SKU: available, held and
// sold units, a version, the per-user limit, the hold time and the
// maximum hold time (names in Config.Columns; New refuses any name that
// is not a plain identifier, before it touches the database, and quotes
// every name it uses). The library's ledger has one row per order line,
// keyed by (order ID, line number in SKU order), with its user, state,
// deadline, the bound of its deadline and the units partial reverts gave
// back; its operations table (the ledger's name + "_ops") has one row per
// applied restock, its returns table (the ledger's name + "_returns") one
// per applied partial revert; see Schema. The counts are kept in the
// stock row, so Levels is one primary-key read.
//
// The stock table's SKU column must compare SKUs as the ledger does, byte
// for byte: on MySQL and MariaDB a binary string or a binary (_bin)
// collation, on PostgreSQL a deterministic collation, on SQLite BINARY
// (the default). A collation that matches SKUs differing in case or
// accents (MariaDB's default utf8mb4_general_ci, MySQL's
// utf8mb4_0900_ai_ci, a nondeterministic ICU collation, COLLATE NOCASE)
// would sell one row under two SKUs whose orders and per-user limits the
// ledger counts apart, so the Store refuses it: every call fails with an
// error wrapping stock.ErrInvalid (a business answer, never counted as a
// failure of the database by a breaker) that names the table, the column
// and the collation and how to change it, before anything is written.
// The Store reads the collation from the catalog with its first call that
// reaches the database (see Config.Dialect), and with every call until it
// has found the column (so a table made after its first call, by
// CreateTables or a migration, is read too); a table altered later is not
// seen until the process restarts. On SQLite the collation is read from
// the table's primary key, as declared on the column: a SKU column that
// is not the primary key is not checked.
//
// Tables created by the version before partial reverts and hold
// extensions lack the maximum hold time, the ledger's returned and
// bound_ms columns and the returns table: CreateTables adds them (each
// column is probed with a SELECT first, and a CREATE ... IF NOT EXISTS
// that lost PostgreSQL's catalog race to another process is run again, so
// it is safe to run again and from many processes at once), and Upgrade gives the statements for a migration
// tool. Rows written before mean: the SKU's maximum hold time is its hold
// time, the order's hold cannot be extended, nothing was returned. Until
// the tables are upgraded the Store's statements fail with the
// database's own error naming the missing column or table. Do not run
// processes of both versions on one set of tables: the older ones do not
// count partial returns.
//
// # Strategies
//
// All three write the ledger and move the units in one transaction, and
// lock stock rows in sorted SKU order (canon.Sorted: byte order, also in
// an application's own stock table), so multi-SKU orders never deadlock
// one another. A statement that locks several rows at once sorts them in
// byte order on PostgreSQL; on MySQL and MariaDB, whose InnoDB locks a
// statement's rows in the index's (the collation's) order, several rows
// are locked with one statement each, unless the SKU column sorts in
// UTF-8's byte order (a binary string, or a UTF-8 or ASCII _bin
// collation, as in the tables CreateTables makes; not the binary
// collation of another charset, such as latin1_bin).
//
//   - Atomic (default): INSERT the ledger lines, then per line
//     "UPDATE ... SET available = available - n WHERE sku = ? AND
//     available >= n", then COMMIT. The row is locked only from the UPDATE
//     to the COMMIT, as in the bare "INSERT ledger + UPDATE" transaction.
//     The UPDATE also checks the SKU's limit and hold time against the
//     values the Store remembers (Config.SettingsCache), so the deadline
//     and the limit used are the row's own without reading the row first.
//     A remembered value never refuses an order: an order it would refuse,
//     or whose UPDATE found other settings, is tried again at once with
//     the row's settings.
//     On PostgreSQL a one-line order of a SKU without a per-user limit
//     and without its own hold time, when no other deduct of that SKU is in flight in the Store, is one
//     autocommit statement (UPDATE ... RETURNING feeding the INSERT): one
//     round trip instead of four, but the row stays locked while the
//     ledger row is written, so a hot SKU takes the transaction.
//     Concurrent Atomic Deducts of the same SKUs are grouped (group
//     commit; Config.MaxGroup, default 64, 1 turns it off). A caller that
//     finds fewer than two transactions of its SKUs in flight in the
//     Store (on SQLite, fewer than one of any SKUs) goes at once, alone,
//     as above; the others queue, and when one ends up to MaxGroup
//     queued orders go in one transaction: one multi-row ledger INSERT,
//     then one conditional UPDATE per SKU for the group's sum, then
//     COMMIT. A hot row is locked once per group
//     instead of once per order; orders spread over many SKUs rarely
//     queue and run as they would alone. When the sum does not fit, or a
//     SKU has a per-user limit, the group is decided against its rows
//     read FOR UPDATE: orders in arrival order, each all-or-nothing
//     against what the orders before it took, so an order that fits on
//     its own is never refused because a bigger one before it did not;
//     per-user limits count the user's earlier orders of the group. A
//     refused order gets the answer it would get alone (sold out, limit,
//     invalid). An order ID that appears twice in a group is written
//     once; the second call runs when the group ends and gets the repeat
//     answer. A failure that proves the group applied nothing (an ID
//     already in the ledger, a deadlock) splits it: each order runs
//     again alone, so one bad order never fails the others. A group whose
//     COMMIT may have applied leaves each caller to learn its own
//     order's outcome by its ID, under the outcome rule below. A caller
//     whose context ends while it is queued, or before its group writes,
//     leaves with nothing sent.
//     Grouping pays where many callers of one process buy the same SKUs at
//     once (a flash sale on the database alone, or the degraded path when
//     Redis is down); with few callers, or orders spread over many SKUs,
//     callers rarely queue and it costs nothing (on SQLite they share the
//     one writer, so groups mix SKUs). Orders are grouped per
//     Store: Stores in other processes still contend for the row.
//   - Optimistic: read the row, then "UPDATE ... WHERE version = ?";
//     a lost race is retried with jittered exponential backoff
//     (github.com/cenkalti/backoff/v5) up to Config.MaxAttempts, then
//     reported as stock.ErrContention, never as sold out.
//   - Pessimistic: SELECT ... FOR UPDATE each row, waiting at most
//     Config.LockWait (PostgreSQL lock_timeout, MariaDB WAIT n, MySQL a
//     SET_VAR hint), check, then write.
//
// SQLite has one writer: every write transaction is BEGIN IMMEDIATE on a
// pinned connection, with busy_timeout = Config.LockWait, so the three
// strategies behave alike there (the optimistic read happens inside the
// transaction and never loses).
//
// # Exactly once
//
// Deduct writes line 0 of every order, so a second Deduct of an ID hits the
// ledger's primary key whatever its items; the Store then answers from the
// ledger: ErrConflict for other items or another user (or none), nil for
// the same order still held before its deadline or confirmed,
// ErrHoldExpired once its deadline passed (reclaimed or not yet; it takes
// nothing), ErrOrderClosed once it was reverted. An order has one
// deadline, now plus its own Order.HoldTTL or else the shortest hold time
// of its SKUs, on all its lines, and one bound, now plus the shortest
// maximum hold time of its SKUs, which ExtendHold never passes. The
// Deduct's statements check the hold time and maximum they assumed (from
// Config.SettingsCache) as they check the limit, so both are the rows'
// own; an own hold time past the bound is refused (stock.ErrHoldTooLong)
// after the stock and limit checks, with nothing written.
//
// Confirm and Revert lock the order's lines (waiting at most
// Config.LockWait, as every lock of the Store does), change their state
// only from the state they read (RowsAffected decides), and then move the
// units, all in one transaction. The reclaimer does the same for many orders at
// once: one UPDATE ... RETURNING of the held, due lines per batch of
// orders on PostgreSQL and SQLite, a SELECT ... FOR UPDATE of them then
// one UPDATE on MySQL and MariaDB, then one UPDATE per SKU. A per-user limit is counted from the
// ledger's held and confirmed lines of that user and SKU, in the Deduct's
// transaction, after the stock row is locked: one user's concurrent orders
// are counted one after the other.
//
// RevertItems (a partial cancel or refund) locks the order's lines,
// answers a repeat of its operation ID from the returns table (nil for
// the same items, ErrConflict for others), checks every line against what
// it still has, and in one transaction adds the units to the lines'
// returned column with conditional UPDATEs, returns them to the stock
// rows, records the operation ID with the return's canonical items, and
// ends the order (reverted or refunded) once nothing is left. Everything
// that counts an order's units afterwards counts qty - returned: Confirm,
// Revert, RevertHeld, the reclaimer (which reports only lines with
// something left), per-user limits, UserUnits, HeldBefore, Orders (whose
// OrderInfo.Returned lists what was given back) and View.HeldLines.
//
// ExtendHold is one conditional UPDATE of the order's lines' deadline
// (the column the reclaimer's index reads), WHERE the order is held, its
// deadline has not passed, the new one is later and within the bound; a
// read tells why when it changed nothing.
//
// Restock writes its operation ID to the operations table and adds the
// units in one transaction: a repeat of the ID with the same SKU and Units
// adds nothing and returns nil, with another SKU or count it is
// ErrConflict. View.Restocks lists the applied restocks for reconciliation.
//
// Time comes from Config.Clock, never from the database's clock; deadlines
// are stored in Unix milliseconds.
//
// # In the caller's transaction
//
// Store.InTx returns a TxStore whose Deduct, Confirm, Revert, RevertItems
// and ExtendHold run in a
// transaction the caller opened (*sql.Tx, *sqlx.Tx: any DBTX), so the
// caller's own rows (the order, an idempotency row) and the stock commit
// or roll back together. Each call runs in a savepoint of its own and
// never begins, commits, rolls back or runs again, and bypasses group
// commit. A business refusal undoes only the call and leaves the
// transaction usable on every dialect; any other error is a *TxError
// matching ErrTxFailed (and stock.ErrContention when running the whole
// transaction again may succeed): roll back. Nothing is final until the
// caller commits; a COMMIT whose reply was lost is resolved by running the
// whole transaction again with the same order IDs. See TxStore.
//
// # Errors
//
// Business outcomes are the stock sentinels, wrapped with the SKU
// (*stock.SKUError), the order ID or the operation ID. Deadlocks (MySQL
// 1213, PostgreSQL 40P01), lock wait timeouts (1205, 3572, 55P03),
// serialization failures (40001) and SQLITE_BUSY roll the transaction back
// and run it again with backoff; when Config.MaxAttempts are used up, or
// the call's time is, the call fails with a *ContentionError matching
// stock.ErrContention: nothing was applied.
//
// # How long a call takes
//
// Every call answers within Store.AnswerBound, three Config.LockWaits
// from its start, plus the round trips of its last statements, however
// long others hold its rows. Each transaction's statements end within
// one LockWait of its BEGIN, and every one of them that may wait for a
// row lock (each write and each locking read) carries the server's own
// bound of LockWait, so a transaction the Store gave up on lets go of its
// rows on the server within about one LockWait more, never after the
// server's default lock wait (50s on MySQL and MariaDB). A call that applied nothing answers within
// two: its lock waits and deadlocks are run again with backoff until
// then, and a grouped Deduct's two count from when it queued: its wait
// for the groups ahead of it, its group's transaction and its run alone
// after a group that failed all count in them, and past them it is
// stock.ErrContention. A grouped Deduct whose group has not begun to
// write two LockWaits after it queued leaves the queue with
// stock.ErrContention, nothing sent; one whose group began just before
// waits for that group's transaction, which ends within one LockWait of
// its BEGIN, so it answers within three. A call whose
// write may have applied (a lost COMMIT reply) runs again to learn its
// outcome for one LockWait more, and past it answers
// stock.ErrUnknownOutcome. A grouped Deduct whose caller leaves before its
// group began to write leaves with the context's error: its order is
// left out, nothing sent. A wait for one of the pool's connections counts
// in these bounds: a write's ends with its attempt, and Levels, Orders and
// the reclaimer's read of the due lines wait at most one LockWait, then
// answer stock.ErrContention (the other reads, Snapshot, SKUs, UserUnits,
// HeldBefore and View, wait as long as the caller's context). A caller's
// context that ends sooner ends the call sooner.
//
// The Store takes an order's stock rows in SKU order. A writer outside it
// that locks them in another order closes lock cycles with it: MySQL and
// MariaDB find such a deadlock at once, but PostgreSQL finds it only by
// the deadlock check of a waiter, deadlock_timeout (1s by default) after
// it began to wait, and everything queued behind the cycle waits as long.
// So on PostgreSQL, for a minute after a Deduct of several rows that
// could wait as long as it may ended in a deadlock or a lock wait timeout
// (a cycle, or a row held past LockWait), the Store's own Deducts of
// several rows (not those in a caller's transaction, Store.InTx) wait for
// each row after their first at most 10ms (or LockWait, if shorter)
// while they hold the ones before, and so do the rest of their
// statements; if one is held longer, the transaction is rolled back
// (every row let go), waits for the later rows' holders holding no row,
// and runs again, all within its LockWait. Such a cycle ends within
// 10ms. With LockWait 1s, 64 buyers of two-SKU orders on 4 rows, two
// writers updating the rows in reverse order every 100-200ms without a
// bound and one holding every row 1.5s every 3.5s, 93% to 100% of the
// orders placed after the first 2s succeeded (2% to 48% when a Deduct
// waited LockWait for a row while it held another). While it waits only
// briefly, a Deduct whose later row a queue of other transactions keeps
// held, each longer than 10ms, can answer stock.ErrContention where a
// longer wait would have got its turn; otherwise every row is waited for
// in turn, for as long as LockWait allows.
//
// Error codes are read without importing a driver
// (SQLState() for pgx, Code() for modernc.org/sqlite, the Code
// and ExtendedCode fields of mattn/go-sqlite3's sqlite3.Error, the Number
// field of the MySQL driver's MySQLError), so importing this package pulls
// in no driver.
//
// Outcomes follow one rule. An error from before any write was sent
// (invalid input, a context already done, a refused dial) is returned as
// it is and matches neither stock.ErrUnknownOutcome nor
// stock.ErrContention. Once a write may have been applied (COMMIT or an
// autocommit write was sent and its reply lost or interrupted, or a
// statement of a write transaction was sent and the connection failed),
// the Store never guesses: Deduct, Confirm, Revert, RevertItems,
// ExtendHold and Restock run again, and since each is idempotent by order
// or operation ID the ledger, the returns table or the operations table
// tells what happened (a committed Deduct is found by
// its primary key and answers nil). Until such a read answers, every error
// the caller sees is an *UnknownOutcomeError matching
// stock.ErrUnknownOutcome, and the context's error if it ended, never
// stock.ErrContention: also when the re-run fails on the network too.
// PutOnSale (an overwrite) and ReclaimExpired (whose report a re-run would
// lose) are not run again; they report stock.ErrUnknownOutcome at once.
// On SQLite, which runs in-process, every failure is definite.
//
// A Store is safe for concurrent use; any number of Stores in any number of
// processes may share one pair of tables.
package sqlstock
