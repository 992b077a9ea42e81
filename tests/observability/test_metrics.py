"""/metrics: who may read it, and that the series it lists are recorded where the work happens."""

from __future__ import annotations

import pytest
from django.test import Client
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from memconsole.lib import metrics, vectors
from memconsole.memory import episodes, indexer, injection, retrieval, tokens
from memconsole.memory.models import AuditEntry, AuditHead, Episode
from memconsole.observability import collectors

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-0123456789abcdef"


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(client: Client, **headers: str) -> dict[str, dict[tuple, float]]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    assert response["Cache-Control"].startswith("max-age=0")
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


@pytest.fixture
def token_settings(settings):
    settings.MEMCONSOLE_METRICS_TOKEN = TOKEN
    settings.MEMCONSOLE_METRICS_ALLOW = []
    return settings


def test_it_does_not_exist_when_neither_a_token_nor_an_allow_list_is_set(client, settings):
    settings.MEMCONSOLE_METRICS_TOKEN, settings.MEMCONSOLE_METRICS_ALLOW = "", []
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
    assert client.post("/metrics").status_code == 404  # not even a 405 gives it away


def test_it_answers_the_right_bearer_token_only(client, token_settings):
    assert scrape(client, Authorization=f"Bearer {TOKEN}")
    assert scrape(client, Authorization=f"bearer {TOKEN}")
    for header in ({}, {"Authorization": "Bearer wrong-token-0123456789abcdef"}, {"Authorization": f"Basic {TOKEN}"}):
        response = client.get("/metrics", headers=header)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"memconsole_" not in response.content


def test_it_refuses_other_methods(client, token_settings):
    assert client.post("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 405


def test_it_answers_an_allowed_network_without_a_token(client, settings):
    settings.MEMCONSOLE_METRICS_TOKEN, settings.MEMCONSOLE_METRICS_ALLOW = "", ["10.0.0.0/8", "192.0.2.7"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.8").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403


def test_it_takes_the_client_address_behind_a_proxy_as_the_login_limit_does(client, settings):
    settings.MEMCONSOLE_METRICS_TOKEN, settings.MEMCONSOLE_METRICS_ALLOW = "", ["10.0.0.0/8"]
    settings.MEMCONSOLE_BEHIND_PROXY, settings.MEMCONSOLE_PROXY_COUNT = True, 1
    proxy = {"REMOTE_ADDR": "172.16.0.1"}
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="10.9.9.9", **proxy).status_code == 200
    # The client may write anything left of what the proxy appended: that part is never trusted.
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="10.9.9.9, 203.0.113.5", **proxy).status_code == 403
    settings.MEMCONSOLE_BEHIND_PROXY = False  # then the proxy's own address is the client's
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="10.9.9.9", **proxy).status_code == 403


def test_it_counts_requests_by_route_name_method_and_status(client, token_settings):
    labels = {"route": "healthz", "method": "GET", "status": "200"}
    before = value("memconsole_http_request_duration_seconds_count", **labels)
    for _ in range(3):
        client.get("/healthz")
    assert value("memconsole_http_request_duration_seconds_count", **labels) == before + 3
    client.get("/scopes/12345/")  # a console URL with an id: the route is its name, not the path
    series = scrape(client, Authorization=f"Bearer {TOKEN}")
    routes = {dict(key)["route"] for key in series["memconsole_http_request_duration_seconds_count"]}
    assert "healthz" in routes
    assert not any("12345" in route for route in routes)
    client.get("/no/such/page")
    assert value("memconsole_http_request_duration_seconds_count", route="unmatched", method="GET", status="404") >= 1


def test_it_counts_rate_limit_refusals(settings, system):
    settings.MEMCONSOLE_API_RATE_PER_MINUTE = 1
    token_a = tokens.create_token("bot a", ["bot-a"], system)
    before = value("memconsole_rate_limit_refusals_total", route="api:recall")
    api = Client(headers={"Authorization": f"Bearer {token_a[1]}"})
    body = {"bot_uuid": "bot-a", "session_name": "group_100", "query": "tea"}
    statuses = [api.post("/api/v1/recall", body, content_type="application/json").status_code for _ in range(3)]
    assert statuses.count(429) == 2
    assert value("memconsole_rate_limit_refusals_total", route="api:recall") == before + 2


def test_it_times_remember_recall_inject_and_embedding(keys, system):
    before = {
        op: value("memconsole_operation_duration_seconds_count", operation=op)
        for op in ("remember", "recall", "inject")
    }
    embedded = value("memconsole_embedded_texts_total")
    episodes.remember(keys, system, "The user likes green tea")
    retrieval.recall(keys, "tea")
    injection.record_injection(keys, system, "what does the user drink?")
    assert value("memconsole_operation_duration_seconds_count", operation="remember") == before["remember"] + 1
    # inject recalls too, and both are counted
    assert value("memconsole_operation_duration_seconds_count", operation="recall") == before["recall"] + 2
    assert value("memconsole_operation_duration_seconds_count", operation="inject") == before["inject"] + 1
    assert value("memconsole_operation_duration_seconds_sum", operation="remember") > 0
    assert value("memconsole_embedded_texts_total") >= embedded + 3
    assert value("memconsole_embedding_duration_seconds_count") >= 3
    assert value("memconsole_vector_index_duration_seconds_count", operation="write") >= 1
    assert value("memconsole_vector_index_duration_seconds_count", operation="query") >= 1


def test_it_counts_vector_index_errors(monkeypatch):
    before = value("memconsole_vector_index_errors_total", operation="heartbeat")

    class Unreachable:
        def heartbeat(self):
            raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(vectors, "get_client", Unreachable)
    with pytest.raises(vectors.VectorIndexError):
        vectors.heartbeat()
    assert value("memconsole_vector_index_errors_total", operation="heartbeat") == before + 1


def test_it_reads_episodes_not_indexed_and_the_audit_chain_length_from_the_database(
    client, token_settings, keys, other_keys, system
):
    for content in ("one", "two", "three"):
        episodes.remember(keys, system, content)
    episodes.remember(other_keys, system, "four")  # another space: its own chain, counted too
    Episode.objects.filter(content_stored="two").update(vector_current=False)
    series = scrape(client, Authorization=f"Bearer {TOKEN}")
    assert series["memconsole_database_up"][()] == 1
    assert series["memconsole_episodes_not_indexed"][()] == Episode.objects.filter(vector_current=False).count() == 1
    assert series["memconsole_audit_chain_length"][()] == AuditEntry.objects.count() >= 4
    assert AuditHead.objects.filter(seq__gt=0).count() >= 2
    assert series["memconsole_episodes"][(("status", "active"),)] == 4


def test_it_counts_no_more_not_indexed_episodes_than_its_cap(client, token_settings, keys, system, monkeypatch):
    monkeypatch.setattr(collectors, "NOT_INDEXED_CAP", 2)
    for content in ("one", "two", "three"):
        episodes.remember(keys, system, content)
    Episode.objects.update(vector_current=False)
    assert scrape(client, Authorization=f"Bearer {TOKEN}")["memconsole_episodes_not_indexed"][()] == 2


def test_it_uses_the_multiprocess_files_when_gunicorn_set_them_up(tmp_path, monkeypatch):
    # Only the exposition is switched here (this process's values stay in memory); the real
    # two-worker case is test_workers.py.
    monkeypatch.setenv(metrics.MULTIPROCESS_DIR_VARIABLE, str(tmp_path))
    assert metrics.multiprocess_dir() == str(tmp_path)
    assert b"memconsole_http_request_duration_seconds" not in metrics.exposition()


def test_episodes_waiting_for_the_indexer_are_not_counted_as_not_indexed(
    client, token_settings, keys, system, settings
):
    """Found by an operator: under steady writes the write-behind backlog counted as "not indexed",
    and the shipped alert (> 0 for 30 minutes: run reindex) fired on any bot that writes steadily."""
    settings.MEMCONSOLE_INDEXER = "worker"  # nothing drains in this process: the vectors stay pending
    try:
        for content in ("one", "two"):
            episodes.remember(keys, system, content)
        assert Episode.objects.filter(vector_current=False).count() == 2
        assert scrape(client, Authorization=f"Bearer {TOKEN}")["memconsole_episodes_not_indexed"][()] == 0
    finally:
        indexer.stop(flush=False)
