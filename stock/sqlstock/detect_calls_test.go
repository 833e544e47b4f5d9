package sqlstock_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// storeCall is one call of a Store, or of a TxStore on a transaction
// begun on the Store's database.
type storeCall struct {
	name string // as reflect names the method: "Store.Deduct"
	// inTx: the call runs on a transaction of the caller's, and fails
	// with ErrTxFailed where the Store's own would fail as it is.
	inTx bool
	call func(ctx context.Context, s *sqlstock.Store, db *sqlx.DB) error
}

// everyCall is every method of Store and TxStore that takes a context,
// with valid input.
func everyCall() []storeCall {
	o := stock.Order{ID: "o1", UserID: "u1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	ret := stock.Return{OpID: "r1", OrderID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}}
	later := time.Now().Add(time.Hour)
	// inTx runs f on a TxStore of a transaction begun on db.
	inTx := func(f func(ctx context.Context, t *sqlstock.TxStore) error) func(context.Context, *sqlstock.Store, *sqlx.DB) error {
		return func(ctx context.Context, s *sqlstock.Store, db *sqlx.DB) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			return f(ctx, s.InTx(tx))
		}
	}
	return []storeCall{
		{name: "Store.CreateTables", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error { return s.CreateTables(ctx) }},
		{name: "Store.PutOnSale", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			return s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10})
		}},
		{name: "Store.Restock", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			return s.Restock(ctx, stock.Restock{OpID: "p1", SKU: "a", Units: 1})
		}},
		{name: "Store.Deduct", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error { return s.Deduct(ctx, o) }},
		{name: "Store.Confirm", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error { return s.Confirm(ctx, "o1") }},
		{name: "Store.Revert", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error { return s.Revert(ctx, "o1") }},
		{name: "Store.RevertHeld", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.RevertHeld(ctx, "o1")
			return err
		}},
		{name: "Store.RevertItems", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error { return s.RevertItems(ctx, ret) }},
		{name: "Store.ExtendHold", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			return s.ExtendHold(ctx, "o1", later)
		}},
		{name: "Store.ReclaimExpired", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.ReclaimExpired(ctx, 10)
			return err
		}},
		{name: "Store.Available", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.Available(ctx, "a")
			return err
		}},
		{name: "Store.Levels", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.Levels(ctx, "a")
			return err
		}},
		{name: "Store.UserUnits", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.UserUnits(ctx, "a", "u1")
			return err
		}},
		{name: "Store.Orders", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.Orders(ctx, []string{"o1"})
			return err
		}},
		{name: "Store.HeldBefore", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.HeldBefore(ctx, later, 10)
			return err
		}},
		{name: "Store.Snapshot", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.Snapshot(ctx, []string{"a"})
			return err
		}},
		{name: "Store.SKUs", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			_, err := s.SKUs(ctx, "", 10)
			return err
		}},
		{name: "Store.View", call: func(ctx context.Context, s *sqlstock.Store, _ *sqlx.DB) error {
			v, err := s.View(ctx)
			if err == nil {
				_ = v.Close()
			}
			return err
		}},
		{name: "TxStore.Deduct", inTx: true, call: inTx(func(ctx context.Context, t *sqlstock.TxStore) error { return t.Deduct(ctx, o) })},
		{name: "TxStore.Confirm", inTx: true, call: inTx(func(ctx context.Context, t *sqlstock.TxStore) error { return t.Confirm(ctx, "o1") })},
		{name: "TxStore.Revert", inTx: true, call: inTx(func(ctx context.Context, t *sqlstock.TxStore) error { return t.Revert(ctx, "o1") })},
		{name: "TxStore.RevertItems", inTx: true, call: inTx(func(ctx context.Context, t *sqlstock.TxStore) error { return t.RevertItems(ctx, ret) })},
		{name: "TxStore.ExtendHold", inTx: true, call: inTx(func(ctx context.Context, t *sqlstock.TxStore) error {
			return t.ExtendHold(ctx, "o1", later)
		})},
		// On a pool a TxStore runs under the Store's own rules.
		{name: "TxStore.Deduct on a pool", call: func(ctx context.Context, s *sqlstock.Store, db *sqlx.DB) error {
			return s.InTx(db).Deduct(ctx, o)
		}},
	}
}

// everyCall has a case for every method of Store and TxStore whose first
// parameter is a context, so that a method added later is covered too.
func TestEveryCallCoversTheAPI(t *testing.T) {
	listed := map[string]bool{}
	for _, c := range everyCall() {
		listed[c.name] = true
	}
	testOnly := map[string]bool{"Store.DeductGroup": true} // export_test.go
	ctxType := reflect.TypeFor[context.Context]()
	for _, typ := range []reflect.Type{reflect.TypeFor[*sqlstock.Store](), reflect.TypeFor[*sqlstock.TxStore]()} {
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			name := typ.Elem().Name() + "." + m.Name
			if m.Type.NumIn() > 1 && m.Type.In(1) == ctxType && !listed[name] && !testOnly[name] {
				t.Errorf("%s takes a context but is not in everyCall", name)
			}
		}
	}
}

// Until a Store on the "mysql" driver knows which server it is on, no
// call sends anything but SELECT VERSION(). A detection that fails is
// returned as it is (in a caller's transaction, as a *TxError: roll
// back), and the next call asks again; once the server answers, the
// Store never asks again.
func TestEveryCallWaitsForDetection(t *testing.T) {
	p := &probe{version: "10.11.6-MariaDB-0+deb12u1"}
	p.failWith(errDown)
	db := openProbe(t, p, "mysql", 4)
	s, err := sqlstock.New(db.DB, sqlstock.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	calls := everyCall()
	for i, c := range calls {
		err := c.call(ctx, s, db)
		if !errors.Is(err, errDown) || errors.Is(err, stock.ErrUnknownOutcome) || errors.Is(err, stock.ErrContention) {
			t.Errorf("%s with the server down: %v; want the dial's error as it is", c.name, err)
		}
		if c.inTx != errors.Is(err, sqlstock.ErrTxFailed) {
			t.Errorf("%s: %v; ErrTxFailed: %v, want %v", c.name, err, !c.inTx, c.inTx)
		}
		if n := p.versions.Load(); n != int32(i+1) {
			t.Errorf("after %s: %d SELECT VERSION(), want %d (each call asks again)", c.name, n, i+1)
		}
	}
	if got := p.statements(); len(got) != 0 {
		t.Fatalf("sent before the dialect was known: %q", got)
	}
	if d := s.Dialect(); d != 0 {
		t.Fatalf("Dialect() before detection = %v, want 0", d)
	}

	p.failWith(nil)
	asked := p.versions.Load()
	for _, c := range calls {
		_ = c.call(ctx, s, db) // no server behind the probe: errNoServer
	}
	if n := p.versions.Load() - asked; n != 1 {
		t.Fatalf("%d SELECT VERSION() once the server answered, want 1", n)
	}
	if d := s.Dialect(); d != sqlstock.MariaDB {
		t.Fatalf("Dialect() = %v, want mariadb", d)
	}
}

// The server's VERSION() decides the dialect of a Store with
// Config.Dialect zero; an explicit Config.Dialect the server contradicts
// is refused on every call, with nothing sent but the one SELECT VERSION().
func TestDialectFromServerVersion(t *testing.T) {
	const (
		mariadb = "10.11.6-MariaDB-0+deb12u1"
		mysql   = "8.0.36-0ubuntu0.22.04.1"
	)
	for _, tc := range []struct {
		version string
		set     sqlstock.Dialect
		want    sqlstock.Dialect // 0: refused
		server  string           // named in the refusal
	}{
		{version: mariadb, want: sqlstock.MariaDB},
		{version: mysql, want: sqlstock.MySQL},
		{version: mariadb, set: sqlstock.MariaDB, want: sqlstock.MariaDB},
		{version: mysql, set: sqlstock.MySQL, want: sqlstock.MySQL},
		{version: mariadb, set: sqlstock.MySQL, server: "MariaDB"},
		{version: mysql, set: sqlstock.MariaDB, server: "MySQL"},
	} {
		t.Run(tc.version+"/"+tc.set.String(), func(t *testing.T) {
			p := &probe{version: tc.version}
			db := openProbe(t, p, "mysql", 4)
			s, err := sqlstock.New(db.DB, sqlstock.Config{Dialect: tc.set, LockWait: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if d := s.Dialect(); d != tc.set {
				t.Fatalf("Dialect() before the first call = %v, want %v", d, tc.set)
			}
			ctx := t.Context()
			if tc.want == 0 {
				for _, c := range everyCall() {
					err := c.call(ctx, s, db)
					if !errors.Is(err, stock.ErrInvalid) || !hasAll(err.Error(), "sqlstock.Config.Dialect", tc.server) {
						t.Errorf("%s: %v; want stock.ErrInvalid naming sqlstock.Config.Dialect and %s", c.name, err, tc.server)
					}
				}
				if got := p.statements(); len(got) != 0 {
					t.Errorf("a refused Store sent %q", got)
				}
				if n := p.versions.Load(); n != 1 {
					t.Errorf("%d SELECT VERSION(), want 1", n)
				}
				return
			}
			_ = s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 1}) // errNoServer
			if d := s.Dialect(); d != tc.want {
				t.Fatalf("Dialect() = %v, want %v", d, tc.want)
			}
			// The lock wait bound each speaks: a prefix MariaDB runs, a hint
			// MySQL runs (and MariaDB would read as a comment).
			bound := map[sqlstock.Dialect]string{
				sqlstock.MariaDB: "SET STATEMENT innodb_lock_wait_timeout=2 FOR INSERT INTO",
				sqlstock.MySQL:   "INSERT /*+ SET_VAR(innodb_lock_wait_timeout=2) */ INTO",
			}[tc.want]
			if got := p.statements(); len(got) == 0 || !strings.HasPrefix(got[0], bound) {
				t.Fatalf("PutOnSale sent %q; want it to start %q", got, bound)
			}
		})
	}
}
