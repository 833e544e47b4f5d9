package sqlstock

import (
	"context"
	"database/sql"
	"strings"

	"github.com/stockguard/stockguard/stock"
)

// mysqlDriver is the name go-sql-driver/mysql registers, for MySQL and
// MariaDB alike: with Config.Dialect zero, the server tells which it is.
const mysqlDriver = "mysql"

// versionSQL is the one query that tells MariaDB from MySQL: MariaDB's
// VERSION() always says "MariaDB" (10.11.6-MariaDB-0+deb12u1), MySQL's
// never does (8.0.36). @@version_comment would not do: Debian's MariaDB
// reports "Debian 12" there. It also reads the collation of the stock
// table's SKU column (NULL when the table is not there yet, or the
// column is a binary string), which decides how several stock rows are
// locked (see Store.lockRows).
const versionSQL = "SELECT VERSION(), (" + collationSQL + ")"

// collationSQL reads the collation of the stock table's SKU column.
const collationSQL = "SELECT COLLATION_NAME FROM information_schema.COLUMNS" +
	" WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?"

// verdict is what a Store learned of its server: nothing to refuse, or
// why it refuses to speak to it; and whether its statements lock several
// stock rows in the index's order otherwise than in byte order, so that
// they must be locked one statement each (MySQL and MariaDB, an SKU
// column whose collation is not known to sort in byte order).
type verdict struct {
	refused  error
	rowByRow bool
}

// byteOrdered reports whether a MySQL or MariaDB collation sorts valid
// SKUs (UTF-8 without spaces) in byte order: the binary collations of
// UTF-8 and ASCII compare code points, which UTF-8 keeps in byte order.
// Others (utf8mb4_general_ci: "a" before "B"; latin1_bin, whose bytes are
// not UTF-8's) and an unknown one (NULL: no such table yet, see
// relearnOrder) do not count.
func byteOrdered(collation string) bool {
	charset, _, _ := strings.Cut(collation, "_")
	switch charset {
	case "utf8mb4", "utf8mb3", "utf8", "ascii":
		return strings.HasSuffix(collation, "_bin")
	}
	return false
}

// ready returns nil once the Store knows the dialect its server speaks
// and speaks it, and is the first thing every call that reaches the
// database does (after checking its input). After the first such call it
// is one atomic load. Until then, on MySQL and MariaDB, it asks the server
// which it is (detect) on on: the Store's pool, or a TxStore's
// transaction.
func (s *Store) ready(ctx context.Context, on DBTX) error {
	if v := s.known.Load(); v != nil {
		return v.refused
	}
	return s.detect(ctx, on)
}

// detect runs versionSQL on on, one call at a time: a call that finds
// another detecting waits for it (or for its own context to end) and then
// takes its verdict, or detects itself if that one failed. With
// Config.Dialect zero the Store then speaks the server's dialect; a
// Config.Dialect the server contradicts (MySQL on MariaDB, MariaDB on
// MySQL) is refused, for good, with an error wrapping stock.ErrInvalid. A
// failed query is returned as it is: nothing was written, and the next
// call asks again.
func (s *Store) detect(ctx context.Context, on DBTX) error {
	select {
	case s.detecting <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.detecting }()
	if v := s.known.Load(); v != nil {
		return v.refused // found while this call waited
	}
	var (
		version   string
		collation sql.NullString
	)
	if err := on.QueryRowContext(ctx, versionSQL, s.cfg.Table, s.cfg.Columns.SKU).Scan(&version, &collation); err != nil {
		return err
	}
	server, name := MySQL, "MySQL"
	if strings.Contains(strings.ToLower(version), "mariadb") {
		server, name = MariaDB, "MariaDB"
	}
	v := &verdict{rowByRow: !byteOrdered(collation.String)}
	switch s.cfg.Dialect {
	case 0:
		s.d, s.q = server, newQueries(server, s.cfg)
	case server:
	default:
		v.refused = &stock.InvalidError{Field: "sqlstock.Config.Dialect",
			Reason: s.cfg.Dialect.String() + ", but the server is " + name + " (VERSION() " + quoteName(version) +
				"); set it to " + name + ", or leave it zero to speak the server's dialect"}
	}
	s.known.Store(v) // publishes s.d and s.q to every later load
	return v.refused
}

// relearnOrder reads again how the stock table's SKU column sorts, after
// CreateTables: a Store whose first call found no table (its
// CreateTables, typically) learns the collation of the table made since.
// A failed read leaves the verdict as it was (rows locked one statement
// each: slower, never out of order).
func (s *Store) relearnOrder(ctx context.Context) {
	v := s.known.Load()
	if !s.d.mysqlLike() || v == nil || v.refused != nil || !v.rowByRow {
		return
	}
	var collation sql.NullString
	if err := s.db.QueryRowContext(ctx, collationSQL, s.cfg.Table, s.cfg.Columns.SKU).Scan(&collation); err != nil || !byteOrdered(collation.String) {
		return
	}
	s.known.Store(&verdict{rowByRow: false})
}
