// Package chaos is stockguard's fault matrix on real processes: it starts
// the servers it will hurt (its own redis-server processes on free ports,
// a replica, a Sentinel, TCP proxies in front of Redis and the database;
// never a server it did not start), plays a sale through the public API
// (the tiered flow: redisstock gate, sqlstock record on MariaDB or
// PostgreSQL, reclaimers and a reconciler running, several SKUs,
// multi-SKU orders, per-user limits, buyers who pay, cancel or never pay,
// one-second holds) while one fault hits it, and measures the outcome from
// the database ledger and from Redis.
//
// Each scenario is a Cell (Cells lists them): no fault, Redis killed and
// restarted empty, failover to a lagging replica, a Sentinel failover,
// FLUSHALL, CLIENT PAUSE with and without caller retries, Redis down with
// degrade in front, faults at each gate/record hand-off with tiny
// deadlines, the application killed with -9, SQL replies dropped after the
// request went through, and a lock storm on the hot rows.
//
// # Measures
//
// After the sale every deadline passes, the reclaimers drain and the
// figures of Measures are computed: oversold units, units over a per-user
// limit, leaked units (held past every deadline), double takes (units the
// stock rows count that no order explains), lost acks (answered nil, not in
// the record), misclassified answers (an order applied, or left held,
// though the answer was a plain error, ErrContention, ErrUnavailable or a
// business refusal), late answers (a call slower than its bound), and
// drift between the tiers before and after a final reconcile. Any of these
// but drift-before being non-zero fails the cell. Answers of
// ErrUnknownOutcome for calls that provably did not apply are allowed and
// counted, as are refusals by the record of orders the gate admitted.
//
// # Running it
//
//	STOCKGUARD_MYSQL_DSN='root@tcp(127.0.0.1:3306)/test' \
//	STOCKGUARD_POSTGRES_DSN='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	go test ./internal/chaos/
//
// runs a short version of every cell (3 s of sale each) on each database
// named (about 80 s per database); STOCKGUARD_CHAOS_LONG=1 runs 30 s per
// cell (give go test -timeout 30m), STOCKGUARD_CHAOS_CELLS=flushall,sql-cut
// only those cells, and STOCKGUARD_CHAOS_TABLE=path writes the table there.
// With neither variable set, the control, redis-kill and flushall cells run
// on SQLite (the cells that hurt the database's connections need a server).
// go run ./internal/chaos/cmd/chaos prints the matrix as a Markdown table.
// It needs redis-server on the PATH (Sentinel runs as redis-server
// --sentinel).
package chaos
