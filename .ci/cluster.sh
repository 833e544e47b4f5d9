#!/usr/bin/env bash
# Starts a 3-master Redis Cluster on 127.0.0.1:7001-7003 unless one answers.
set -euo pipefail
ports=(7001 7002 7003)
if redis-cli -p 7001 cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
  exit 0
fi
dir=${STOCKGUARD_CLUSTER_DIR:-/tmp/stockguard-cluster}
for p in "${ports[@]}"; do
  redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
done
rm -rf "$dir"
for p in "${ports[@]}"; do
  mkdir -p "$dir/$p"
  redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
    --cluster-config-file "$dir/$p/nodes.conf" --dir "$dir/$p" \
    --save "" --appendonly no --daemonize yes --logfile "$dir/$p/redis.log"
done
for p in "${ports[@]}"; do
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
redis-cli --cluster create 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003 \
  --cluster-replicas 0 --cluster-yes >/dev/null
for _ in $(seq 100); do
  redis-cli -p 7001 cluster info | grep -q 'cluster_state:ok' && exit 0
  sleep 0.1
done
echo "redis cluster did not become ready" >&2
exit 1
