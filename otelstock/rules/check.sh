#!/usr/bin/env bash
# Checks otelstock's Prometheus rules and Grafana dashboard: promtool check
# rules, promtool test rules (the input series are real scrapes, see
# stockguard_test.yml.tmpl), and that the dashboard is JSON. Installs
# Debian's prometheus package for promtool when it is missing (as root),
# and stops only a prometheus service that the install started.
# Run from anywhere: bash otelstock/rules/check.sh
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v promtool >/dev/null 2>&1; then
  was_running=$(pgrep -x prometheus >/dev/null 2>&1 && echo yes || echo no)
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
  if [ "$was_running" = no ] && pgrep -x prometheus >/dev/null 2>&1; then
    service prometheus stop >/dev/null 2>&1 || true
  fi
fi

promtool check rules stockguard.rules.yml
promtool test rules stockguard_test.yml
python3 -m json.tool ../dashboards/stockguard.json >/dev/null
echo "otelstock rules and dashboard: ok"
