package main

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stockguard/stockguard/stock/redisstock"
	"github.com/stockguard/stockguard/stock/sqlstock"
)

// options say where the shop's stores are and how stockctl prints. Each
// connection flag falls back to its environment variable (envNames) when
// it is not given on the command line.
type options struct {
	redis, prefix string
	driver, dsn   string
	table, ledger string
	columns       string
	recordGrace   time.Duration
	// graceGiven is whether --record-grace was given, on the command line
	// or as STOCKCTL_RECORD_GRACE: a grace given is the operator's word for
	// the shop's and is trusted; the default is checked against the tiers'
	// hold times before a command writes any (checkGrace).
	graceGiven bool
	retention  time.Duration
	timeout    time.Duration
	json       bool

	// redisPassword comes from STOCKCTL_REDIS_PASSWORD only, so that it
	// stays out of shell histories and process lists.
	redisPassword string
}

// envNames maps each connection flag to its environment variable.
var envNames = map[string]string{
	"redis":        "STOCKCTL_REDIS",
	"prefix":       "STOCKCTL_PREFIX",
	"db":           "STOCKCTL_DB",
	"dsn":          "STOCKCTL_DSN",
	"table":        "STOCKCTL_TABLE",
	"ledger":       "STOCKCTL_LEDGER",
	"columns":      "STOCKCTL_COLUMNS",
	"record-grace": "STOCKCTL_RECORD_GRACE",
	"retention":    "STOCKCTL_RETENTION",
	"timeout":      "STOCKCTL_TIMEOUT",
}

// redisPasswordEnv names the variable of the Redis password.
const redisPasswordEnv = "STOCKCTL_REDIS_PASSWORD"

// newOptions returns the defaults: the libraries' own (redisstock's key
// prefix, sqlstock's table names) and a 5m bound on the command (a full
// reconcile pass over a large catalog takes a while).
func newOptions() *options {
	return &options{prefix: "sg", table: "stock", ledger: "stockguard_ledger", timeout: 5 * time.Minute}
}

// register adds the connection and output flags to fs, with o's current
// values as defaults (so a second FlagSet keeps what the first parsed).
func (o *options) register(fs *flag.FlagSet) {
	env := func(name, text string) string { return text + " [" + envNames[name] + "]" }
	fs.StringVar(&o.redis, "redis", o.redis, env("redis",
		"`ADDR` of Redis: host:port, a redis:// URL, or a comma-separated list of a Cluster's nodes"))
	fs.StringVar(&o.prefix, "prefix", o.prefix, env("prefix", "redisstock key `PREFIX` (redisstock.Config.Prefix)"))
	fs.StringVar(&o.driver, "db", o.driver, env("db",
		"database `KIND`: mysql, mariadb, postgres or sqlite (default: told from the DSN)"))
	fs.StringVar(&o.dsn, "dsn", o.dsn, env("dsn",
		"database `DSN`: 'user:pass@tcp(host:3306)/shop', 'postgres://user@host/shop', or a SQLite file"))
	fs.StringVar(&o.table, "table", o.table, env("table", "stock table `NAME` (sqlstock.Config.Table)"))
	fs.StringVar(&o.ledger, "ledger", o.ledger, env("ledger",
		"ledger table `NAME` (sqlstock.Config.Ledger); its operations and returns tables are NAME_ops and NAME_returns"))
	fs.StringVar(&o.columns, "columns", o.columns, env("columns",
		"`LIST` of the stock table's column names that differ from sqlstock.Columns' defaults, e.g. 'sku=id,available=qty';\n"+
			"keys: sku, available, held, sold, version, per_user_limit, hold_ttl"))
	fs.DurationVar(&o.recordGrace, "record-grace", o.recordGrace, env("record-grace",
		"how much longer a hold lasts at the record than at the gate: the shop's tiered.Config.RecordGrace\n"+
			"(0: the hold time again)"))
	fs.DurationVar(&o.retention, "retention", o.retention, env("retention",
		"how long the gate remembers an operation: the shop's redisstock.Config.Retention\n"+
			"(0: redisstock's default, "+redisstock.DefaultRetention.String()+"); reconcile's restock window is half of it"))
	fs.DurationVar(&o.timeout, "timeout", o.timeout, env("timeout", "bound on the whole command, 0 for none"))
	fs.BoolVar(&o.json, "json", o.json, "print one JSON object instead of a table")
}

// fromEnv fills every connection flag that set does not name from its
// environment variable, parsed as the flag would be.
func (o *options) fromEnv(lookup func(string) (string, bool), fs *flag.FlagSet, set map[string]bool) error {
	for _, name := range slices.Sorted(maps.Keys(envNames)) {
		env := envNames[name]
		v, ok := lookup(env)
		if !ok || set[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: %w", env, v, err)
		}
	}
	o.redisPassword, _ = lookup(redisPasswordEnv)
	return nil
}

// check refuses settings no shop has, before anything is connected: a
// negative --record-grace (tiered takes it as zero, and stockguard.New
// refuses it) or --timeout (neither a bound nor 0 for none), and a
// --retention redisstock.New would refuse.
func (o *options) check() error {
	if o.recordGrace < 0 {
		return fmt.Errorf("--record-grace %v: want 0 or more (0: the hold time again)", o.recordGrace)
	}
	if o.retention < 0 || (o.retention > 0 && o.retention < redisstock.MinRetention) {
		return fmt.Errorf("--retention %v: want 0 (redisstock's default, %v) or at least %v",
			o.retention, redisstock.DefaultRetention, redisstock.MinRetention)
	}
	if o.timeout < 0 {
		return fmt.Errorf("--timeout %v: want 0 or more (0: none)", o.timeout)
	}
	return nil
}

// restockWindow is how far back a reconcile pass reads the record's
// restocks: reconcile.Config.RestockWindow's default, half the gate's
// Retention (--retention, or redisstock's default). The session's passes
// use it and the help states it.
func restockWindow(o options) time.Duration {
	keep := o.retention
	if keep == 0 {
		keep = redisstock.DefaultRetention
	}
	return keep / 2
}

// restockWindowText states the restock window for a help text:
// "12h (half of --retention 24h)".
func restockWindowText(o options) string {
	return shortDuration(restockWindow(o)) + " (half of --retention " + shortDuration(2*restockWindow(o)) + ")"
}

// shortDuration writes d without trailing zero units: 12h, 1h30m, 2s.
func shortDuration(d time.Duration) string {
	t := d.String()
	if strings.HasSuffix(t, "m0s") {
		t = strings.TrimSuffix(t, "0s")
	}
	if strings.HasSuffix(t, "h0m") {
		t = strings.TrimSuffix(t, "0m")
	}
	return t
}

// parseColumns reads --columns: comma-separated key=name pairs.
func parseColumns(s string) (sqlstock.Columns, error) {
	var c sqlstock.Columns
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	fields := map[string]*string{
		"sku": &c.SKU, "available": &c.Available, "held": &c.Held, "sold": &c.Sold,
		"version": &c.Version, "per_user_limit": &c.PerUserLimit, "hold_ttl": &c.HoldTTL,
	}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		p := fields[strings.TrimSpace(k)]
		if !ok || p == nil || strings.TrimSpace(v) == "" {
			return c, fmt.Errorf("--columns: %q is not key=name with a key of sku, available, held, sold, version, per_user_limit, hold_ttl", pair)
		}
		*p = strings.TrimSpace(v)
	}
	return c, nil
}
