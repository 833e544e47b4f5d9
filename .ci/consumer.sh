#!/usr/bin/env bash
# The modules as a consumer gets them. Publishes every module of the commit
# under test into a file-based module proxy at the version .ci/versions
# gives (internal/modproxy: list, .info, .mod and .zip, as a tag would be
# served), then, outside the repository and without go.work:
#   - a new module go-gets the core, otelstock and the broker hand-offs
#     (handoff/natsjs, handoff/rabbitmq), builds the README's first
#     code block as it stands (only the Redis address and the database name
#     changed, to a private redis-server and a scratch MariaDB database) and
#     runs it: the order it takes must be confirmed, 99 of 100 left;
#   - go install fetches cmd/stockctl and reads that shop's SKU back;
#   - every program under examples/ builds from the proxy.
# Third-party modules come from the local module cache (its download
# directory is itself a proxy), and what it lacks from the go command's own
# proxy: go mod tidy wants the modules of every platform's build, which a
# test run on one platform never fetched (a fresh machine's cache holds
# only their go.mod files). Needs MariaDB on 127.0.0.1:3306 (root, no
# password; the README block's server), redis-server and flock, as .ci/run
# provides.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
redis_pid=
db=stockguard_consumer_$$
cleanup() {
  if [ -n "${modcache:-}" ]; then purge_ours || true; fi
  if [ -n "$redis_pid" ]; then
    # Stopped before its directory goes: it writes its log as it exits.
    kill "$redis_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$redis_pid" 2>/dev/null || break; sleep 0.1; done
  fi
  mariadb -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work" || true
}
trap cleanup EXIT

version() { awk -v d="$1" '$1 == d { print $2 }' .ci/versions; }
core=$(version .)
otel=$(version otelstock)
natsjs=$(version handoff/natsjs)
rabbitmq=$(version handoff/rabbitmq)
stockctl=$(version cmd/stockctl)

go build -o "$work/modproxy" ./internal/modproxy
"$work/modproxy" -out "$work/proxy" -rev HEAD
echo "ci: proxy holds the modules of $(git rev-parse --short HEAD): core $core, otelstock $otel, natsjs $natsjs, rabbitmq $rabbitmq, stockctl $stockctl"

. .ci/ourmods.sh
take_modcache
upstream=$(go env GOPROXY)
export GOWORK=off GOFLAGS=-mod=mod GOSUMDB=off GOTOOLCHAIN=local GODEBUG=goindex=0
export GOPROXY="file://$work/proxy,file://$modcache/cache/download,$upstream"

# A private Redis on a free port, and a scratch database.
port=16379
while (: </dev/tcp/127.0.0.1/$port) 2>/dev/null; do port=$((port + 1)); done
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log"
for _ in $(seq 50); do [ -s "$work/redis.pid" ] && break; sleep 0.1; done
redis_pid=$(cat "$work/redis.pid")
mariadb -h127.0.0.1 -uroot -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"

# The consumer: the README's first go block inside a main function.
mkdir "$work/consumer"
block=$(awk '/^```go$/ { n++; if (n == 1) { on = 1; next } } on && /^```$/ { exit } on' README.md)
block=${block//127.0.0.1:6379/127.0.0.1:$port}
block=${block//127.0.0.1:3306)\/test?/127.0.0.1:3306)\/$db?}
case $block in
*"127.0.0.1:$port"*"/$db?"*) ;;
*) echo "ci: the README's first go block no longer names 127.0.0.1:6379 and the database test" >&2; exit 1 ;;
esac
cat >"$work/consumer/main.go" <<GO
// Command consumer runs the README's first code block against a Redis
// server and MariaDB.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql" // registers "mysql"
	"github.com/redis/go-redis/v9"

	"github.com/stockguard/stockguard"
	"github.com/stockguard/stockguard/stock"
	"github.com/stockguard/stockguard/stock/redisstock"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := readme(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func readme(ctx context.Context) error {
$block
	if err != nil {
		return err
	}
	defer shop.Close()
	lv, err := shop.Levels(ctx, "phone")
	if err != nil {
		return err
	}
	if lv.Available != 99 || lv.Sold != 1 {
		return fmt.Errorf("after one confirmed order of 100: available %d, sold %d", lv.Available, lv.Sold)
	}
	fmt.Println("available:", lv.Available, "sold:", lv.Sold)
	return nil
}
GO
cat >"$work/consumer/otel.go" <<'GO'
package main

// The OpenTelemetry adapter and the broker hand-offs build in a consumer's
// module as well.
import (
	_ "github.com/stockguard/stockguard/handoff/natsjs"
	_ "github.com/stockguard/stockguard/handoff/rabbitmq"
	_ "github.com/stockguard/stockguard/otelstock"
)
GO
(
  cd "$work/consumer"
  go mod init example.com/consumer
  go get "github.com/stockguard/stockguard@$core" "github.com/stockguard/stockguard/otelstock@$otel" \
    "github.com/stockguard/stockguard/handoff/natsjs@$natsjs" "github.com/stockguard/stockguard/handoff/rabbitmq@$rabbitmq"
  go mod tidy
  grep -E "stockguard/stockguard(/otelstock|/handoff/natsjs|/handoff/rabbitmq)? " go.mod
  go vet .
  go build -o consumer .
  ./consumer
)

# stockctl, installed as an operator would, reads the consumer's shop.
GOFLAGS= GOBIN="$work/bin" go install "github.com/stockguard/stockguard/cmd/stockctl@$stockctl"
"$work/bin/stockctl" inspect phone --redis "127.0.0.1:$port" --db mysql \
  --dsn "root@tcp(127.0.0.1:3306)/$db?interpolateParams=true"

# Every program under examples/ builds from the proxy alone.
while read -r dir v; do
  case $dir in examples/*) GOFLAGS= GOBIN="$work/bin" go install "github.com/stockguard/stockguard/$dir@$v" ;; esac
done < <(grep -v '^#' .ci/versions)
echo "ci: consumer check passed"
