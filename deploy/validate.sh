#!/usr/bin/env bash
# Static checks of deploy/ (CI runs them): the compose file, the Prometheus
# configuration and alert rules, the Grafana provisioning and dashboards.
# The dashboards' and alerts' metric names are also checked against a live
# daemon by tests/integration/prometheus_scrape_test.sh.
set -euo pipefail
cd "$(dirname "$0")"
for tool in docker-compose promtool python3; do
  command -v "$tool" >/dev/null || { echo "validate: $tool is missing (scripts/install-deps)" >&2; exit 1; }
done
docker-compose -f docker-compose.yml config -q
docker-compose -f docker-compose.cluster.yml config -q
echo "validate: docker-compose.yml and docker-compose.cluster.yml OK"
promtool check rules prometheus/alerts.yml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s#/etc/prometheus/alerts.yml#$PWD/prometheus/alerts.yml#" prometheus/prometheus.yml >"$tmp/prometheus.yml"
promtool check config "$tmp/prometheus.yml"
for f in grafana/provisioning/*/*.yml config/*.yaml; do
  /usr/bin/python3 -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' "$f" ||
    { echo "validate: $f is not YAML" >&2; exit 1; }
done
echo "validate: provisioning and daemon configs are YAML"
python3 grafana/make_dashboard.py >/dev/null
git -C .. diff --quiet -- deploy/grafana/dashboards 2>/dev/null ||
  { echo "validate: dashboards/kvtier.json is stale; run deploy/grafana/make_dashboard.py" >&2; exit 1; }
python3 check_dashboards.py .
