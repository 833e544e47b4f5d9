package sqlstock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite"

	"github.com/stockguard/stockguard/stock"
)

func TestClassifyDriverErrors(t *testing.T) {
	cases := []struct {
		err  error
		want errClass
	}{
		{&mysql.MySQLError{Number: 1213, SQLState: [5]byte{'4', '0', '0', '0', '1'}}, errTransient},
		{&mysql.MySQLError{Number: 1205}, errLockWait},
		{&mysql.MySQLError{Number: 3572}, errLockWait},
		{&mysql.MySQLError{Number: 1062}, errDuplicate},
		{&mysql.MySQLError{Number: 1146}, errOther}, // no such table
		{&pgconn.PgError{Code: "40P01"}, errTransient},
		{&pgconn.PgError{Code: "40001"}, errTransient},
		{&pgconn.PgError{Code: "55P03"}, errLockWait},
		{&pgconn.PgError{Code: "23505"}, errDuplicate},
		{&pgconn.PgError{Code: "42P01"}, errOther},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "40P01"}), errTransient},
		{fmt.Errorf("wrapped: %w", &mysql.MySQLError{Number: 1062}), errDuplicate},
		{errors.New("Error 1213: looks like MySQL but is not"), errOther},
		{context.Canceled, errOther},
		{nil, errOther},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if !isServerError(&mysql.MySQLError{Number: 1146}) || !isServerError(&pgconn.PgError{Code: "42P01"}) || isServerError(errors.New("read: connection reset")) {
		t.Error("isServerError does not tell server replies from lost connections")
	}
}

// Real SQLite errors: a duplicate primary key, and SQLITE_BUSY while
// another connection holds the write lock.
func TestClassifySQLiteErrors(t *testing.T) {
	ctx := t.Context()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (k TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, "INSERT INTO t VALUES ('a')")
	if classify(err) != errDuplicate || !isServerError(err) {
		t.Errorf("duplicate key %v: class %d", err, classify(err))
	}
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer holder.ExecContext(ctx, "ROLLBACK")
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	_, err = other.ExecContext(ctx, "BEGIN IMMEDIATE")
	if classify(err) != errTransient {
		t.Errorf("busy %v: class %d, want transient", err, classify(err))
	}
}

func TestContentionErrorMatches(t *testing.T) {
	last := &pgconn.PgError{Code: "40P01"}
	e := &ContentionError{Op: "deduct", Attempts: 3, Last: last}
	if !errors.Is(e, stock.ErrContention) || errors.Is(e, stock.ErrUnknownOutcome) || stock.IsBusiness(e) || !errors.Is(e, last) {
		t.Errorf("%v matches the wrong errors", e)
	}
}

// An unknown outcome is never contention: contention says nothing was
// applied.
func TestUnknownOutcomeErrorMatches(t *testing.T) {
	last := errors.New("read: connection reset")
	e := &UnknownOutcomeError{Op: "deduct", Attempts: 2, Last: last}
	if !errors.Is(e, stock.ErrUnknownOutcome) || errors.Is(e, stock.ErrContention) || stock.IsBusiness(e) || !errors.Is(e, last) || errors.Is(e, context.Canceled) {
		t.Errorf("%v matches the wrong errors", e)
	}
	e.Ctx = context.Canceled
	if !errors.Is(e, stock.ErrUnknownOutcome) || !errors.Is(e, context.Canceled) || errors.Is(e, stock.ErrContention) {
		t.Errorf("%v with a canceled context matches the wrong errors", e)
	}
}
