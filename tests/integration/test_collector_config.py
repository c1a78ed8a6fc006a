"""collector-config/ stays consistent: collector structure, promtool, dashboard and rule names."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from traincard_otel._schema import ANOMALY_KIND_NAMES, CRITICAL_ANOMALY_KINDS

from tests.support.helpers import REPO
from tests.support.schema_names import prometheus_name, prometheus_names

CFG = REPO / "collector-config"
PROMTOOL = shutil.which("promtool")
_KNOWN = {
    "receivers": {"otlp", "hostmetrics", "prometheus", "filelog", "otlpjsonfile"},
    "processors": {
        "memory_limiter",
        "batch",
        "transform",
        "resource",
        "attributes",
        "filter",
        "resourcedetection",
        "deltatocumulative",
        "k8sattributes",
    },
    "exporters": {
        "prometheus",
        "otlp",
        "otlp_grpc",
        "otlphttp",
        "otlp_http",
        "prometheusremotewrite",
        "debug",
        "loki",
    },
}
_PROMQL_WORDS = {
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "rate",
    "irate",
    "increase",
    "changes",
    "time",
    "histogram_quantile",
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "label_values",
    "bool",
    "offset",
    "le",
    "topk",
    "bottomk",
    "abs",
    "clamp_min",
    "delta",
    "deriv",
}


def test_collector_config_structure() -> None:
    cfg = yaml.safe_load((CFG / "otelcol.yaml").read_text())
    for section in ("receivers", "processors", "exporters"):
        for name in cfg[section]:
            assert name.split("/")[0] in _KNOWN[section], f"unknown {section[:-1]} type {name!r}"
    pipelines = cfg["service"]["pipelines"]
    assert set(pipelines) == {"metrics", "traces", "logs"}
    for signal, p in pipelines.items():
        assert p["receivers"] and p["exporters"], signal
        for section in ("receivers", "processors", "exporters"):
            for ref in p.get(section, []):
                assert ref in cfg[section], f"{signal} pipeline uses undefined {ref!r}"


def _metric_names_in(expr: str) -> set[str]:
    expr = re.sub(r'"[^"]*"', '""', expr)  # label values
    expr = re.sub(r"\{[^}]*\}", "{}", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "[]", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"label_values\(([^,)]*),\s*\w+\s*\)", r"\1", expr)  # its 2nd argument is a label
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b", expr))
    return {n for n in names if n not in _PROMQL_WORDS and not re.fullmatch(r"\d+|e", n)}


def _dashboard_exprs() -> list[str]:
    dash = json.loads((CFG / "grafana" / "dashboards" / "traincard-training.json").read_text())
    exprs = [
        t["expr"]
        for p in dash["panels"]
        for t in p.get("targets", [])
        if t.get("datasource", {}).get("uid") == "prometheus"
    ]
    exprs += [v["query"] for v in dash["templating"]["list"]]
    return exprs


def _rule_exprs() -> list[str]:
    rules = yaml.safe_load((CFG / "prometheus" / "alerts.yml").read_text())
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def test_every_metric_in_dashboards_and_alerts_is_in_the_schema() -> None:
    known = prometheus_names()
    used = set().union(*(_metric_names_in(e) for e in _dashboard_exprs() + _rule_exprs()))
    assert used, "the expression parser found nothing"
    assert used - known == set(), f"names not in docs/schema.md: {sorted(used - known)}"


_KIND_MATCHER = re.compile(r'traincard_anomaly_kind\s*(=~|!~|!=|=)\s*"([^"]*)"')


def _selected(expr: str) -> set[str]:
    """The anomaly kinds an expression's ``traincard_anomaly_kind`` matchers select."""
    kinds = set(ANOMALY_KIND_NAMES)
    for op, value in _KIND_MATCHER.findall(expr):
        match = {k for k in ANOMALY_KIND_NAMES if re.fullmatch(value, k)} if "~" in op else {value}
        kinds = kinds - match if op.startswith("!") else kinds & match
    return kinds


def test_anomaly_alert_rules_select_each_kind_once_with_its_severity() -> None:
    """The anomaly rules name only the schema's kinds, alert on every kind once, and a critical
    kind's rule is critical (docs/schema.md, "Anomaly kinds")."""
    rules = yaml.safe_load((CFG / "prometheus" / "alerts.yml").read_text())
    anomaly_rules = [r for g in rules["groups"] for r in g["rules"] if "traincard_anomalies" in r["expr"]]
    assert len(anomaly_rules) >= 2
    seen: list[str] = []
    for rule in anomaly_rules:
        named = {value for op, value in _KIND_MATCHER.findall(rule["expr"]) if "~" not in op}
        assert named <= set(ANOMALY_KIND_NAMES), f"{rule['alert']} names an unknown kind: {named}"
        critical = rule["labels"]["severity"] == "critical"
        for kind in _selected(rule["expr"]):
            assert (kind in CRITICAL_ANOMALY_KINDS) == critical, (
                f"{rule['alert']}: {kind} has the wrong severity"
            )
            seen.append(kind)
    assert sorted(seen) == sorted(ANOMALY_KIND_NAMES), "each kind should be alerted on by exactly one rule"
    tests = (CFG / "prometheus" / "alerts_test.yml").read_text()
    used = set(re.findall(r'traincard_anomaly_kind(?:="|: )(\w+)', tests))
    assert used and used <= set(ANOMALY_KIND_NAMES), used - set(ANOMALY_KIND_NAMES)


def test_prometheus_translation_examples() -> None:
    assert prometheus_name("traincard.metric", "gauge", "1") == "traincard_metric_ratio"
    assert prometheus_name("hw.gpu.memory.usage", "updowncounter", "By") == "hw_gpu_memory_usage_bytes"
    assert (
        prometheus_name("traincard.throughput.tokens", "gauge", "{token}/s")
        == "traincard_throughput_tokens_per_second"
    )
    assert prometheus_name("system.disk.io", "counter", "By") == "system_disk_io_bytes_total"


def test_dashboard_datasources_exist() -> None:
    ds = yaml.safe_load((CFG / "grafana" / "provisioning" / "datasources" / "datasources.yml").read_text())
    uids = {d["uid"] for d in ds["datasources"]}
    dash = json.loads((CFG / "grafana" / "dashboards" / "traincard-training.json").read_text())
    used = {p["datasource"]["uid"] for p in dash["panels"] if "datasource" in p}
    used |= {a["datasource"]["uid"] for a in dash["annotations"]["list"]}
    assert used <= uids


@pytest.mark.skipif(PROMTOOL is None, reason="Debian's prometheus (promtool) is not installed")
def test_promtool_checks_and_rule_unit_tests(tmp_path: Path) -> None:
    prom = CFG / "prometheus"
    for args in (
        ["check", "rules", "alerts.yml"],
        ["check", "config", "prometheus.yml"],
        ["test", "rules", "alerts_test.yml"],
    ):
        proc = subprocess.run([PROMTOOL, *args], cwd=prom, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
