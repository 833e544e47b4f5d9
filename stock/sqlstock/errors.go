package sqlstock

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strconv"

	"github.com/stockguard/stockguard/stock"
)

// errClass is what a database error means to a Store.
type errClass int

const (
	errOther     errClass = iota
	errTransient          // deadlock, serialization failure, busy: nothing applied, retry
	errDuplicate          // unique key violation: the order ID is already in the ledger
	errLockWait           // a row lock waited Config.LockWait: nothing applied, give up (ErrContention)
)

// classify reads the driver's error code without importing any driver:
// PostgreSQL errors (pgconn.PgError, lib/pq) expose SQLState(), modernc
// SQLite errors expose Code(), mattn/go-sqlite3's sqlite3.Error is read by
// its Code and ExtendedCode fields, and the MySQL driver's
// *mysql.MySQLError by its Number field.
func classify(err error) errClass {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch v := e.(type) {
		case interface{ SQLState() string }:
			switch v.SQLState() {
			case "40P01", "40001": // deadlock, serialization failure
				return errTransient
			case "55P03": // lock not available (lock_timeout)
				return errLockWait
			case "23505": // unique violation
				return errDuplicate
			}
			return errOther
		case interface{ Code() int }:
			return classifySQLite(v.Code())
		}
		if c, ok := sqliteFields(e); ok {
			return classifySQLite(c)
		}
		if n, ok := mysqlNumber(e); ok {
			switch n {
			case 1213, 1020: // deadlock, record changed
				return errTransient
			case 1205, 3572: // lock wait timeout, NOWAIT
				return errLockWait
			case 1062: // duplicate entry
				return errDuplicate
			}
			return errOther
		}
	}
	return errOther
}

// classifySQLite classifies an SQLite result code, primary or extended.
func classifySQLite(c int) errClass {
	switch {
	case c&0xff == 5 || c&0xff == 6: // SQLITE_BUSY, SQLITE_LOCKED and their extended codes
		return errTransient
	case c == 1555 || c == 2067: // SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE
		return errDuplicate
	}
	return errOther
}

// sqliteFields returns the result code of an error struct with integer
// fields Code and ExtendedCode (github.com/mattn/go-sqlite3's sqlite3.Error,
// a value or a pointer): the extended code when set, else the primary one.
// It is found by its fields so that this package does not import the
// driver.
func sqliteFields(err error) (int, bool) {
	v := reflect.ValueOf(err)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0, false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, false
	}
	code, ext := v.FieldByName("Code"), v.FieldByName("ExtendedCode")
	if !isInt(code) || !isInt(ext) {
		return 0, false
	}
	if ext.Int() != 0 {
		return int(ext.Int()), true
	}
	return int(code.Int()), true
}

func isInt(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return true
	}
	return false
}

// mysqlNumber returns the Number of a *mysql.MySQLError
// (github.com/go-sql-driver/mysql), found by its type's name and field so
// that this package does not import the driver.
func mysqlNumber(err error) (uint16, bool) {
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0, false
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct || v.Type().Name() != "MySQLError" {
		return 0, false
	}
	f := v.FieldByName("Number")
	if f.Kind() != reflect.Uint16 {
		return 0, false
	}
	return uint16(f.Uint()), true
}

// isServerError reports whether err is a reply from the database server
// (so a statement it answers was not applied), rather than a lost
// connection after which it may have been.
func isServerError(err error) bool {
	var pg interface{ SQLState() string }
	var lite interface{ Code() int }
	if errors.As(err, &pg) || errors.As(err, &lite) {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if _, ok := mysqlNumber(e); ok {
			return true
		}
		if _, ok := sqliteFields(e); ok {
			return true
		}
	}
	return false
}

// definite reports whether err, returned by a statement after a write
// request may have been sent, proves that nothing of this attempt was
// applied: a reply of the server, one of the Store's own answers, or a
// connection database/sql knows was never used.
func definite(err error) bool {
	return err == nil || isServerError(err) || stock.IsBusiness(err) ||
		errors.Is(err, errRetry) || errors.Is(err, errOrderExists) || errors.Is(err, errOpExists) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrTxDone)
}

// errRetry asks retry for another attempt: an optimistic write lost, or a
// remembered setting changed under the statement that checked it.
var errRetry = errors.New("sqlstock: row changed, retrying")

// maybeApplied is an error after which this attempt's writes may have been
// applied: COMMIT (or a single autocommit write) was sent and its reply was
// lost, or a statement of a write transaction was sent and the connection
// failed.
type maybeApplied struct{ err error }

func (e *maybeApplied) Error() string {
	return "sqlstock: write may have been applied: " + e.err.Error()
}
func (e *maybeApplied) Unwrap() error { return e.err }

// ContentionError is returned when a call used up Config.MaxAttempts on
// transient failures (deadlocks, lock wait timeouts, serialization
// failures, SQLITE_BUSY, lost optimistic races), none of which applied
// anything. It matches stock.ErrContention; Unwrap gives the last failure.
type ContentionError struct {
	Op       string // "deduct", "confirm", ...
	Attempts int
	Last     error
}

func (e *ContentionError) Error() string {
	return "stock: contention, retry later: sqlstock: " + e.Op + " gave up after " + strconv.Itoa(e.Attempts) + " attempts: " + e.Last.Error()
}

// Is reports whether target is stock.ErrContention.
func (e *ContentionError) Is(target error) bool { return target == stock.ErrContention }

// Unwrap returns the last failure.
func (e *ContentionError) Unwrap() error { return e.Last }

// UnknownOutcomeError is returned once a write may have been applied and
// the Store could not learn whether it was: it matches
// stock.ErrUnknownOutcome (never stock.ErrContention), and the caller's
// context error too when the context ended first. Call again with the same
// order or operation ID: the call is idempotent, and answers what happened.
type UnknownOutcomeError struct {
	Op       string // "deduct", "confirm", ...
	Attempts int
	// Last is the failure of the last attempt.
	Last error
	// Ctx is the context's error if it ended before the outcome was
	// learned, else nil.
	Ctx error
}

func (e *UnknownOutcomeError) Error() string {
	s := "stock: outcome unknown, retry the same call with the same IDs: sqlstock: " + e.Op +
		" after " + strconv.Itoa(e.Attempts) + " attempts: " + e.Last.Error()
	if e.Ctx != nil {
		s += " (" + e.Ctx.Error() + ")"
	}
	return s
}

// Is reports whether target is stock.ErrUnknownOutcome.
func (e *UnknownOutcomeError) Is(target error) bool { return target == stock.ErrUnknownOutcome }

// Unwrap returns the last failure and the context's error.
func (e *UnknownOutcomeError) Unwrap() []error {
	if e.Ctx == nil {
		return []error{e.Last}
	}
	return []error{e.Last, e.Ctx}
}
