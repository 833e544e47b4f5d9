package sqlstock

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jmoiron/sqlx"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Store is a stock.Manager, stock.Reclaimer, stock.OrderReader,
// stock.HoldLister, stock.HoldReverter, stock.PartialReverter and
// stock.HoldExtender over a SQL database: the application's stock table
// holds the counts, the ledger holds one row per order line. It is safe for concurrent use, and any number of Stores in
// any number of processes may share the tables.
type Store struct {
	db  *sql.DB
	cfg Config // cfg.Dialect: as given, or the driver's; 0 to be detected
	// d and q are the dialect the Store speaks and its statements. A
	// Store whose dialect is detected sets them in detect, before it
	// stores known: read them only in a call that ready let through.
	d         Dialect
	q         *queries
	known     atomic.Pointer[verdict] // nil until the server's dialect is known
	detecting chan struct{}           // one slot: one detection at a time
	settings  *lru.Cache[string, settings]
	inFlight  stripes
	group     *grouper          // nil unless Atomic with MaxGroup > 1
	obs       *observe.Observer // &cfg.Observer
	// cycles: until when (Unix nanoseconds) transactions of several rows
	// wait only briefly for a row while they hold another (inTxRows).
	cycles atomic.Int64
}

// stripes counts deducts in flight per SKU, hashed onto a fixed array: a
// collision only makes a SKU look busier than it is.
type stripes [1024]atomic.Int32

func (c *stripes) slot(sku string) *atomic.Int32 {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(sku); i++ {
		h = (h ^ uint32(sku[i])) * 16777619
	}
	return &c[h%uint32(len(c))]
}

// enter counts one more deduct of sku and reports whether another was
// already in flight.
func (c *stripes) enter(sku string) bool { return c.slot(sku).Add(1) > 1 }

func (c *stripes) leave(sku string) { c.slot(sku).Add(-1) }

// settings are a SKU's per-user limit, hold time and maximum hold time
// (the column's value: 0 means the hold time), as last read.
type settings struct {
	limit int64
	ttlMS int64
	maxMS int64
}

// effectiveMax is the SKU's maximum hold time in milliseconds: the
// column's, or the hold time when that is longer (0 in a row written
// before the column, or by PutOnSale without a MaxHoldTTL).
func (v settings) effectiveMax() int64 { return max(v.maxMS, v.ttlMS) }

var (
	_ stock.Manager    = (*Store)(nil)
	_ stock.Reclaimer  = (*Store)(nil)
	_ stock.HoldLister = (*Store)(nil)
)

// New returns a Store over db, a *sql.DB from sql.Open or sql.OpenDB
// (pgx's stdlib.OpenDBFromPool for a pgxpool.Pool). It checks cfg (every
// table and column name must match ^[A-Za-z_][A-Za-z0-9_]{0,62}$) and
// fails with an error wrapping stock.ErrInvalid before anything is sent
// to the database. With Config.Dialect zero the dialect is the driver's:
// go-sql-driver/mysql (MySQL or MariaDB: the server tells, see
// Config.Dialect), pgx's stdlib or lib/pq (PostgreSQL), modernc.org/sqlite
// or mattn/go-sqlite3 (SQLite). A driver this package does not know, such
// as one wrapped for tracing, is refused with an error wrapping
// stock.ErrInvalid: set Config.Dialect. A Config.Dialect set outside the
// family of a driver this package knows (PostgreSQL over the mysql driver,
// MySQL over pgx) is refused the same way. New sends nothing: on MySQL and
// MariaDB the Store's first call that reaches the database asks the
// server which it is. It does not create tables: see CreateTables and
// Schema.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, &stock.InvalidError{Field: "sqlstock.New db", Reason: "nil"}
	}
	name, desc := driverName(db.Driver())
	return newStore(db, name, desc, cfg)
}

// NewSqlx returns a Store over db.DB, as New does, reading the dialect
// from db.DriverName() (the name the driver was opened under) instead of
// the driver's type.
//
// Deprecated: use New with db.DB.
func NewSqlx(db *sqlx.DB, cfg Config) (*Store, error) {
	if db == nil || db.DB == nil {
		return nil, &stock.InvalidError{Field: "sqlstock.NewSqlx db", Reason: "nil"}
	}
	return newStore(db.DB, db.DriverName(), quoteName(db.DriverName()), cfg)
}

// newStore builds a Store over db, whose driver is registered as name
// ("" when not known), described as desc in an error.
func newStore(db *sql.DB, name, desc string, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Dialect == 0 && name != mysqlDriver {
		cfg.Dialect = dialectOf(name)
		if cfg.Dialect == 0 {
			return nil, &stock.InvalidError{Field: "sqlstock.Config.Dialect",
				Reason: "unset, and driver " + desc + " is not one this package knows: set the dialect of its database"}
		}
	}
	if cfg.Dialect < 0 || cfg.Dialect > SQLite {
		return nil, &stock.InvalidError{Field: "sqlstock.Config.Dialect", Reason: cfg.Dialect.String() + " is not a dialect"}
	}
	if family := familyOf(name); cfg.Dialect != 0 && family != nil && !slices.Contains(family, cfg.Dialect) {
		return nil, &stock.InvalidError{Field: "sqlstock.Config.Dialect",
			Reason: cfg.Dialect.String() + " contradicts driver " + desc + ", which speaks " + dialectList(family) +
				": leave the dialect zero, or set the driver's"}
	}
	cache, err := lru.New[string, settings](cfg.SettingsCache)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, cfg: cfg, settings: cache, detecting: make(chan struct{}, 1)}
	if cfg.Dialect != 0 { // else the server tells (detect)
		s.d, s.q = cfg.Dialect, newQueries(cfg.Dialect, cfg)
	}
	s.obs = &s.cfg.Observer
	if cfg.Strategy == Atomic && cfg.MaxGroup > 1 {
		s.group = &grouper{s: s, max: cfg.MaxGroup, flying: maxFlying, lanes: map[string]*lane{}}
		if cfg.Dialect == SQLite {
			s.group.flying = 1
		}
	}
	return s, nil
}

// Strategy returns the strategy the Store deducts with.
func (s *Store) Strategy() Strategy { return s.cfg.Strategy }

// Dialect returns the dialect the Store speaks: Config.Dialect when set,
// else the one its driver names. With the "mysql" driver and
// Config.Dialect zero it is 0 until a call of the Store has reached the
// database and found the server to be MariaDB or MySQL, and then that
// one. A Store whose Config.Dialect the server contradicts returns
// Config.Dialect, and refuses every call.
func (s *Store) Dialect() Dialect {
	if s.known.Load() == nil {
		return s.cfg.Dialect // 0, or as given: detect never changes it
	}
	return s.d
}

// PutOnSale implements stock.Manager: it inserts the SKU's row or
// overwrites its available count, limit, hold time and maximum hold time,
// keeping its held and sold counts. It is one statement in a transaction
// of its own, whose wait for the row lock is bounded by Config.LockWait
// as every transaction's is: a lock wait that ran out is run again within
// two LockWaits, then it is stock.ErrContention (nothing applied). It is
// never sent again once it may have applied: a failure after its COMMIT
// was sent whose outcome is unknown matches stock.ErrUnknownOutcome.
func (s *Store) PutOnSale(ctx context.Context, l stock.Listing) (err error) {
	ctx, tr := s.obs.Track(ctx, "sqlstock", observe.OpPutOnSale, 1)
	defer func() { tr.Done(err) }()
	if err := l.Validate(); err != nil {
		return err
	}
	if err := s.ready(ctx, s.db); err != nil {
		return err
	}
	set := settings{limit: l.PerUserLimit, ttlMS: l.EffectiveHoldTTL().Milliseconds(), maxMS: l.MaxHoldTTL.Milliseconds()}
	err = s.retry(ctx, "put on sale", false, func(ctx context.Context) error {
		return s.inTx(ctx, func(q querier) error {
			_, err := q.ExecContext(ctx, s.q.putOnSale, l.SKU, l.Units, l.PerUserLimit, set.ttlMS, set.maxMS)
			return err
		})
	})
	if err == nil {
		s.settings.Add(l.SKU, set)
	} else {
		s.settings.Remove(l.SKU)
	}
	return err
}

// Available implements stock.Manager.
func (s *Store) Available(ctx context.Context, sku string) (int64, error) {
	lv, err := s.Levels(ctx, sku)
	return lv.Available, err
}

// Levels implements stock.Manager. Held counts holds not yet returned,
// including those past their deadline that no reclaimer has returned yet.
// Its wait for a pool connection and the server ends within
// Config.LockWait, as a write's does: past it the answer is a
// *ContentionError.
func (s *Store) Levels(ctx context.Context, sku string) (stock.Levels, error) {
	if err := stock.ValidateID("sku", sku); err != nil {
		return stock.Levels{}, err
	}
	var (
		lv  stock.Levels
		set settings
	)
	err := s.read(ctx, "levels", func(ctx context.Context) error {
		if err := s.ready(ctx, s.db); err != nil {
			return err
		}
		return s.db.QueryRowContext(ctx, s.q.levels, sku).Scan(&lv.Available, &lv.Held, &lv.Sold, &set.limit, &set.ttlMS, &set.maxMS)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return stock.Levels{}, &stock.SKUError{SKU: sku, Err: stock.ErrUnknownSKU}
	}
	if err != nil {
		return stock.Levels{}, err
	}
	set.levels(&lv)
	s.settings.Add(sku, set)
	return lv, nil
}

// levels sets lv's settings fields from v.
func (v settings) levels(lv *stock.Levels) {
	lv.PerUserLimit = v.limit
	lv.HoldTTL = ms(v.ttlMS)
	lv.MaxHoldTTL = ms(v.effectiveMax())
}

// nowMS is the Clock's time in Unix milliseconds, the unit of the
// ledger's deadlines.
func (s *Store) nowMS() int64 { return s.cfg.Clock.Now().UnixMilli() }
