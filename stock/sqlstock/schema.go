package sqlstock

import (
	"context"
	"strings"

	"github.com/stockguard/stockguard/stock"
)

// Schema returns the statements that create the stock table, the ledger
// and the operations table of cfg in dialect d, if they do not exist. Run them with your
// migration tool, or call CreateTables.
//
// The stock table has one row per SKU (see Columns). The ledger has one
// row per order line:
//
//	order_id, line   primary key; line is the position in SKU order
//	sku, qty         what the line took
//	user_id          the order's user, '' for none
//	state            1 held, 2 confirmed, 3 reverted, 4 refunded, 5 expired
//	deadline_ms      Unix milliseconds after which a held line is due
//	created_ms       when the hold was placed
//
// with an index on (state, deadline_ms) for the reclaimer and one on
// (sku, user_id) for per-user limits. Ledger rows are never deleted by the
// library; archive ended orders (state 2 to 5) when you no longer need
// them for idempotency.
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
		"{ttl} BIGINT NOT NULL DEFAULT " + itoa(stock.DefaultHoldTTL.Milliseconds()) + ")" + engine)
	cols := "order_id " + id + " NOT NULL, " +
		"line SMALLINT NOT NULL, " +
		"sku " + id + " NOT NULL, " +
		"qty BIGINT NOT NULL, " +
		"user_id " + id + " NOT NULL DEFAULT '', " +
		"state SMALLINT NOT NULL, " +
		"deadline_ms BIGINT NOT NULL, " +
		"created_ms BIGINT NOT NULL, " +
		"PRIMARY KEY (order_id, line)"
	opCols := "op_id " + id + " NOT NULL PRIMARY KEY, " +
		"sku " + id + " NOT NULL, " +
		"units BIGINT NOT NULL, " +
		"created_ms BIGINT NOT NULL"
	if d.mysqlLike() {
		// MySQL has no CREATE INDEX IF NOT EXISTS: the indexes go inline.
		return []string{stockTable, r.Replace("CREATE TABLE IF NOT EXISTS {L} (" + cols +
			", KEY " + idx("_due") + " (state, deadline_ms)" +
			", KEY " + idx("_sku_user") + " (sku, user_id))" + engine),
			r.Replace("CREATE TABLE IF NOT EXISTS {O} (" + opCols +
				", KEY " + idx("_ops_sku") + " (sku, created_ms))" + engine)}, nil
	}
	return []string{
		stockTable,
		r.Replace("CREATE TABLE IF NOT EXISTS {L} (" + cols + ")"),
		r.Replace("CREATE INDEX IF NOT EXISTS " + idx("_due") + " ON {L} (state, deadline_ms)"),
		r.Replace("CREATE INDEX IF NOT EXISTS " + idx("_sku_user") + " ON {L} (sku, user_id)"),
		r.Replace("CREATE TABLE IF NOT EXISTS {O} (" + opCols + ")"),
		r.Replace("CREATE INDEX IF NOT EXISTS " + idx("_ops_sku") + " ON {O} (sku, created_ms)"),
	}, nil
}

// CreateTables creates the Store's stock table, ledger and operations
// table with Schema if they do not exist. An existing stock table is left as it is: it must
// have the columns of Config.Columns.
func (s *Store) CreateTables(ctx context.Context) error {
	stmts, err := Schema(s.d, s.cfg)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if _, err := s.db.ExecContext(ctx, st); err != nil {
			return &schemaError{stmt: st, err: err}
		}
	}
	return nil
}

// Tables returns the names of the Store's tables: the stock table, the
// ledger and the operations table, in the order CreateTables creates them.
func (s *Store) Tables() []string {
	return []string{s.cfg.Table, s.cfg.Ledger, opsTable(s.cfg)}
}

type schemaError struct {
	stmt string
	err  error
}

func (e *schemaError) Error() string {
	return "sqlstock: " + strings.SplitN(e.stmt, "(", 2)[0] + ": " + e.err.Error()
}
func (e *schemaError) Unwrap() error { return e.err }
