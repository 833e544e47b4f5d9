#!/usr/bin/env bash
# scriptcost.sh: the server's instructions per order of the flash sale's
# script (stock_deduct_hot.lua, through redisstock's BenchmarkHotScript),
# counted by callgrind on a private redis-server. Unlike a time, the count
# does not move with the machine's load, so two versions of a script can be
# compared to a fraction of a percent:
#
#	internal/tools/scriptcost.sh            # every case
#	internal/tools/scriptcost.sh 'lines=1/batch=20'
#	internal/tools/scriptcost.sh 'slot/lines=1/batch=20'   # a Cluster's take
#
# Each case runs twice, 2,000 and 8,000 orders, after the same setup and
# warm-up; the difference of the two counts of the server's EVALSHA
# (inclusive: the script, its commands, the Lua around them) over the
# 6,000 orders between is the figure. It needs valgrind and redis-server
# (Debian: apt-get install valgrind redis-server).
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in valgrind callgrind_control callgrind_annotate redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "scriptcost: $tool is not installed" >&2; exit 2; }
done
cases=("${@:-lines=1/batch=20 lines=3/batch=20 lines=1/batch=5 lines=1/batch=1 slot/lines=1/batch=20}")
read -r -a cases <<<"${cases[*]}"

work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" \
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
vg=$!
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || kill "$vg" 2>/dev/null; wait "$vg" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 300); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
redis-cli -p "$port" ping >/dev/null
# The Store sends the hot script by EVALSHA and falls back to EVAL on
# NOSCRIPT: loaded here, the first case's first count has no call outside
# EVALSHA that its second count has in it (the file is the script as sent:
# stock_lib.lua does not go before it).
for f in lua/stock_deduct_hot.lua lua/stock_deduct_one.lua; do redis-cli -p "$port" -x script load <"$f" >/dev/null; done

go test -c -o "$work/redisstock.test" ./stock/redisstock/

# count N CASE: the server's EVALSHA instructions while the case places N
# orders (its setup and warm-up included).
count() {
  callgrind_control -z "$vg" >/dev/null 2>&1
  STOCKGUARD_REDIS_ADDR=127.0.0.1:$port "$work/redisstock.test" -test.run '^$' \
    -test.bench "^BenchmarkHotScript/$2\$" -test.benchtime "$1x" >"$work/bench.log" 2>&1 ||
    { cat "$work/bench.log" >&2; exit 1; }
  rm -f "$work"/cg.*.[0-9]*
  callgrind_control -d "$vg" >/dev/null 2>&1
  local dump
  dump=$(ls -t "$work"/cg.*.[0-9]* | head -1)
  callgrind_annotate --inclusive=yes "$dump" 2>/dev/null |
    awk '/evalShaCommand/ && !found { gsub(",", "", $1); print $1; found = 1 }'
}

for c in "${cases[@]}"; do
  a=$(count 2000 "$c")
  b=$(count 8000 "$c")
  echo "$c: $(( (b - a) / 6000 )) instructions per order"
done
