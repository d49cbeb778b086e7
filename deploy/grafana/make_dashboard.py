#!/usr/bin/env python3
"""Writes deploy/grafana/dashboards/kvtier.json, the kvtier dashboard.

The JSON is generated so that every panel has the same shape; edit the PANELS
table here and run `python3 deploy/grafana/make_dashboard.py`. What each panel
shows: docs/operations.md#the-dashboard.
"""
import json
import os

DS = {"type": "prometheus", "uid": "kvtier-prometheus"}

# (title, unit, [(expr, legend)], kind, description)
PANELS = [
    ("Tier occupancy", "percentunit",
     [("kvtier_tier_used_bytes / kvtier_tier_capacity_bytes", "{{instance}} {{tier}}")],
     "timeseries", "Bytes allocated to blocks over the tier's capacity, per tier."),
    ("Hit ratio per tier", "percentunit",
     [("sum by (instance) (rate(kvtier_lookup_hits_total[5m])) / "
       "sum by (instance) (rate(kvtier_lookup_keys_total[5m]))", "{{instance}} lookup hits"),
      ("sum by (instance) (rate(kvtier_gpu_tier_hits_total[5m])) / "
       "sum by (instance) (rate(kvtier_blocks_get_total[5m]) + rate(kvtier_host_hits_total[5m]) + "
       "rate(kvtier_nvme_hits_total[5m]) + 1e-9)", "{{instance}} gpu"),
      ("sum by (instance) (rate(kvtier_host_hits_total[5m])) / "
       "sum by (instance) (rate(kvtier_host_hits_total[5m]) + rate(kvtier_nvme_hits_total[5m]) + 1e-9)",
       "{{instance}} host"),
      ("sum by (instance) (rate(kvtier_nvme_hits_total[5m])) / "
       "sum by (instance) (rate(kvtier_host_hits_total[5m]) + rate(kvtier_nvme_hits_total[5m]) + 1e-9)",
       "{{instance}} nvme")],
     "timeseries", "Share of looked-up keys found cached, and which tier served the reads."),
    ("Fetch vs recompute decisions", "ops",
     [("sum by (instance) (rate(kvtier_planner_plans_fetch_total[5m]))", "{{instance}} fetch all"),
      ("sum by (instance) (rate(kvtier_planner_plans_partial_total[5m]))", "{{instance}} fetch prefix"),
      ("sum by (instance) (rate(kvtier_planner_plans_recompute_total[5m]))", "{{instance}} recompute")],
     "timeseries", "The planner's decision for each Lookup with a match (docs/planner.md)."),
    ("Tokens fetched vs recomputed", "short",
     [("sum by (instance) (rate(kvtier_planner_planned_fetch_tokens_total[5m]))", "{{instance}} fetched"),
      ("sum by (instance) (rate(kvtier_planner_planned_recompute_tokens_total[5m]))",
       "{{instance}} recomputed"),
      ("sum by (instance) (rate(kvtier_planner_estimated_seconds_saved_total[5m]))",
       "{{instance}} prefill s/s saved")],
     "timeseries", "Prompt tokens per second the plans fetch or recompute, and the prefill time saved."),
    ("Bytes moved per direction", "Bps",
     [("sum by (instance) (rate(kvtier_bytes_put_total[5m]))", "{{instance}} engine -> kvtier"),
      ("sum by (instance) (rate(kvtier_bytes_get_total[5m]))", "{{instance}} kvtier -> engine"),
      ("sum by (instance) (rate(kvtier_bytes_host_to_nvme_total[5m]))", "{{instance}} host -> nvme"),
      ("sum by (instance) (rate(kvtier_bytes_nvme_to_host_total[5m]))", "{{instance}} nvme -> host"),
      ("sum by (instance) (rate(kvtier_peer_bytes_sent_total[5m]))", "{{instance}} -> peers"),
      ("sum by (instance) (rate(kvtier_peer_bytes_received_total[5m]))", "{{instance}} <- peers")],
     "timeseries", "Throughput of each data path."),
    ("SSD write rate vs budget", "Bps",
     [("kvtier_wear_write_rate_bytes_per_s", "{{instance}} {{dir}} writing"),
      ("kvtier_wear_budget_bytes_per_day / 86400", "{{instance}} {{dir}} budget")],
     "timeseries", "Recent NVMe write rate against capacity x DWPD x safety (nvme.* keys)."),
    ("Days to wear-out", "d",
     [("kvtier_wear_days_to_wear_out", "{{instance}} {{dir}}")],
     "stat", "Days until the drive's rated endurance at the recent write rate (-1: no recent writes)."),
    ("RPC latency percentiles", "s",
     [("histogram_quantile(0.5, sum by (le, method) (rate(kvtier_rpc_duration_seconds_bucket[5m])))",
       "p50 {{method}}"),
      ("histogram_quantile(0.99, sum by (le, method) (rate(kvtier_rpc_duration_seconds_bucket[5m])))",
       "p99 {{method}}")],
     "timeseries", "Server-side latency of each RPC, from its start to its status."),
    ("RPCs by status code", "reqps",
     [("sum by (code) (rate(kvtier_rpc_requests_total[5m]))", "{{code}}")],
     "timeseries", "Calls finished per second by gRPC status code."),
    ("Bytes per tenant", "bytes",
     [("kvtier_tenant_bytes", "{{instance}} {{tenant}}")],
     "timeseries", "Cached bytes per tenant, all tiers."),
    ("Evictions", "ops",
     [("sum by (instance) (rate(kvtier_evictions_total[5m]))", "{{instance}} host"),
      ("sum by (instance) (rate(kvtier_nvme_evictions_total[5m]))", "{{instance}} nvme")],
     "timeseries", "Blocks dropped to make room."),
    ("Integrity", "short",
     [("kvtier_stranded_blocks", "{{instance}} stranded blocks"),
      ("increase(kvtier_checksum_mismatches_total[1h])", "{{instance}} checksum mismatches / h"),
      ("kvtier_nvme_degraded", "{{instance}} nvme degraded")],
     "stat", "All zero on a healthy daemon (docs/operations.md#alerts)."),
    ("Cluster membership", "short",
     [("kvtier_cluster_members", "{{instance}} members"),
      ("kvtier_cluster_etcd_up", "{{instance}} etcd up"),
      ("kvtier_cluster_local_only", "{{instance}} local-only")],
     "stat", "Members each daemon sees in etcd; etcd up 1 and local-only 0 on a healthy cluster "
     "(docs/operations.md#cluster)."),
    ("Shared tier", "Bps",
     [("rate(kvtier_cluster_tier_pulled_bytes_total[5m])", "{{instance}} pulled from owners"),
      ("rate(kvtier_cluster_tier_pull_failures_total[5m])", "{{instance}} pull failures/s"),
      ("rate(kvtier_cluster_tier_offered_blocks_total[5m])", "{{instance}} blocks offered/s")],
     "timeseries", "Bytes Lookups and Gets pulled from chains' owners, and chains offered to them."),
    ("KV events", "ops",
     [("rate(kvtier_events_reported_total[5m])", "{{instance}} residency changes/s"),
      ("rate(kvtier_events_zmq_events_total[5m])", "{{instance}} published (zmq)/s"),
      ("increase(kvtier_events_subscribers_lost_total[1h])", "{{instance}} watchers dropped / h"),
      ("increase(kvtier_events_zmq_resyncs_total[1h])", "{{instance}} publisher resyncs / h")],
     "timeseries", "Blocks entering and leaving the tiers, as routers see them "
     "(docs/operations.md#kv-events)."),
]


def panel(i, title, unit, targets, kind, description):
    p = {
        "id": i + 1,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + j), "datasource": DS, "expr": expr, "legendFormat": legend}
            for j, (expr, legend) in enumerate(targets)
        ],
    }
    if kind == "timeseries":
        p["options"] = {"legend": {"displayMode": "list", "placement": "bottom"}}
    return p


dashboard = {
    "uid": "kvtier",
    "title": "kvtier",
    "tags": ["kvtier"],
    "timezone": "utc",
    "schemaVersion": 39,
    "version": 1,
    "refresh": "10s",
    "time": {"from": "now-1h", "to": "now"},
    "panels": [panel(i, *p) for i, p in enumerate(PANELS)],
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboards", "kvtier.json")
with open(out, "w") as f:
    json.dump(dashboard, f, indent=2)
    f.write("\n")
print("wrote", out)
