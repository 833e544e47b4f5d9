package sqlstock

import (
	"context"
	"strings"

	"github.com/stockguard/stockguard/stock"
)

// mysqlDriver is the name go-sql-driver/mysql registers, for MySQL and
// MariaDB alike: with Config.Dialect zero, the server tells which it is.
const mysqlDriver = "mysql"

// versionSQL is the one query that tells MariaDB from MySQL: MariaDB's
// VERSION() always says "MariaDB" (10.11.6-MariaDB-0+deb12u1), MySQL's
// never does (8.0.36). @@version_comment would not do: Debian's MariaDB
// reports "Debian 12" there.
const versionSQL = "SELECT VERSION()"

// verdict is what a Store learned of its server: nothing to refuse, or
// why it refuses to speak to it.
type verdict struct{ refused error }

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
	var version string
	if err := on.QueryRowContext(ctx, versionSQL).Scan(&version); err != nil {
		return err
	}
	server, name := MySQL, "MySQL"
	if strings.Contains(strings.ToLower(version), "mariadb") {
		server, name = MariaDB, "MariaDB"
	}
	v := &verdict{}
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
