package sqlstock

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock"
)

// mysqlDriver is the name go-sql-driver/mysql registers, for MySQL and
// MariaDB alike: with Config.Dialect zero, the server tells which it is.
const mysqlDriver = "mysql"

// versionSQL is the one query that tells MariaDB from MySQL: MariaDB's
// VERSION() always says "MariaDB" (10.11.6-MariaDB-0+deb12u1), MySQL's
// never does (8.0.36). @@version_comment would not do: Debian's MariaDB
// reports "Debian 12" there. It also reads the collation of the stock
// table's SKU column (see collationSQL).
const versionSQL = "SELECT VERSION(), (" + collationSQL + ")"

// collationSQL reads the collation of the stock table's SKU column on
// MySQL and MariaDB: NULL when there is no such column (yet), "binary"
// for a binary string.
const collationSQL = "SELECT COALESCE(COLLATION_NAME, 'binary') FROM information_schema.COLUMNS" +
	" WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?"

// pgCollationSQL reads the collation of the stock table's SKU column on
// PostgreSQL, and whether it is deterministic (compares bytes once
// equal by its rules): no row when there is no such column (yet);
// "binary" and true for a type without a collation (bytea). A column of
// type citext (or a domain over it), which compares without case whatever
// its collation, reads as collation "citext", not deterministic.
const pgCollationSQL = "SELECT CASE WHEN ci THEN 'citext' ELSE COALESCE(c.collname, 'binary') END," +
	" COALESCE(c.collisdeterministic, true) AND NOT ci" +
	" FROM pg_attribute a LEFT JOIN pg_collation c ON c.oid = a.attcollation," +
	" LATERAL (SELECT EXISTS (SELECT 1 FROM pg_type t WHERE t.typname = 'citext' AND t.oid IN" +
	" (a.atttypid, (SELECT d.typbasetype FROM pg_type d WHERE d.oid = a.atttypid)))) AS x(ci)" +
	" WHERE a.attrelid = to_regclass(quote_ident($1)) AND a.attname = $2 AND NOT a.attisdropped"

// sqliteCollationSQL reads the collation of the stock table's SKU column
// on SQLite from the table's primary key, the one place SQLite's catalog
// shows a column's collation (its own, unless the key names another):
// no row when there is no such column (yet); NULL when the column is not
// the primary key.
const sqliteCollationSQL = "SELECT (SELECT COALESCE(x.coll, 'BINARY') FROM pragma_index_list(t.arg) AS l, pragma_index_xinfo(l.name) AS x" +
	" WHERE l.origin = 'pk' AND x.name = t.col)" +
	" FROM (SELECT ? AS arg, ? AS col) AS t, pragma_table_info(t.arg) AS c WHERE c.name = t.col"

// verdict is what a Store learned of its server and its stock table:
// nothing to refuse, or why it refuses every call; whether it found the
// SKU column (else the next call reads it again: the table may be made
// since); and whether its statements lock several stock rows in the
// index's order otherwise than in byte order, so that they must be
// locked one statement each (MySQL and MariaDB, a binary collation of a
// charset other than UTF-8 or ASCII, or a column not read yet).
type verdict struct {
	refused  error
	found    bool
	rowByRow bool
}

// settled reports whether the verdict is final.
func (v *verdict) settled() bool { return v.refused != nil || v.found }

// byteOrdered reports whether a MySQL or MariaDB collation sorts valid
// SKUs (UTF-8 without spaces) in byte order: binary strings do, and the
// binary collations of UTF-8 and ASCII compare code points, which UTF-8
// keeps in byte order. Others (latin1_bin, whose bytes are not UTF-8's:
// cp1252 puts "Š" before "é") do not.
func byteOrdered(collation string) bool {
	if collation == "binary" {
		return true
	}
	charset, _, _ := strings.Cut(collation, "_")
	switch charset {
	case "utf8mb4", "utf8mb3", "utf8", "ascii":
		return strings.HasSuffix(collation, "_bin")
	}
	return false
}

// comparesBytes reports whether a collation of the SKU column of dialect
// d tells apart every two SKUs whose bytes differ, as the ledger does:
// on MySQL and MariaDB a binary string or a _bin collation; on
// PostgreSQL a deterministic collation (det); on SQLite BINARY.
func comparesBytes(d Dialect, collation string, det bool) bool {
	switch {
	case d.mysqlLike():
		return collation == "binary" || strings.HasSuffix(collation, "_bin")
	case d == Postgres:
		return det
	}
	return strings.EqualFold(collation, "BINARY")
}

// judge decides on the SKU column's collation (not Valid: no such
// column yet).
func (s *Store) judge(collation sql.NullString, det bool) *verdict {
	if !collation.Valid {
		return &verdict{rowByRow: s.d.mysqlLike()}
	}
	name := collation.String
	if !comparesBytes(s.d, name, det) {
		fix := "ALTER TABLE " + s.cfg.Table + " MODIFY " + s.cfg.Columns.SKU + " VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"
		switch s.d {
		case Postgres:
			fix = "ALTER TABLE " + s.cfg.Table + " ALTER COLUMN " + s.cfg.Columns.SKU + " TYPE VARCHAR(128) COLLATE \"C\""
		case SQLite:
			fix = "make the table again with " + s.cfg.Columns.SKU + " TEXT NOT NULL PRIMARY KEY (SQLite's BINARY collation)"
		}
		return &verdict{found: true, refused: &stock.InvalidError{Field: "sqlstock.Config.Table",
			Reason: "the SKU column " + quoteName(s.cfg.Columns.SKU) + " of stock table " + quoteName(s.cfg.Table) +
				" has collation " + quoteName(name) + ", which may match SKUs that differ in case or accents while the ledger" +
				" tells them apart (per-user limits and orders would count one row as two SKUs); give it a collation" +
				" that compares bytes, e.g. " + fix}}
	}
	return &verdict{found: true, rowByRow: s.d.mysqlLike() && !byteOrdered(name)}
}

// ready returns nil once the Store knows the dialect its server speaks
// and speaks it, and is the first thing every call that reaches the
// database does (after checking its input). After the first such call it
// is one atomic load. Until then, on MySQL and MariaDB, it asks the server
// which it is (detect) on on: the Store's pool, or a TxStore's
// transaction.
func (s *Store) ready(ctx context.Context, on DBTX) error {
	if v := s.known.Load(); v != nil && v.settled() {
		return v.refused
	}
	return s.detect(ctx, on)
}

// detect runs versionSQL (MySQL and MariaDB, first time) or reads the
// SKU column's collation on on (the pool: on a connection it takes before
// its turn), one call at a time: a call that finds
// another detecting waits for it (or for its own context to end) and then
// takes its verdict, or detects itself if that one failed or did not find
// the column. With Config.Dialect zero the Store then speaks the server's
// dialect; a Config.Dialect the server contradicts (MySQL on MariaDB,
// MariaDB on MySQL), or an SKU column whose collation does not compare
// bytes (see judge), is refused, for good, with an error wrapping
// stock.ErrInvalid. A failed query is returned as it is: nothing was
// written, and the next call asks again.
func (s *Store) detect(ctx context.Context, on DBTX) error {
	if db, ok := on.(*sql.DB); ok {
		// A connection first, then the turn: a call holding the turn
		// never waits for a connection, which a TxStore call waiting for
		// the turn may hold (its transaction's, the pool's last).
		var conn *sql.Conn
		err := s.againIfBusy(ctx, func() (err error) {
			conn, err = db.Conn(ctx)
			return err
		})
		if err != nil {
			return err
		}
		defer conn.Close()
		on = conn
	}
	select {
	case s.detecting <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.detecting }()
	v := s.known.Load()
	if v != nil && v.settled() {
		return v.refused // found while this call waited
	}
	var (
		collation sql.NullString
		det       = true
	)
	switch {
	case v == nil && (s.cfg.Dialect == 0 || s.cfg.Dialect.mysqlLike()):
		var version string
		if err := on.QueryRowContext(ctx, versionSQL, s.cfg.Table, s.cfg.Columns.SKU).Scan(&version, &collation); err != nil {
			return err
		}
		server, name := MySQL, "MySQL"
		if strings.Contains(strings.ToLower(version), "mariadb") {
			server, name = MariaDB, "MariaDB"
		}
		switch s.cfg.Dialect {
		case 0:
			s.d, s.q = server, newQueries(server, s.cfg)
		case server:
		default:
			s.known.Store(&verdict{refused: &stock.InvalidError{Field: "sqlstock.Config.Dialect",
				Reason: s.cfg.Dialect.String() + ", but the server is " + name + " (VERSION() " + quoteName(version) +
					"); set it to " + name + ", or leave it zero to speak the server's dialect"}})
			return s.known.Load().refused
		}
	default:
		query := collationSQL
		switch s.d {
		case Postgres:
			query = pgCollationSQL
		case SQLite:
			query = sqliteCollationSQL
		}
		var err error
		if s.d == Postgres {
			var d bool
			err = on.QueryRowContext(ctx, query, s.cfg.Table, s.cfg.Columns.SKU).Scan(&collation, &d)
			det = d
		} else {
			err = s.againIfBusy(ctx, func() error {
				return on.QueryRowContext(ctx, query, s.cfg.Table, s.cfg.Columns.SKU).Scan(&collation)
			})
			if s.d == SQLite && err == nil && !collation.Valid {
				collation = sql.NullString{String: "BINARY", Valid: true} // not the key: not read (see Config.Table)
			}
		}
		if errors.Is(err, sql.ErrNoRows) {
			err = nil // no such column yet
		}
		if err != nil {
			return err
		}
	}
	next := s.judge(collation, det)
	s.known.Store(next) // publishes s.d and s.q to every later load
	return next.refused
}

// againIfBusy runs fn, and on SQLite runs it again (up to 10 times, a
// little longer apart each time) while it fails with SQLITE_BUSY: a
// connection opening (its DSN's pragmas) or reading the catalog is
// answered busy at once, without the busy timeout, while another
// connection changes the schema (Stores creating their tables at once).
func (s *Store) againIfBusy(ctx context.Context, fn func() error) error {
	for try := 1; ; try++ {
		err := fn()
		if s.cfg.Dialect != SQLite || try == 10 || classify(err) != errTransient {
			return err
		}
		select {
		case <-time.After(time.Duration(try) * 10 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}
