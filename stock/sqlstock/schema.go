package sqlstock

import (
	"context"
	"strings"

	"github.com/stockguard/stockguard/stock"
)

// Schema returns the statements that create the stock table, the ledger,
// the operations table and the returns table of cfg in dialect d, if they
// do not exist. Run them with your migration tool, or call CreateTables.
//
// The stock table has one row per SKU (see Columns). The ledger has one
// row per order line:
//
//	order_id, line   primary key; line is the position in SKU order
//	sku, qty         what the line took
//	returned         the units of it partial reverts gave back (0 for none)
//	user_id          the order's user, '' for none
//	state            1 held, 2 confirmed, 3 reverted, 4 refunded, 5 expired
//	deadline_ms      Unix milliseconds after which a held line is due
//	bound_ms         the latest deadline ExtendHold may set (0: deadline_ms)
//	created_ms       when the hold was placed
//
// with an index on (state, deadline_ms) for the reclaimer and one on
// (sku, user_id) for per-user limits. What a line still takes is qty less
// returned. Ledger rows are never deleted by the library; archive ended
// orders (state 2 to 5) when you no longer need them for idempotency.
//
// The operations table, named after the ledger with "_ops" appended, has
// one row per applied restock, written in the restock's transaction:
//
//	op_id            primary key: stock.Restock.OpID
//	sku, units       what it added
//	created_ms       when, in Unix milliseconds
//
// with an index on (sku, created_ms) for View.Restocks. A restock repeated
// after its row is deleted is applied again.
//
// The returns table, named after the ledger with "_returns" appended, has
// one row per applied partial revert (RevertItems), written in its
// transaction:
//
//	order_id, op_id  primary key: stock.Return.OrderID and OpID
//	sig              the return's items in canonical form (SKU order)
//	created_ms       when, in Unix milliseconds
//
// Archive an order's returns with its ledger lines: a return repeated
// after its row is deleted is applied again if the order still has the
// units.
//
// A database created from the statements of an earlier version lacks the
// stock table's MaxHoldTTL column, the ledger's returned and bound_ms
// columns and the returns table: run Upgrade's statements once (or call
// CreateTables, which adds them when they are missing).
func Schema(d Dialect, cfg Config) ([]string, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if d < MySQL || d > SQLite {
		return nil, &stock.InvalidError{Field: "sqlstock.Schema dialect", Reason: d.String() + " is not a dialect"}
	}
	id := d.idType()
	idx := func(suffix string) string { return d.quote(cfg.Ledger + suffix) }
	r := newQueries(d, cfg).r
	engine := ""
	if d.mysqlLike() {
		engine = " ENGINE=InnoDB"
	}
	stockTable := r.Replace("CREATE TABLE IF NOT EXISTS {T} (" +
		"{sku} " + id + " NOT NULL PRIMARY KEY, " +
		"{avail} BIGINT NOT NULL, " +
		"{held} BIGINT NOT NULL DEFAULT 0, " +
		"{sold} BIGINT NOT NULL DEFAULT 0, " +
		"{ver} BIGINT NOT NULL DEFAULT 0, " +
		"{limit} BIGINT NOT NULL DEFAULT 0, " +
		"{ttl} BIGINT NOT NULL DEFAULT " + itoa(stock.DefaultHoldTTL.Milliseconds()) + ", " +
		"{maxttl} BIGINT NOT NULL DEFAULT 0)" + engine)
	cols := "order_id " + id + " NOT NULL, " +
		"line SMALLINT NOT NULL, " +
		"sku " + id + " NOT NULL, " +
		"qty BIGINT NOT NULL, " +
		"returned BIGINT NOT NULL DEFAULT 0, " +
		"user_id " + id + " NOT NULL DEFAULT '', " +
		"state SMALLINT NOT NULL, " +
		"deadline_ms BIGINT NOT NULL, " +
		"bound_ms BIGINT NOT NULL DEFAULT 0, " +
		"created_ms BIGINT NOT NULL, " +
		"PRIMARY KEY (order_id, line)"
	opCols := "op_id " + id + " NOT NULL PRIMARY KEY, " +
		"sku " + id + " NOT NULL, " +
		"units BIGINT NOT NULL, " +
		"created_ms BIGINT NOT NULL"
	returns := r.Replace("CREATE TABLE IF NOT EXISTS {R} (" + returnCols(d) + ")" + engine)
	if d.mysqlLike() {
		// MySQL has no CREATE INDEX IF NOT EXISTS: the indexes go inline.
		return []string{stockTable, r.Replace("CREATE TABLE IF NOT EXISTS {L} (" + cols +
			", KEY " + idx(idxDue) + " (state, deadline_ms)" +
			", KEY " + idx(idxSKUUser) + " (sku, user_id))" + engine),
			r.Replace("CREATE TABLE IF NOT EXISTS {O} (" + opCols +
				", KEY " + idx(idxOpsSKU) + " (sku, created_ms))" + engine),
			returns}, nil
	}
	return []string{
		stockTable,
		r.Replace("CREATE TABLE IF NOT EXISTS {L} (" + cols + ")"),
		r.Replace("CREATE INDEX IF NOT EXISTS " + idx(idxDue) + " ON {L} (state, deadline_ms)"),
		r.Replace("CREATE INDEX IF NOT EXISTS " + idx(idxSKUUser) + " ON {L} (sku, user_id)"),
		r.Replace("CREATE TABLE IF NOT EXISTS {O} (" + opCols + ")"),
		r.Replace("CREATE INDEX IF NOT EXISTS " + idx(idxOpsSKU) + " ON {O} (sku, created_ms)"),
		returns,
	}, nil
}

// returnCols are the returns table's columns in dialect d.
func returnCols(d Dialect) string {
	text := "TEXT"
	if d.mysqlLike() {
		text = "TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
	}
	return "order_id " + d.idType() + " NOT NULL, " +
		"op_id " + d.idType() + " NOT NULL, " +
		"sig " + text + " NOT NULL, " +
		"created_ms BIGINT NOT NULL, " +
		"PRIMARY KEY (order_id, op_id)"
}

// column is one column an upgrade adds to a table of an earlier version.
type column struct {
	table, name, def string // placeholders of queries.r
}

// added are the columns this version added to tables of earlier ones,
// with what their defaults mean: a max hold of 0 is the hold time, a
// bound of 0 is the deadline (the hold cannot be extended), and nothing
// was returned.
var added = []column{
	{"{T}", "{maxttl}", "BIGINT NOT NULL DEFAULT 0"},
	{"{L}", "returned", "BIGINT NOT NULL DEFAULT 0"},
	{"{L}", "bound_ms", "BIGINT NOT NULL DEFAULT 0"},
}

// Upgrade returns the statements that bring tables created by an earlier
// version of this package (before partial reverts, hold extension and
// per-order hold times) to this version's Schema: ALTER TABLE ... ADD
// COLUMN for the stock table's MaxHoldTTL column and the ledger's
// returned and bound_ms columns, and the returns table. Run them once,
// with your migration tool, before a Store of this version uses the
// tables; on MySQL and SQLite an ADD COLUMN fails if the column is there
// already. CreateTables runs them itself where they are needed. Existing
// rows keep their meaning: a SKU's maximum hold time is its hold time,
// an order's holds cannot be extended, and nothing was returned.
//
// Until the tables are upgraded, the statements of a Store of this
// version fail with the database's error naming the missing column or
// table. Processes of an earlier version must not share upgraded tables
// with ones of this version: they do not count partial returns.
func Upgrade(d Dialect, cfg Config) ([]string, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if d < MySQL || d > SQLite {
		return nil, &stock.InvalidError{Field: "sqlstock.Upgrade dialect", Reason: d.String() + " is not a dialect"}
	}
	r := newQueries(d, cfg).r
	out := make([]string, 0, len(added)+1)
	for _, c := range added {
		out = append(out, r.Replace(addColumn(c)))
	}
	engine := ""
	if d.mysqlLike() {
		engine = " ENGINE=InnoDB"
	}
	return append(out, r.Replace("CREATE TABLE IF NOT EXISTS {R} ("+returnCols(d)+")"+engine)), nil
}

func addColumn(c column) string {
	return "ALTER TABLE " + c.table + " ADD COLUMN " + c.name + " " + c.def
}

// CreateTables creates the Store's stock table, ledger, operations table
// and returns table with Schema if they do not exist, and upgrades tables
// an earlier version created (see Upgrade): each column this version
// added is looked for with a SELECT of it and added with ALTER TABLE when
// the SELECT fails, so running it again, or from many processes at once,
// is harmless. An existing stock table is otherwise left as it is: it must
// have the columns of Config.Columns.
func (s *Store) CreateTables(ctx context.Context) error {
	if err := s.ready(ctx, s.db); err != nil {
		return err
	}
	stmts, err := Schema(s.d, s.cfg)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if err := s.createRacing(ctx, st); err != nil {
			return err
		}
	}
	for _, c := range added {
		if err := s.addMissing(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// createRacing runs one CREATE ... IF NOT EXISTS statement of Schema.
// PostgreSQL checks IF NOT EXISTS before it writes the catalog, so of two
// processes creating the same table at once one can fail (type already
// exists, or a duplicate key in pg_type) once the other's table is
// there: the statement is run again, and then finds it.
func (s *Store) createRacing(ctx context.Context, st string) error {
	var err error
	for range 3 {
		if _, err = s.db.ExecContext(ctx, st); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return &schemaError{stmt: st, err: err}
	}
	return nil
}

// addMissing adds column c to its table unless a SELECT finds it there.
// An ALTER that fails because another process added the column meanwhile
// is found by a second SELECT.
func (s *Store) addMissing(ctx context.Context, c column) error {
	// Qualified by its table: SQLite reads an unknown "name" alone as a
	// string literal.
	probe := s.q.r.Replace("SELECT " + c.table + "." + c.name + " FROM " + c.table + " WHERE 1 = 0")
	has := func() error {
		rs, err := s.db.QueryContext(ctx, probe)
		if err == nil {
			err = rs.Close()
		}
		return err
	}
	if has() == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	alter := s.q.r.Replace(addColumn(c))
	if _, err := s.db.ExecContext(ctx, alter); err != nil {
		if has() == nil {
			return nil
		}
		return &schemaError{stmt: alter, err: err}
	}
	return nil
}

// Tables returns the names of the Store's tables: the stock table, the
// ledger, the operations table and the returns table, in the order
// CreateTables creates them.
func (s *Store) Tables() []string {
	return []string{s.cfg.Table, s.cfg.Ledger, opsTable(s.cfg), returnsTable(s.cfg)}
}

type schemaError struct {
	stmt string
	err  error
}

func (e *schemaError) Error() string {
	return "sqlstock: " + strings.SplitN(e.stmt, "(", 2)[0] + ": " + e.err.Error()
}
func (e *schemaError) Unwrap() error { return e.err }
