#!/usr/bin/env python3
"""Checks the Grafana dashboards and Prometheus alert rules of deploy/.

usage: check_dashboards.py DEPLOY_DIR [METRICS_TEXT]

Always: every dashboard is valid JSON with a unique uid, and every panel has
a title, the provisioned Prometheus datasource and at least one target with
a PromQL expression. With METRICS_TEXT (what a live kvtierd serves on
/metrics): every kvtier_* metric the dashboards and the alert rules use is
one the daemon exports (peer metrics exist only once a peer is known, so
they are checked against their Admin view's fields instead).
"""
import json
import os
import re
import sys

deploy = sys.argv[1]
errors = []
used = set()
uids = set()
dash_dir = os.path.join(deploy, "grafana", "dashboards")
for name in sorted(os.listdir(dash_dir)):
    if not name.endswith(".json"):
        continue
    path = os.path.join(dash_dir, name)
    try:
        with open(path) as f:
            d = json.load(f)
    except ValueError as e:
        errors.append(f"{path}: not JSON: {e}")
        continue
    if not d.get("uid") or d["uid"] in uids:
        errors.append(f"{path}: missing or duplicate uid")
    uids.add(d.get("uid"))
    if not d.get("panels"):
        errors.append(f"{path}: no panels")
    for p in d.get("panels", []):
        where = f"{path}: panel {p.get('id')} '{p.get('title')}'"
        if not p.get("title"):
            errors.append(f"{where}: no title")
        if p.get("datasource", {}).get("uid") != "kvtier-prometheus":
            errors.append(f"{where}: datasource is not the provisioned kvtier-prometheus")
        if not p.get("targets"):
            errors.append(f"{where}: no targets")
        for t in p.get("targets", []):
            expr = t.get("expr", "")
            if not expr:
                errors.append(f"{where}: target {t.get('refId')} has no expr")
            used.update(re.findall(r"\bkvtier_[a-z0-9_]+", expr))

with open(os.path.join(deploy, "prometheus", "alerts.yml")) as f:
    used.update(re.findall(r"\bkvtier_[a-z0-9_]+", f.read()))

if len(sys.argv) > 2:
    exported = set()
    with open(sys.argv[2]) as f:
        for line in f:
            m = re.match(r"# TYPE (\S+) (\S+)", line)
            if m:
                exported.add(m.group(1))
                if m.group(2) == "histogram":
                    exported.update(m.group(1) + s for s in ("_bucket", "_count", "_sum"))
    peer_fields = {"address", "daemon_id", "role", "lanes", "connected", "bytes_sent",
                   "bytes_received", "blocks_sent", "blocks_received", "transfers",
                   "failed_transfers", "observed_bytes_per_second", "last_error", "connects"}
    for metric in sorted(used):
        if metric in exported:
            continue
        if metric.startswith("kvtier_peer_"):
            field = re.sub(r"_total$", "", metric[len("kvtier_peer_"):])
            if field in peer_fields:
                continue
        errors.append(f"{metric} is used by a dashboard or alert but kvtierd does not export it")

for e in errors:
    print("check_dashboards:", e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"check_dashboards: {len(uids)} dashboard(s), {len(used)} metric names"
      + (", all exported" if len(sys.argv) > 2 else ""))
