"""docs/monitoring/ stays true: the Grafana dashboard and the Prometheus alert rules parse, are
well-formed, and ask only for series that memconsole exposes."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from prometheus_client import REGISTRY

from memconsole.observability.collectors import MemoryCollector
from tests.processes import REPO

DOCS = REPO / "docs" / "monitoring"
SERIES = re.compile(r"\b(memconsole_[a-z_]+)\b")
DURATION = re.compile(r"^\d+[smhd]$")
SEVERITIES = {"critical", "warning", "info"}
SUFFIXES = {"histogram": ("_bucket", "_count", "_sum"), "counter": ("_total",), "gauge": ("",)}


def exposed_series() -> set[str]:
    """Every sample name /metrics can answer, from the metric families' definitions."""
    families = [*REGISTRY.collect(), *MemoryCollector().collect()]
    return {
        family.name + suffix
        for family in families
        if family.name.startswith("memconsole_")
        for suffix in SUFFIXES[family.type]
    }


def balanced(expr: str) -> bool:
    depth = {"(": 0, "[": 0, "{": 0}
    closing = {")": "(", "]": "[", "}": "{"}
    for char in re.sub(r'"[^"]*"', "", expr):
        if char in depth:
            depth[char] += 1
        elif char in closing:
            depth[closing[char]] -= 1
            if depth[closing[char]] < 0:
                return False
    return not any(depth.values())


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def alert_rules() -> list[dict]:
    document = yaml.safe_load((DOCS / "alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_the_dashboard_is_an_importable_grafana_dashboard():
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    assert dashboard["title"] and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    assert [source["name"] for source in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) >= 10
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert panel["title"] and panel["type"] in {"timeseries", "stat"}
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["refId"] and target["datasource"]["uid"] == "${DS_PROMETHEUS}"
            assert balanced(target["expr"]), target["expr"]


def test_the_alert_rules_are_a_prometheus_rule_file():
    rules = alert_rules()
    names = [rule["alert"] for rule in rules]
    assert len(names) == len(set(names)) >= 6
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert re.fullmatch(r"Memconsole[A-Za-z]+", rule["alert"])
        assert balanced(rule["expr"]), rule["alert"]
        assert "for" not in rule or DURATION.match(rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]


@pytest.mark.django_db
def test_they_ask_only_for_series_memconsole_exposes():
    exposed = exposed_series()
    asked = {
        name for expr in dashboard_exprs() + [rule["expr"] for rule in alert_rules()] for name in SERIES.findall(expr)
    }
    assert asked, "no memconsole series found in docs/monitoring/"
    assert sorted(asked - exposed) == []
    # and every family is watched somewhere
    families = {family.name for family in [*REGISTRY.collect(), *MemoryCollector().collect()]}
    watched = {family for family in families if any(name.startswith(family) for name in asked)}
    assert sorted(family for family in families - watched if family.startswith("memconsole_")) == []
