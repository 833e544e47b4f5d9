package sqlstock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/stockguard/stockguard/internal/testdb"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// tattler is a connector that counts every attempt to reach the database
// and refuses it. Its Driver is drv: a real driver's, which New reads the
// dialect from, or none.
type tattler struct {
	drv   driver.Driver
	dials atomic.Int64
}

func (c *tattler) Connect(context.Context) (driver.Conn, error) {
	c.dials.Add(1)
	return nil, errors.New("tattler: no database here")
}
func (c *tattler) Driver() driver.Driver { return c.drv }

var hostile = []string{
	"",
	"stock; DROP TABLE users",
	"stock`; DROP TABLE users; --",
	`stock"; DROP TABLE users; --`,
	"stock' OR '1'='1",
	"stock--",
	"stock/*",
	"public.stock",
	"1stock",
	"st ock",
	"stöck",
	"stock\x00",
	"stock\n",
	strings.Repeat("s", 64),
}

func TestNewRefusesHostileNamesBeforeAnyIO(t *testing.T) {
	set := map[string]func(c *sqlstock.Config, name string){
		"Table":                func(c *sqlstock.Config, n string) { c.Table = n },
		"Ledger":               func(c *sqlstock.Config, n string) { c.Ledger = n },
		"Columns.SKU":          func(c *sqlstock.Config, n string) { c.Columns.SKU = n },
		"Columns.Available":    func(c *sqlstock.Config, n string) { c.Columns.Available = n },
		"Columns.Held":         func(c *sqlstock.Config, n string) { c.Columns.Held = n },
		"Columns.Sold":         func(c *sqlstock.Config, n string) { c.Columns.Sold = n },
		"Columns.Version":      func(c *sqlstock.Config, n string) { c.Columns.Version = n },
		"Columns.PerUserLimit": func(c *sqlstock.Config, n string) { c.Columns.PerUserLimit = n },
		"Columns.HoldTTL":      func(c *sqlstock.Config, n string) { c.Columns.HoldTTL = n },
	}
	for driverName, drv := range map[string]driver.Driver{"mysql": &mysql.MySQLDriver{}, "pgx": stdlib.GetDefaultDriver(), "sqlite": &sqlite.Driver{}} {
		conn := &tattler{drv: drv}
		db := sql.OpenDB(conn)
		for field, apply := range set {
			for _, name := range hostile {
				if name == "" {
					continue // empty means "default"
				}
				var cfg sqlstock.Config
				apply(&cfg, name)
				s, err := sqlstock.New(db, cfg)
				var ie *stock.InvalidError
				if s != nil || !errors.Is(err, stock.ErrInvalid) || !errors.As(err, &ie) || ie.Field != "sqlstock.Config."+field {
					t.Fatalf("%s: New with %s = %q: store %v, error %v; want an InvalidError naming the field", driverName, field, name, s, err)
				}
				for _, d := range []sqlstock.Dialect{sqlstock.MySQL, sqlstock.MariaDB, sqlstock.Postgres, sqlstock.SQLite} {
					if _, err := sqlstock.Schema(d, cfg); !errors.Is(err, stock.ErrInvalid) {
						t.Fatalf("Schema(%v) with %s = %q: error %v, want stock.ErrInvalid", d, field, name, err)
					}
				}
			}
		}
		if n := conn.dials.Load(); n != 0 {
			t.Fatalf("%s: New reached for the database %d times", driverName, n)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	db := sql.OpenDB(&tattler{drv: &sqlite.Driver{}})
	for name, cfg := range map[string]sqlstock.Config{
		"column used twice":    {Columns: sqlstock.Columns{Held: "sold"}},
		"column case-folded":   {Columns: sqlstock.Columns{Held: "SOLD"}},
		"ledger is the table":  {Table: "t", Ledger: "T"},
		"table is the ops":     {Table: "l_ops", Ledger: "l"},
		"ledger name too long": {Ledger: strings.Repeat("l", 55)},
		"strategy":             {Strategy: 7},
		"dialect":              {Dialect: 9},
	} {
		if _, err := sqlstock.New(db, cfg); !errors.Is(err, stock.ErrInvalid) {
			t.Errorf("%s: New error %v, want stock.ErrInvalid", name, err)
		}
	}
	if _, err := sqlstock.New(nil, sqlstock.Config{}); !errors.Is(err, stock.ErrInvalid) {
		t.Errorf("nil db: error %v, want stock.ErrInvalid", err)
	}
}

// Names that are SQL keywords are legal identifiers: quoting makes them
// work on every dialect.
func TestKeywordNamesAreQuoted(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			suffix := testdb.Unique("")
			cfg := sqlstock.Config{
				Dialect: b.dialect,
				Table:   "order" + suffix,
				Ledger:  "select" + suffix,
				Columns: sqlstock.Columns{
					SKU: "from", Available: "where", Held: "group", Sold: "limit",
					Version: "table", PerUserLimit: "user", HoldTTL: "order",
				},
			}
			s := newStore(t, b.open(t), cfg)
			ctx := t.Context()
			if err := s.PutOnSale(ctx, stock.Listing{SKU: "a", Units: 5, PerUserLimit: 2}); err != nil {
				t.Fatal(err)
			}
			if err := s.Deduct(ctx, stock.Order{ID: "o1", UserID: "u", Items: []stock.Item{{SKU: "a", Qty: 2}}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Confirm(ctx, "o1"); err != nil {
				t.Fatal(err)
			}
			lv, err := s.Levels(ctx, "a")
			if err != nil || lv.Available != 3 || lv.Held != 0 || lv.Sold != 2 || lv.PerUserLimit != 2 {
				t.Fatalf("Levels = %+v, %v", lv, err)
			}
		})
	}
}

func TestSchemaNamesEveryIndex(t *testing.T) {
	for _, d := range []sqlstock.Dialect{sqlstock.MySQL, sqlstock.MariaDB, sqlstock.Postgres, sqlstock.SQLite} {
		stmts, err := sqlstock.Schema(d, sqlstock.Config{})
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(stmts, "\n")
		for _, want := range []string{"stockguard_ledger_due", "(state, deadline_ms)", "stockguard_ledger_sku_user", "(sku, user_id)", "PRIMARY KEY (order_id, line)",
			"stockguard_ledger_ops", "op_id", "stockguard_ledger_ops_sku", "(sku, created_ms)"} {
			if !strings.Contains(all, want) {
				t.Errorf("%v schema lacks %q:\n%s", d, want, all)
			}
		}
	}
}
