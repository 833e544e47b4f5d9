package sqlstock_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockguard/stockguard/observe"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// With Config.Dialect zero on the "mysql" driver, a Store on a MariaDB
// server speaks MariaDB: a Deduct behind a row another connection holds
// FOR UPDATE gives up after Config.LockWait (1s) with stock.ErrContention,
// under every strategy, and applies nothing. Speaking MySQL there, its
// lock wait bound is a hint MariaDB reads as a comment, and the Deduct
// waits for the server's innodb_lock_wait_timeout (50s by default) or
// until its context ends.
func TestDetectedMariaDBBoundsLockWait(t *testing.T) {
	testdb.Need(t, testdb.MySQL)
	for _, st := range strategies {
		t.Run(st.String(), func(t *testing.T) {
			db := testdb.MariaDB(t, 8)
			table := testdb.Unique("sgs")
			s := newStore(t, db, sqlstock.Config{Strategy: st, Table: table, LockWait: time.Second})
			if d := s.Dialect(); d != sqlstock.MariaDB {
				t.Errorf("Dialect() after CreateTables = %v, want mariadb", d)
			}
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
				t.Fatal(err)
			}
			release := holdLock(t, db, sqlstock.MariaDB, table)

			// LockWait is 1s, which MariaDB keeps to within a few ms; the
			// bound leaves 3s more for a loaded machine. The context's 10s
			// only keeps a Store that ignores LockWait from running to the
			// server's 50s.
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			err := s.Deduct(cctx, stock.Order{ID: "o1", Items: []stock.Item{{SKU: "a", Qty: 1}}})
			took := time.Since(start)
			t.Logf("Deduct behind a held row lock gave up after %v", took)
			if !errors.Is(err, stock.ErrContention) || errors.Is(err, stock.ErrUnknownOutcome) {
				t.Fatalf("Deduct behind a held row lock, after %v: %v; want stock.ErrContention", took, err)
			}
			if took >= 4*time.Second {
				t.Fatalf("Deduct gave up after %v; want LockWait (1s) plus at most 3s", took)
			}
			release()

			lv, err := s.Levels(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if lv.Available != 10 || lv.Held != 0 {
				t.Fatalf("after the refused Deduct: %+v; want 10 available, 0 held", lv)
			}
			if got, err := s.Orders(ctx, []string{"o1"}); err != nil || len(got) != 1 || got[0].State != stock.StateUnknown {
				t.Fatalf("Orders(o1) = %+v, %v; want the order unknown to the ledger", got, err)
			}
		})
	}
}

// Concurrent first calls of a Store wait for one detection: the server
// gets one SELECT VERSION(), and every call then runs in the dialect it
// found. The probe holds the first SELECT VERSION() until every call has
// begun; a Store that let each call ask would send one per call.
func TestDetectionRunsOnceForConcurrentFirstCalls(t *testing.T) {
	const n = 16
	for _, server := range []bool{false, true} {
		name := "no server"
		if server {
			name = "mariadb"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			p := &probe{gate: make(chan struct{}), arrived: make(chan struct{}, n)}
			var cfg sqlstock.Config
			var setup *sqlstock.Store
			if server {
				real := testdb.MariaDB(t, 4)
				p.drv, p.dsn = real.Driver(), testdb.WithParam(testdb.MySQL.Value(), "interpolateParams=true")
				setup = newStore(t, real, sqlstock.Config{Dialect: sqlstock.MariaDB})
				if err := setup.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 100}); err != nil {
					t.Fatal(err)
				}
				tables := setup.Tables()
				cfg.Table, cfg.Ledger = tables[0], tables[1]
			} else {
				p.version = "10.11.6-MariaDB-0+deb12u1"
			}
			begun := make(chan struct{}, n)
			cfg.Observer = observe.Observer{Begin: func(ctx context.Context, _ observe.Call) context.Context {
				begun <- struct{}{}
				return ctx
			}}
			s, err := sqlstock.New(openProbe(t, p, "mysql", n+2).DB, cfg)
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					errs[i] = s.Deduct(ctx, stock.Order{ID: "o" + strconv.Itoa(i), Items: []stock.Item{{SKU: "a", Qty: 1}}})
				})
			}
			ended := make(chan struct{})
			go func() { wg.Wait(); close(ended) }()
			for range n {
				<-begun
			}
			select {
			case <-p.arrived: // the first SELECT VERSION() waits at the gate
			case <-ended: // none was sent
			}
			for range 10 {
				runtime.Gosched()
			}
			close(p.gate)
			<-ended
			if got := p.versions.Load(); got != 1 {
				t.Fatalf("%d concurrent first calls sent %d SELECT VERSION(), want 1", n, got)
			}
			if s.Dialect() != sqlstock.MariaDB {
				t.Fatalf("Dialect() = %v, want mariadb", s.Dialect())
			}
			if !server {
				return
			}
			for i, err := range errs {
				if err != nil {
					t.Errorf("Deduct o%d: %v", i, err)
				}
			}
			if lv, err := setup.Levels(ctx, "a"); err != nil || lv.Available != 100-n || lv.Held != n {
				t.Fatalf("Levels = %+v, %v; want %d available, %d held", lv, err, 100-n, n)
			}
		})
	}
}

// A Store told it is on MySQL, on a MariaDB server, refuses every call
// with stock.ErrInvalid naming Config.Dialect and the server, after one
// SELECT VERSION() and before anything else is sent: over existing
// tables nothing changes, and CreateTables creates none.
func TestDialectMySQLOnMariaDBIsRefused(t *testing.T) {
	real := testdb.MariaDB(t, 4)
	ctx := t.Context()
	good := newStore(t, real, sqlstock.Config{Dialect: sqlstock.MariaDB})
	if err := good.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
		t.Fatal(err)
	}
	p := &probe{drv: real.Driver(), dsn: testdb.WithParam(testdb.MySQL.Value(), "interpolateParams=true")}
	db := openProbe(t, p, "mysql", 4)
	tables := good.Tables()
	bad, err := sqlstock.New(db.DB, sqlstock.Config{Dialect: sqlstock.MySQL, Table: tables[0], Ledger: tables[1]})
	if err != nil {
		t.Fatalf("New does no I/O and cannot know the server yet: %v", err)
	}
	for _, c := range everyCall() {
		err := c.call(ctx, bad, db)
		if !errors.Is(err, stock.ErrInvalid) || !hasAll(err.Error(), "sqlstock.Config.Dialect", "MariaDB") {
			t.Errorf("%s: %v; want stock.ErrInvalid naming sqlstock.Config.Dialect and MariaDB", c.name, err)
		}
	}
	if got := p.statements(); len(got) != 0 {
		t.Errorf("the refused Store sent %q", got)
	}
	if n := p.versions.Load(); n != 1 {
		t.Errorf("%d SELECT VERSION(), want 1", n)
	}
	if lv, err := good.Levels(ctx, "a"); err != nil || lv.Available != 10 || lv.Held != 0 || lv.Sold != 0 {
		t.Fatalf("Levels = %+v, %v; want 10 available, nothing held or sold", lv, err)
	}
	if got, err := good.Orders(ctx, []string{"o1"}); err != nil || len(got) != 1 || got[0].State != stock.StateUnknown {
		t.Fatalf("Orders(o1) = %+v, %v; want the order unknown to the ledger", got, err)
	}

	fresh, err := sqlstock.New(db.DB, sqlstock.Config{Dialect: sqlstock.MySQL, Table: testdb.Unique("sgs"), Ledger: testdb.Unique("sgl")})
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.CreateTables(ctx); !errors.Is(err, stock.ErrInvalid) {
		t.Fatalf("CreateTables: %v; want stock.ErrInvalid", err)
	}
	names := fresh.Tables()
	var created int
	if err := real.GetContext(ctx, &created, "SELECT COUNT(*) FROM information_schema.tables"+
		" WHERE table_schema = DATABASE() AND table_name IN (?, ?, ?, ?)", names[0], names[1], names[2], names[3]); err != nil {
		t.Fatal(err)
	}
	if created != 0 {
		t.Fatalf("the refused CreateTables created %d tables", created)
	}
}

// On SQLite and PostgreSQL the driver names the dialect: Dialect() knows
// it from New, and no call asks the server anything more (no SELECT
// VERSION()).
func TestNoDetectionOffMySQL(t *testing.T) {
	for _, b := range backends() {
		if b.name != "sqlite" && b.name != "postgres" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			b.need(t)
			real := b.open(t)
			p := &probe{drv: real.Driver(), dsn: testdb.Postgres.Value()}
			if b.dialect == sqlstock.SQLite {
				p.dsn = "file:" + filepath.Join(t.TempDir(), "stock.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)"
			}
			db := openProbe(t, p, real.DriverName(), 4)
			s, err := sqlstock.New(db.DB, sqlstock.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if d := s.Dialect(); d != b.dialect {
				t.Fatalf("Dialect() after New = %v, want %v", d, b.dialect)
			}
			s = newStore(t, db, sqlstock.Config{})
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 10}); err != nil {
				t.Fatal(err)
			}
			for _, c := range everyCall() {
				if err := c.call(ctx, s, db); err != nil && !stock.IsBusiness(err) {
					t.Errorf("%s: %v", c.name, err)
				}
			}
			if n := p.versions.Load(); n != 0 {
				t.Fatalf("%d SELECT VERSION() on %s, want none", n, b.name)
			}
		})
	}
}

// hasAll reports whether s contains every one of subs.
func hasAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
