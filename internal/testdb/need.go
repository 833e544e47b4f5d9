package testdb

import (
	"os"
	"strings"
	"testing"
)

// Server is a real server the tests run on when an environment variable
// names it. The suites that need one are always registered: without the
// variable they skip with a message naming it (see Need), so `go test -v`
// shows what was left out and how to run it.
type Server struct {
	// Env is the variable that names the server, e.g. STOCKGUARD_REDIS_ADDR.
	Env string
	// What is the server in a skip message, e.g. "real Redis".
	What string
	// Form is the shape of the variable's value in a skip message, e.g.
	// "host:port".
	Form string
}

// The variables that point the tests at real servers.
const (
	RedisEnv    = "STOCKGUARD_REDIS_ADDR"
	ClusterEnv  = "STOCKGUARD_REDIS_CLUSTER"
	MySQLEnv    = "STOCKGUARD_MYSQL_DSN"
	PostgresEnv = "STOCKGUARD_POSTGRES_DSN"
)

// The real servers the tests know.
var (
	// Redis is a standalone Redis: STOCKGUARD_REDIS_ADDR=host:port.
	Redis = Server{Env: RedisEnv, What: "real Redis", Form: "host:port"}
	// Cluster is a Redis Cluster: STOCKGUARD_REDIS_CLUSTER lists seed
	// nodes, comma-separated.
	Cluster = Server{Env: ClusterEnv, What: "Redis Cluster", Form: "host:port,host:port,..."}
	// MySQL is a MariaDB (or MySQL) database: STOCKGUARD_MYSQL_DSN is a
	// go-sql-driver/mysql DSN.
	MySQL = Server{Env: MySQLEnv, What: "MariaDB", Form: "'user@tcp(host:port)/db'"}
	// Postgres is a PostgreSQL database: STOCKGUARD_POSTGRES_DSN is a pgx
	// URL.
	Postgres = Server{Env: PostgresEnv, What: "PostgreSQL", Form: "'postgres://user@host:port/db'"}
)

// Value returns the variable's value: empty when the server is not given.
func (s Server) Value() string { return os.Getenv(s.Env) }

// Need skips t unless every one of servers is given, with a message that
// names each missing one and its variable, such as
//
//	real Redis: set STOCKGUARD_REDIS_ADDR=host:port to run
//
// It returns the first server's value (empty when servers is empty: a
// test that needs no server is never skipped). Call it from the test's own
// goroutine, in the subtest of the backend, before the backend's subtests:
// one skip per backend, not one per case. Main counts the skip.
func Need(t testing.TB, servers ...Server) string {
	t.Helper()
	if msg := missing(servers, " and "); msg != "" {
		var envs []string
		for _, s := range servers {
			if s.Value() == "" {
				envs = append(envs, s.Env)
			}
		}
		CountSkip(envs...)
		t.Skip(msg)
	}
	if len(servers) == 0 {
		return ""
	}
	return servers[0].Value()
}

// NeedAny skips t unless at least one of servers is given, naming them
// all, and returns the first one given.
func NeedAny(t testing.TB, servers ...Server) Server {
	t.Helper()
	for _, s := range servers {
		if s.Value() != "" {
			return s
		}
	}
	envs := make([]string, len(servers))
	for i, s := range servers {
		envs[i] = s.Env
	}
	CountSkip(envs...)
	t.Skip(missing(servers, " or "))
	return Server{}
}

// missing returns the skip message for the servers that are not given,
// joined by sep, or "" when all are.
func missing(servers []Server, sep string) string {
	var what, set []string
	for _, s := range servers {
		if s.Value() == "" {
			what = append(what, s.What)
			set = append(set, s.Env+"="+s.Form)
		}
	}
	if len(what) == 0 {
		return ""
	}
	return strings.Join(what, sep) + ": set " + strings.Join(set, sep) + " to run"
}
