package sqlstock

import (
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Ledger states, stored as small integers in the ledger's state column.
const (
	stateHeld      = 1 // units taken, waiting for Confirm until the deadline
	stateConfirmed = 2 // sale final
	stateReverted  = 3 // hold cancelled, units returned
	stateRefunded  = 4 // confirmed sale refunded, units returned
	stateExpired   = 5 // deadline passed unpaid, units returned
)

// queries holds every fixed statement of a Store, built once by New from
// quoted, validated names and written with the dialect's parameters.
type queries struct {
	d        Dialect
	r        *strings.Replacer // {T}, {L} and the column placeholders
	lockWait time.Duration     // Config.LockWait

	putOnSale, restock, levels      string
	insertOp, readOp                string
	take, takeIfVersion, takeLocked string
	takeOnePG                       string // Postgres: one statement for a one-line order
	userTotal                       string
	userTotalLocked, levelsLocked   string // in a caller's transaction: read the newest rows (see intx.go)
	readOrder, lockOrder            string
	setState                        string
	release, refund, confirm        string
	due, heldBefore                 string
	extend                          string // ExtendHold's conditional UPDATE
	readReturn, insertReturn        string // the returns table
	lockReturn                      string // readReturn as a locking read (MySQL, MariaDB: the newest row)
	returnLine                      string // RevertItems' conditional UPDATE of one line
	beginLockWait, sqliteBusy       string
	insertOne                       string // insertLedger(1), built once
	lockHint, lockSuffix            string // around a SELECT that locks stock rows
	// PostgreSQL: a take's variant for a stock row after an order's first
	// (see Store.later), and the wait for a row's holder (awaitRows).
	later     map[string]string
	laterWait string // the condition that sets the later rows' lock wait
	awaitRow  string
	// byteOrder is what lockStockIn sorts by: the SKU in byte order (Go's,
	// canon.Sorted), whatever the column's collation.
	byteOrder string
	// lockStockOne locks and reads one SKU's row (MySQL, MariaDB: see
	// Store.lockRows).
	lockStockOne string
}

func newQueries(d Dialect, cfg Config) *queries {
	c := cfg.Columns
	r := strings.NewReplacer(
		"{T}", d.quote(cfg.Table), "{L}", d.quote(cfg.Ledger), "{O}", d.quote(opsTable(cfg)),
		"{sku}", d.quote(c.SKU), "{avail}", d.quote(c.Available),
		"{held}", d.quote(c.Held), "{sold}", d.quote(c.Sold),
		"{ver}", d.quote(c.Version), "{limit}", d.quote(c.PerUserLimit),
		"{ttl}", d.quote(c.HoldTTL), "{maxttl}", d.quote(c.MaxHoldTTL),
		"{R}", d.quote(returnsTable(cfg)),
	)
	q := &queries{d: d, r: r, lockWait: cfg.LockWait}
	hint, lockSuffix := d.lockRow(cfg.LockWait)
	q.lockHint, q.lockSuffix = hint, lockSuffix
	q.byteOrder = "{sku}"
	switch d {
	case Postgres:
		q.byteOrder = `{sku} COLLATE "C"`
	case SQLite:
		q.byteOrder = "{sku} COLLATE BINARY"
	}
	q.lockStockOne = q.sql("SELECT" + hint + " {sku}, {avail}, {ver}, {limit}, {ttl}, {maxttl} FROM {T} WHERE {sku} = ?" + lockSuffix)
	// The order's ledger lines are locked with the stock rows' bounded
	// wait (Config.LockWait), not the server's (50s by default on MySQL
	// and MariaDB); SQLite's IMMEDIATE transaction already excludes
	// writers.
	lockSel := func(sel string) string {
		return "SELECT" + hint + strings.TrimPrefix(sel, "SELECT") + lockSuffix
	}

	put := "INSERT INTO {T} ({sku}, {avail}, {held}, {sold}, {ver}, {limit}, {ttl}, {maxttl}) VALUES (?, ?, 0, 0, 0, ?, ?, ?)"
	if d.mysqlLike() {
		put += " ON DUPLICATE KEY UPDATE {avail} = VALUES({avail}), {limit} = VALUES({limit}), {ttl} = VALUES({ttl})," +
			" {maxttl} = VALUES({maxttl}), {ver} = {ver} + 1"
	} else {
		put += " ON CONFLICT ({sku}) DO UPDATE SET {avail} = excluded.{avail}, {limit} = excluded.{limit}, {ttl} = excluded.{ttl}," +
			" {maxttl} = excluded.{maxttl}, {ver} = {T}.{ver} + 1"
	}
	q.putOnSale = q.write(put)
	q.restock = q.write("UPDATE {T} SET {avail} = {avail} + ?, {ver} = {ver} + 1 WHERE {sku} = ? AND {avail} <= ?")
	q.insertOp = q.write("INSERT INTO {O} (op_id, sku, units, created_ms) VALUES (?, ?, ?, ?)")
	q.readOp = q.sql("SELECT sku, units FROM {O} WHERE op_id = ?")
	q.levels = q.sql("SELECT {avail}, {held}, {sold}, {limit}, {ttl}, {maxttl} FROM {T} WHERE {sku} = ?")

	const takeSet = "UPDATE {T} SET {avail} = {avail} - ?, {held} = {held} + ?, {ver} = {ver} + 1 WHERE {sku} = ?"
	q.take = q.write(takeSet + " AND {avail} >= ? AND {limit} = ? AND {ttl} = ? AND {maxttl} = ?")
	q.takeIfVersion = q.write(takeSet + " AND {ver} = ?")
	q.takeLocked = q.write(takeSet)
	q.takeOnePG = q.write("WITH u AS (UPDATE {T} SET {avail} = {avail} - ?, {held} = {held} + ?, {ver} = {ver} + 1" +
		" WHERE {sku} = ? AND {avail} >= ? AND {limit} = 0 RETURNING {ttl}, {maxttl})" +
		" INSERT INTO {L} (order_id, line, sku, qty, user_id, state, deadline_ms, bound_ms, created_ms)" +
		" SELECT ?, 0, ?, CAST(? AS BIGINT), ?, 1, CAST(? AS BIGINT) + u.{ttl}," +
		" CAST(? AS BIGINT) + GREATEST(u.{ttl}, u.{maxttl}), CAST(? AS BIGINT) FROM u")

	q.userTotal = q.sql("SELECT COALESCE(SUM(qty - returned), 0) FROM {L} WHERE sku = ? AND user_id = ? AND state IN (1, 2)")
	q.userTotalLocked = q.userTotal
	if d.mysqlLike() { // PostgreSQL refuses FOR UPDATE with an aggregate, and needs none (see intx.go)
		q.userTotalLocked = q.sql("SELECT" + hint + " COALESCE(SUM(qty - returned), 0) FROM {L} WHERE sku = ? AND user_id = ? AND state IN (1, 2)" + lockSuffix)
	}
	q.levelsLocked = q.sql("SELECT" + hint + " {avail}, {held}, {sold}, {limit}, {ttl}, {maxttl} FROM {T} WHERE {sku} = ?" + lockSuffix)
	const order = "SELECT line, sku, qty, returned, user_id, state, deadline_ms, bound_ms FROM {L} WHERE order_id = ? ORDER BY line"
	q.readOrder = q.sql(order)
	q.lockOrder = q.sql(lockSel(order))
	q.setState = q.write("UPDATE {L} SET state = ? WHERE order_id = ? AND state = ?")

	q.release = q.write("UPDATE {T} SET {avail} = {avail} + ?, {held} = {held} - ?, {ver} = {ver} + 1 WHERE {sku} = ?")
	q.refund = q.write("UPDATE {T} SET {avail} = {avail} + ?, {sold} = {sold} - ?, {ver} = {ver} + 1 WHERE {sku} = ?")
	q.confirm = q.write("UPDATE {T} SET {held} = {held} - ?, {sold} = {sold} + ?, {ver} = {ver} + 1 WHERE {sku} = ?")
	// A line partial reverts emptied is skipped: it returns nothing, so it
	// takes none of a pass's limit (its order has another line, or it
	// would be reverted).
	q.due = q.sql("SELECT order_id, deadline_ms FROM {L} WHERE state = 1 AND deadline_ms <= ? AND qty > returned" +
		" ORDER BY deadline_ms LIMIT ?")
	// Line 0 stands for its order: every order has one, and all its lines
	// share the state and the deadline.
	q.heldBefore = q.sql("SELECT l.order_id, l.sku, l.qty, l.returned, l.user_id, l.deadline_ms FROM" +
		" (SELECT order_id, deadline_ms FROM {L} WHERE state = 1 AND deadline_ms <= ? AND line = 0" +
		" ORDER BY deadline_ms, order_id LIMIT ?) d" +
		" JOIN {L} l ON l.order_id = d.order_id WHERE l.state = 1" +
		" ORDER BY d.deadline_ms, d.order_id, l.line")
	// One statement moves every line of a held order, live at now, to a
	// later deadline within its bound: the reclaimer reads the lines'
	// deadline_ms, so it honours the new one at once.
	q.extend = q.write("UPDATE {L} SET deadline_ms = ? WHERE order_id = ? AND state = 1" +
		" AND deadline_ms > ? AND deadline_ms < ? AND bound_ms >= ?")
	q.readReturn = q.sql("SELECT sig FROM {R} WHERE order_id = ? AND op_id = ?")
	q.lockReturn = q.sql(lockSel("SELECT sig FROM {R} WHERE order_id = ? AND op_id = ?"))
	q.insertReturn = q.write("INSERT INTO {R} (order_id, op_id, sig, created_ms) VALUES (?, ?, ?, ?)")
	q.returnLine = q.write("UPDATE {L} SET returned = returned + ? WHERE order_id = ? AND line = ? AND state = ? AND qty - returned >= ?")

	if d == Postgres {
		q.beginLockWait = "SET LOCAL lock_timeout = '" + itoa(cfg.LockWait.Milliseconds()) + "ms'"
		// A volatile condition, so evaluated on the row before its lock
		// is waited for.
		q.laterWait = " AND set_config('lock_timeout', '" + itoa(max(1, min(cfg.LockWait, laterLockWait).Milliseconds())) + "ms', true) <> ''"
		q.later = map[string]string{q.take: q.take + q.laterWait, q.takeIfVersion: q.takeIfVersion + q.laterWait}
		q.awaitRow = q.sql("SELECT 1 FROM {T} WHERE {sku} = ? AND set_config('lock_timeout', ?, true) <> '' FOR SHARE")
	}
	q.sqliteBusy = "PRAGMA busy_timeout = " + itoa(cfg.LockWait.Milliseconds())
	q.insertOne = q.insertLedger(1)
	return q
}

// write is sql for a write statement (INSERT, UPDATE): its wait for a row
// lock is bounded by Config.LockWait on every strategy (see boundWrite).
// Every write the Store sends is built by it, so a transaction the Store
// gave up on (its statements' deadline closed the connection) never keeps
// waiting on the server, holding the rows it locked before, for the
// server's own lock wait (50s by default on MySQL and MariaDB).
func (q *queries) write(s string) string { return q.sql(q.d.boundWrite(s, q.lockWait)) }

// sql expands the name placeholders of s and rewrites its parameters for
// the dialect.
func (q *queries) sql(s string) string {
	return sqlx.Rebind(q.d.bindType(), q.r.Replace(s))
}

// opsTable names the table of applied restocks: the ledger's name + "_ops".
func opsTable(cfg Config) string { return cfg.Ledger + "_ops" }

// returnsTable names the table of applied partial reverts: the ledger's
// name + "_returns".
func returnsTable(cfg Config) string { return cfg.Ledger + "_returns" }

// readStock reads the settings, count and version of n SKUs.
func (q *queries) readStock(n int) string {
	return q.sql("SELECT {sku}, {avail}, {ver}, {limit}, {ttl}, {maxttl} FROM {T} WHERE {sku} IN (" + params(n) + ")")
}

// lockStockIn locks and reads the rows of n SKUs, in SKU order on
// PostgreSQL (byte order, whatever the column's collation: byteOrder);
// MySQL and MariaDB lock one statement's rows in the index's order
// whatever the ORDER BY, so Store.lockRows locks several rows there with
// lockStockOne each unless that order is byte order.
func (q *queries) lockStockIn(n int) string {
	return q.sql("SELECT" + q.lockHint + " {sku}, {avail}, {ver}, {limit}, {ttl}, {maxttl} FROM {T} WHERE {sku} IN (" + params(n) +
		") ORDER BY " + q.byteOrder + q.lockSuffix)
}

// lockStockLater is lockStockIn on PostgreSQL for n > 1 SKUs whose rows
// after the first wait laterLockWait at most: the first row is locked
// before the rest (in the CTE the query reads first).
func (q *queries) lockStockLater(n int) string {
	const cols = " {sku}, {avail}, {ver}, {limit}, {ttl}, {maxttl} FROM {T} WHERE {sku} "
	return q.sql("WITH f AS MATERIALIZED (SELECT" + cols + "= ? FOR UPDATE)," +
		" r AS MATERIALIZED (SELECT" + cols + "IN (" + params(n-1) + ")" + q.laterWait + " ORDER BY " + q.byteOrder + " FOR UPDATE)" +
		" SELECT * FROM f UNION ALL SELECT * FROM r")
}

// userTotals sums, for one SKU and n users, the units each holds or
// bought.
func (q *queries) userTotals(n int) string {
	return q.sql("SELECT user_id, COALESCE(SUM(qty - returned), 0) FROM {L} WHERE sku = ? AND state IN (1, 2) AND user_id IN (" +
		params(n) + ") GROUP BY user_id")
}

// insertLedger writes n held lines (lineParams parameters each).
func (q *queries) insertLedger(n int) string {
	if n == 1 && q.insertOne != "" {
		return q.insertOne
	}
	var b strings.Builder
	b.WriteString("INSERT INTO {L} (order_id, line, sku, qty, user_id, state, deadline_ms, bound_ms, created_ms) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, 1, ?, ?, ?)")
	}
	return q.write(b.String())
}

// lineParams is how many parameters insertLedger takes per line.
const lineParams = 8

func params(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
