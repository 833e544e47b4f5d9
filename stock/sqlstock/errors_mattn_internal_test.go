package sqlstock

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/mattn/go-sqlite3"
)

// mattn/go-sqlite3's errors carry their codes in fields, not methods: a
// duplicate key and SQLITE_BUSY are classified all the same, and are
// server replies (nothing applied).
func TestClassifyMattnSQLiteErrors(t *testing.T) {
	cases := []struct {
		err  error
		want errClass
	}{
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintPrimaryKey}, errDuplicate},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintUnique}, errDuplicate},
		{&sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintUnique}, errDuplicate},
		{sqlite3.Error{Code: sqlite3.ErrConstraint, ExtendedCode: sqlite3.ErrConstraintCheck}, errOther},
		{sqlite3.Error{Code: sqlite3.ErrBusy}, errTransient},
		{sqlite3.Error{Code: sqlite3.ErrBusy, ExtendedCode: sqlite3.ErrBusySnapshot}, errTransient},
		{sqlite3.Error{Code: sqlite3.ErrLocked}, errTransient},
		{sqlite3.Error{Code: sqlite3.ErrError}, errOther},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want || !isServerError(c.err) {
			t.Errorf("classify(%#v) = %d (server reply %v), want %d", c.err, got, isServerError(c.err), c.want)
		}
	}

	ctx := t.Context()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE TABLE t (k TEXT PRIMARY KEY)", "INSERT INTO t VALUES ('a')"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
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
