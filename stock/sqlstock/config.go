package sqlstock

import (
	"regexp"
	"time"

	"github.com/stockguard/stockguard/observe"
	"github.com/stockguard/stockguard/stock"
)

// Strategy is how Deduct takes units from the stock row.
type Strategy int

const (
	// Atomic takes units with one conditional statement per line,
	// "UPDATE stock SET available = available - n WHERE sku = ? AND
	// available >= n", in the transaction that writes the ledger. The row
	// decides; nothing is read first. The default, and the fastest on a
	// hot SKU.
	Atomic Strategy = iota
	// Optimistic reads the row, then writes it back only if its version
	// is unchanged, retrying with jittered backoff. It never blocks on a
	// row lock before the write, which suits shops whose SKUs are rarely
	// bought at the same instant; on a hot SKU most attempts lose and the
	// caller gets stock.ErrContention.
	Optimistic
	// Pessimistic locks the stock rows (SELECT ... FOR UPDATE, in sorted
	// SKU order, with a bounded lock wait) before it checks and writes
	// them. Slowest; for reconciliation jobs and emergencies where a read
	// must not change under the writer.
	Pessimistic
)

// String returns "atomic", "optimistic" or "pessimistic".
func (s Strategy) String() string {
	switch s {
	case Atomic:
		return "atomic"
	case Optimistic:
		return "optimistic"
	case Pessimistic:
		return "pessimistic"
	}
	return "Strategy(" + itoa(int64(s)) + ")"
}

// Config configures a Store. The zero value means defaults: the atomic
// strategy, the dialect of the database's driver, the default table
// and column names below, and stock.SystemClock.
type Config struct {
	// Strategy is how Deduct takes units; default Atomic.
	Strategy Strategy

	// Dialect is the database's SQL flavour. The zero value picks it from
	// the database's driver (New: the *sql.DB's driver; NewSqlx: the name
	// it was opened under): pgx's stdlib ("pgx") and lib/pq ("postgres")
	// are Postgres, modernc.org/sqlite ("sqlite") and mattn/go-sqlite3
	// ("sqlite3") are SQLite, and go-sql-driver/mysql ("mysql"), the
	// driver of MySQL and MariaDB alike, is MariaDB when the server's
	// VERSION() says "MariaDB" and MySQL otherwise. The server is asked
	// (with the collation of the stock table's SKU column, see Tables in
	// the package doc) once per Store, by its first call that reaches
	// the database (New
	// does no I/O); see Store.Dialect. Set it for any other driver, or a
	// driver wrapped by another (otelsql and other tracing wrappers),
	// which New cannot tell: it refuses them. On MySQL and
	// MariaDB a Dialect that is set is checked by the same query: MySQL on
	// a MariaDB server, or MariaDB on a MySQL server, whose lock wait
	// bounds the server would not run, fails every call of the Store with
	// an error wrapping stock.ErrInvalid, before anything is written. A
	// Dialect outside the family of a driver New knows (Postgres over
	// go-sql-driver/mysql, MySQL over pgx or a SQLite driver) is refused
	// by New with an error wrapping stock.ErrInvalid.
	Dialect Dialect

	// Table names the application's stock table; default "stock". It
	// must not be a name of the library's tables (Ledger, Ledger + "_ops",
	// Ledger + "_returns") or indexes (Ledger + "_due", "_sku_user",
	// "_ops_sku"), compared without case. Its SKU column must tell apart
	// every two SKUs whose bytes differ, as the ledger does (see Tables in
	// the package doc): a collation that matches "a" to "A" is refused by
	// every call.
	Table string
	// Columns names its columns; each empty field takes its default.
	Columns Columns

	// Ledger names the library's ledger table; default "stockguard_ledger".
	// The operations table of restocks is named Ledger + "_ops", the
	// table of applied partial reverts Ledger + "_returns".
	Ledger string

	// Clock tells the time of holds and deadlines; default
	// stock.SystemClock. The database's own clock is never used.
	Clock stock.Clock

	// MaxAttempts bounds how often one call runs its transaction when the
	// database reports a transient failure (deadlock, lock wait timeout,
	// serialization failure, SQLITE_BUSY) or, for Optimistic, a changed
	// version; default 8. When they are used up the call fails with
	// stock.ErrContention.
	MaxAttempts int
	// RetryWait is the first pause between attempts; default 2ms. Each
	// pause is 1.5 times the last, jittered by ±50%, capped at 100ms.
	RetryWait time.Duration

	// LockWait bounds how long a write waits for a row lock, under every
	// strategy (PostgreSQL lock_timeout per transaction, MariaDB SET
	// STATEMENT innodb_lock_wait_timeout and FOR UPDATE WAIT, MySQL
	// SET_VAR hints, and on all three a transaction's statements stop
	// LockWait after BEGIN in all, since one transaction can wait more
	// than once; a canceled one-statement deduct), and how long SQLite
	// waits for its write lock (busy_timeout); default 5s. MySQL and
	// MariaDB take whole seconds (rounded up). New refuses one longer than
	// MaxLockWait. It also bounds every call:
	// a lock wait that ran out or a deadlock is run again while the call
	// is within two LockWaits of its start, then it is
	// stock.ErrContention (nothing applied), and every call answers within
	// three (Store.AnswerBound).
	LockWait time.Duration

	// SettingsCache is how many SKUs' per-user limit, hold time and
	// maximum hold time a Store remembers; default 4096. A remembered
	// value is checked by the same statement that takes the units, and an
	// order it would refuse is checked again against the row, so a stale
	// one costs a read, never a wrong deadline, bound or limit and never a
	// refusal.
	SettingsCache int

	// MaxGroup bounds how many concurrent Deducts of the Atomic strategy
	// one Store writes in one transaction (group commit); default 64, and
	// 1 turns grouping off. Deducts of the same SKUs (on SQLite, which
	// has one writer, of any SKUs) that arrive while such a transaction
	// is in flight wait for it and then go together:
	// one multi-row ledger INSERT and one conditional UPDATE per SKU for
	// the group's sum. A caller that finds nothing in flight goes at once,
	// alone, so an idle Store adds no latency. Every order of a group is
	// still all-or-nothing, exactly once by its ID and checked against its
	// per-user limit; see the package doc.
	MaxGroup int

	// Observer receives the Store's calls, groups and reclaim passes
	// (package observe); the zero value reports nothing.
	Observer observe.Observer
}

// Columns names the columns of the application's stock table. Every
// column holds a whole number except SKU, which is the primary key.
type Columns struct {
	// SKU is the primary key; default "sku".
	SKU string
	// Available is the units that can be deducted now; default "available".
	Available string
	// Held is the units of unpaid holds; default "held".
	Held string
	// Sold is the units of confirmed sales; default "sold".
	Sold string
	// Version grows by one with every write of the row (all strategies
	// bump it, so they can share one table); default "version".
	Version string
	// PerUserLimit is the per-user limit, 0 for none; default "per_user_limit".
	PerUserLimit string
	// HoldTTL is the hold time in milliseconds; default "hold_ttl_ms".
	HoldTTL string
	// MaxHoldTTL is the longest a hold may last (stock.Listing.MaxHoldTTL)
	// in milliseconds, 0 for the hold time itself; default
	// "max_hold_ttl_ms". CreateTables adds it to a stock table that lacks
	// it (see Upgrade).
	MaxHoldTTL string
}

// MaxLockWait is the longest Config.LockWait New accepts: 2147483647ms
// (about 24.8 days), the longest lock_timeout PostgreSQL and busy_timeout
// SQLite take.
const MaxLockWait = (1<<31 - 1) * time.Millisecond

// DefaultMaxGroup is the MaxGroup of a Config that leaves it zero.
const DefaultMaxGroup = 64

const (
	defaultTable         = "stock"
	defaultLedger        = "stockguard_ledger"
	defaultMaxAttempts   = 8
	defaultRetryWait     = 2 * time.Millisecond
	maxRetryWait         = 100 * time.Millisecond
	defaultLockWait      = 5 * time.Second
	defaultSettingsCache = 4096
	maxMaxGroup          = 1024
	maxLedgerName        = 54 // + "_sku_user" stays within the 63 bytes PostgreSQL keeps
)

// identRE is what a table or column name may be: a letter or underscore,
// then up to 62 letters, digits or underscores. Names are still quoted.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// withDefaults returns cfg with every zero field set to its default, or an
// error wrapping stock.ErrInvalid naming the first bad field.
func (cfg Config) withDefaults() (Config, error) {
	def := func(p *string, d string) {
		if *p == "" {
			*p = d
		}
	}
	def(&cfg.Table, defaultTable)
	def(&cfg.Ledger, defaultLedger)
	c := &cfg.Columns
	def(&c.SKU, "sku")
	def(&c.Available, "available")
	def(&c.Held, "held")
	def(&c.Sold, "sold")
	def(&c.Version, "version")
	def(&c.PerUserLimit, "per_user_limit")
	def(&c.HoldTTL, "hold_ttl_ms")
	def(&c.MaxHoldTTL, "max_hold_ttl_ms")
	if cfg.Clock == nil {
		cfg.Clock = stock.SystemClock
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = defaultMaxAttempts
	}
	if cfg.RetryWait <= 0 {
		cfg.RetryWait = defaultRetryWait
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = defaultLockWait
	}
	if cfg.LockWait > MaxLockWait {
		return cfg, &stock.InvalidError{Field: "sqlstock.Config.LockWait", Reason: "longer than " + MaxLockWait.String() + " (2147483647ms), the longest lock wait PostgreSQL and SQLite take"}
	}
	if cfg.SettingsCache <= 0 {
		cfg.SettingsCache = defaultSettingsCache
	}
	if cfg.MaxGroup <= 0 {
		cfg.MaxGroup = DefaultMaxGroup
	}
	if cfg.MaxGroup > maxMaxGroup {
		return cfg, &stock.InvalidError{Field: "sqlstock.Config.MaxGroup", Reason: "more than " + itoa(maxMaxGroup)}
	}
	if cfg.Strategy < Atomic || cfg.Strategy > Pessimistic {
		return cfg, &stock.InvalidError{Field: "sqlstock.Config.Strategy", Reason: cfg.Strategy.String() + " is not a strategy"}
	}
	names := []struct{ field, name string }{
		{"Table", cfg.Table}, {"Ledger", cfg.Ledger},
		{"Columns.SKU", c.SKU}, {"Columns.Available", c.Available},
		{"Columns.Held", c.Held}, {"Columns.Sold", c.Sold},
		{"Columns.Version", c.Version}, {"Columns.PerUserLimit", c.PerUserLimit},
		{"Columns.HoldTTL", c.HoldTTL}, {"Columns.MaxHoldTTL", c.MaxHoldTTL},
	}
	seen := map[string]string{}
	for _, n := range names {
		if !identRE.MatchString(n.name) {
			return cfg, &stock.InvalidError{Field: "sqlstock.Config." + n.field,
				Reason: quoteName(n.name) + " is not an identifier (want ^[A-Za-z_][A-Za-z0-9_]{0,62}$)"}
		}
		if n.field == "Table" || n.field == "Ledger" {
			continue
		}
		if other, dup := seen[lower(n.name)]; dup {
			return cfg, &stock.InvalidError{Field: "sqlstock.Config." + n.field,
				Reason: quoteName(n.name) + " is also " + other}
		}
		seen[lower(n.name)] = n.field
	}
	if len(cfg.Ledger) > maxLedgerName {
		return cfg, &stock.InvalidError{Field: "sqlstock.Config.Ledger", Reason: "longer than " + itoa(maxLedgerName) + " characters: index names are made from it"}
	}
	if lower(cfg.Table) == lower(cfg.Ledger) {
		return cfg, &stock.InvalidError{Field: "sqlstock.Config.Ledger", Reason: "same table as Table"}
	}
	if lower(cfg.Table) == lower(opsTable(cfg)) {
		return cfg, &stock.InvalidError{Field: "sqlstock.Config.Table", Reason: "same table as the operations table, Ledger + \"_ops\""}
	}
	if lower(cfg.Table) == lower(returnsTable(cfg)) {
		return cfg, &stock.InvalidError{Field: "sqlstock.Config.Table", Reason: "same table as the returns table, Ledger + \"_returns\""}
	}
	for _, suffix := range ledgerIndexes {
		if lower(cfg.Table) == lower(cfg.Ledger+suffix) {
			return cfg, &stock.InvalidError{Field: "sqlstock.Config.Table",
				Reason: "same name as the index Ledger + " + quoteName(suffix) + ", which shares the tables' names on PostgreSQL and SQLite"}
		}
	}
	return cfg, nil
}

// The indexes Schema creates are named the ledger's name + these.
const (
	idxDue     = "_due"      // the reclaimer's (state, deadline_ms) on the ledger
	idxSKUUser = "_sku_user" // per-user limits' (sku, user_id) on the ledger
	idxOpsSKU  = "_ops_sku"  // View.Restocks' (sku, created_ms) on the operations table
)

// ledgerIndexes are the suffixes of every index Schema creates.
var ledgerIndexes = []string{idxDue, idxSKUUser, idxOpsSKU}
