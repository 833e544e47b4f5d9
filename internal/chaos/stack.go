package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/degrade"
	"github.com/stockguard/stockguard/reconcile"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
	"github.com/stockguard/stockguard/stock/stocktest"
	"github.com/stockguard/stockguard/stock/tiered"
)

// DB names a database the matrix runs on.
type DB struct {
	Name    string // "mariadb", "postgres" or "sqlite"
	Driver  string // "mysql", "pgx" or "sqlite"
	DSN     string // a go-sql-driver DSN, a postgres:// URL; for SQLite set per cell
	Dialect sqlstock.Dialect
}

// Addr is the host:port the DSN points at.
func (d DB) Addr() (string, error) {
	switch d.Driver {
	case "sqlite":
		return "", errors.New("chaos: SQLite has no address")
	case "mysql":
		c, err := mysql.ParseDSN(d.DSN)
		if err != nil {
			return "", err
		}
		return c.Addr, nil
	}
	u, err := url.Parse(d.DSN)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", errors.New("chaos: the PostgreSQL DSN must be a URL with a host (postgres://user@host:port/db)")
	}
	return u.Host, nil
}

// WithAddr returns the DSN pointed at addr (a proxy) instead.
func (d DB) WithAddr(addr string) (string, error) {
	if d.Driver == "mysql" {
		c, err := mysql.ParseDSN(d.DSN)
		if err != nil {
			return "", err
		}
		c.Addr = addr
		c.InterpolateParams = true
		return c.FormatDSN(), nil
	}
	u, err := url.Parse(d.DSN)
	if err != nil {
		return "", err
	}
	u.Host = addr
	return u.String(), nil
}

// Open opens a pool of at most conns connections to addr ("" for the
// DSN's own address).
func (d DB) Open(addr string, conns int) (*sqlx.DB, error) {
	if d.Driver == "sqlite" {
		db, err := sqlx.Open("sqlite", "file:"+d.DSN+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)")
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(min(conns, 4))
		return db, nil
	}
	if addr == "" {
		var err error
		if addr, err = d.Addr(); err != nil {
			return nil, err
		}
	}
	dsn, err := d.WithAddr(addr)
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open(d.Driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// StackConfig is how one application node is wired.
type StackConfig struct {
	RedisAddr      string   // the gate's Redis (or a proxy in front of it)
	SentinelMaster string   // with SentinelAddrs: a go-redis failover client
	SentinelAddrs  []string // instead of RedisAddr
	DB             DB
	DBAddr         string // where the record's pool connects ("" the DSN's address)
	Table, Ledger  string
	Prefix         string // the gate's key prefix
	Hold, Grace    time.Duration
	LockWait       time.Duration // sqlstock Config.LockWait; 0 its default
	Faulty         bool          // wrap both tiers in stocktest.Faulty
	Degrade        bool          // let the Shop's breaker open (it never does otherwise)
	History        *History      `json:"-"` // receives the record's refusals
	// StripUnknown makes the flow (the node's top Manager) report every
	// ErrUnknownOutcome as a plain error, as a library without the outcome
	// rule would: the matrix must then fail (its own check is checked this
	// way). It is applied at the top, not at the record, because the tiered
	// flow reads the record again after a record error and so recovers
	// from a record that breaks the rule.
	StripUnknown bool
}

// Stack is one application node: a stockguard.Shop (the gate, the record,
// the tiered flow, the breaker, the reconciler) on the node's own clients,
// with fault wrappers when configured.
type Stack struct {
	RDB     redis.UniversalClient
	DB      *sqlx.DB
	Shop    *stockguard.Shop
	Gate    *redisstock.Store
	Record  *sqlstock.Store
	GateF   *stocktest.Faulty // nil unless Faulty
	RecordF *stocktest.Faulty
	Tiered  *tiered.Manager
	// Top is what buyers call: the Shop, or StripUnknown's wrapper of it.
	Top interface {
		stock.Manager
		stock.Reclaimer
	}
}

// recordTap forwards every interface of the record and reports the
// record's refusals (sold out, limit) of orders the gate admitted.
type recordTap struct {
	tiered.RecordStore
	h *History
}

func (t recordTap) Deduct(ctx context.Context, o stock.Order) error {
	err := t.RecordStore.Deduct(ctx, o)
	if t.h != nil && (errors.Is(err, stock.ErrSoldOut) || errors.Is(err, stock.ErrLimitReached)) {
		t.h.Add(Event{Op: "record-refused", ID: o.ID, Err: err.Error()})
	}
	return err
}

// Build wires a node through stockguard.New, as an application does. It
// does no I/O. Without Degrade the breaker never opens, so that a cell's
// fault reaches the flow as it is.
func Build(cfg StackConfig) (*Stack, error) {
	s := &Stack{}
	if len(cfg.SentinelAddrs) > 0 {
		s.RDB = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: cfg.SentinelMaster, SentinelAddrs: cfg.SentinelAddrs,
			DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
			PoolSize: 24,
		})
	} else {
		s.RDB = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr,
			DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
			PoolSize: 24,
		})
	}
	var err error
	if s.DB, err = cfg.DB.Open(cfg.DBAddr, 16); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	breaker := degrade.Config{ReadyToTrip: func(gobreaker.Counts) bool { return false }}
	if cfg.Degrade {
		breaker = degrade.Config{
			OpenFor: 400 * time.Millisecond, RecalibrateTimeout: 2 * time.Second,
			RampSteps: []float64{0.5}, RampInterval: 300 * time.Millisecond,
			FallbackLimit: 300, FallbackBurst: 30,
		}
	}
	s.Shop, err = stockguard.New(s.RDB, s.DB.DB, stockguard.Config{
		Gate:      redisstock.Config{Prefix: cfg.Prefix},
		Record:    sqlstock.Config{Table: cfg.Table, Ledger: cfg.Ledger, LockWait: cfg.LockWait},
		Flow:      tiered.Config{RecordGrace: cfg.Grace},
		Breaker:   breaker,
		Reconcile: reconcile.Config{Interval: time.Second, WatchInterval: 200 * time.Millisecond, MaxAutoFix: -1},
		Reclaim:   stock.ReclaimerConfig{Interval: 100 * time.Millisecond, BatchSize: 64},
		Wrap: func(gate tiered.GateStore, record tiered.RecordStore) (tiered.GateStore, tiered.RecordStore) {
			record = recordTap{RecordStore: record, h: cfg.History}
			if cfg.Faulty {
				s.GateF, s.RecordF = stocktest.NewFaulty(gate), stocktest.NewFaulty(record)
				return s.GateF, s.RecordF
			}
			return gate, record
		},
	})
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.Gate, s.Record, s.Tiered = s.Shop.Gate(), s.Shop.Record(), s.Shop.Flow()
	s.Top = s.Shop
	if cfg.StripUnknown {
		s.Top = stripUnknown{Top: s.Top}
	}
	return s, nil
}

// stripUnknown reports every ErrUnknownOutcome of the Manager it wraps as
// a plain error (see StackConfig.StripUnknown).
type stripUnknown struct {
	Top interface {
		stock.Manager
		stock.Reclaimer
	}
}

func (m stripUnknown) Deduct(ctx context.Context, o stock.Order) error {
	return plainErr(m.Top.Deduct(ctx, o))
}

func (m stripUnknown) Confirm(ctx context.Context, id string) error {
	return plainErr(m.Top.Confirm(ctx, id))
}

func (m stripUnknown) Revert(ctx context.Context, id string) error {
	return plainErr(m.Top.Revert(ctx, id))
}

func (m stripUnknown) PutOnSale(ctx context.Context, l stock.Listing) error {
	return m.Top.PutOnSale(ctx, l)
}

func (m stripUnknown) Restock(ctx context.Context, r stock.Restock) error {
	return m.Top.Restock(ctx, r)
}

func (m stripUnknown) Available(ctx context.Context, sku string) (int64, error) {
	return m.Top.Available(ctx, sku)
}

func (m stripUnknown) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	return m.Top.Levels(ctx, sku)
}

func (m stripUnknown) ReclaimExpired(ctx context.Context, limit int) ([]stock.Reclaimed, error) {
	return m.Top.ReclaimExpired(ctx, limit)
}

func plainErr(err error) error {
	if errors.Is(err, stock.ErrUnknownOutcome) {
		return errors.New(err.Error())
	}
	return err
}

// Close releases the node's clients and goroutines.
func (s *Stack) Close() error {
	var errs []error
	if s.Shop != nil {
		s.Shop.Close()
	}
	if s.RDB != nil {
		errs = append(errs, s.RDB.Close())
	}
	if s.DB != nil {
		errs = append(errs, s.DB.Close())
	}
	return errors.Join(errs...)
}

// dropTables removes a run's tables through a direct pool.
func dropTables(ctx context.Context, db *sqlx.DB, tables []string) error {
	var errs []error
	for i := len(tables) - 1; i >= 0; i-- {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+tables[i]); err != nil {
			errs = append(errs, fmt.Errorf("drop %s: %w", tables[i], err))
		}
	}
	return errors.Join(errs...)
}

// SQLite is a database in a file of each cell's own directory: the cells
// that hurt only Redis or the application run on it without servers.
var SQLite = DB{Name: "sqlite", Driver: "sqlite", Dialect: sqlstock.SQLite}

// envDBs returns the databases named by the environment.
func envDBs(getenv func(string) string) []DB {
	var dbs []DB
	if dsn := getenv(MySQLEnv); dsn != "" {
		if !strings.Contains(dsn, "interpolateParams") {
			dsn += map[bool]string{true: "&", false: "?"}[strings.Contains(dsn, "?")] + "interpolateParams=true"
		}
		dbs = append(dbs, DB{Name: "mariadb", Driver: "mysql", DSN: dsn, Dialect: sqlstock.MariaDB})
	}
	if dsn := getenv(PostgresEnv); dsn != "" {
		dbs = append(dbs, DB{Name: "postgres", Driver: "pgx", DSN: dsn, Dialect: sqlstock.Postgres})
	}
	return dbs
}

// The variables that name the databases (those of the project's tests).
const (
	MySQLEnv    = "STOCKGUARD_MYSQL_DSN"
	PostgresEnv = "STOCKGUARD_POSTGRES_DSN"
)
