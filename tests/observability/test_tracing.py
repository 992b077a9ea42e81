"""OpenTelemetry tracing, recorded with the SDK's in-memory exporter: requests, database queries,
the vector index, embedding and memory operations, as one trace per request."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from memconsole.lib import tracing, vectors
from memconsole.memory import tokens
from tests import processes

SCRIPTS = Path(__file__).resolve().parent / "scripts"

pytestmark = pytest.mark.django_db

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


@pytest.fixture
def exporter():
    exporter = InMemorySpanExporter()
    tracing.start(exporter, SimpleSpanProcessor)
    yield exporter
    tracing.stop()


@pytest.fixture
def api(system):
    secret = tokens.create_token("bot a", ["bot-a"], system)[1]
    return Client(headers={"Authorization": f"Bearer {secret}"})


def remember(api: Client, **headers: str):
    body = {"bot_uuid": "bot-a", "session_name": "group_100", "content": "The user likes green tea"}
    return api.post("/api/v1/remember", body, content_type="application/json", headers=headers)


def test_it_traces_a_request_with_its_queries_vector_index_and_embedding_spans(api, exporter):
    assert remember(api).status_code == 201
    spans = exporter.get_finished_spans()
    (server,) = [span for span in spans if span.kind == SpanKind.SERVER]
    assert server.name == "POST api:remember"
    assert server.attributes["http.route"] == "api:remember"
    assert server.attributes["http.response.status_code"] == 201
    assert len(server.attributes["memconsole.request_id"]) == 32
    assert {span.context.trace_id for span in spans} == {server.context.trace_id}
    names = {span.name for span in spans}
    assert {"memconsole.remember", "embedding", "chroma.write", "INSERT", "SELECT"} <= names
    (query,) = [
        span
        for span in spans
        if span.name == "INSERT" and 'INTO "memory_episode" (' in span.attributes["db.query.text"]
    ]
    # The database the suite runs on: "sqlite" or "postgresql" (OpenTelemetry's names are Django's vendors).
    assert query.kind == SpanKind.CLIENT and query.attributes["db.system.name"] == connection.vendor
    assert connection.vendor in {"sqlite", "postgresql"}
    assert "green tea" not in str(query.attributes)  # placeholders only, never the values
    by_id = {span.context.span_id: span for span in spans}
    operation = next(span for span in spans if span.name == "memconsole.remember")
    assert operation.parent.span_id == server.context.span_id
    embedding = next(span for span in spans if span.name == "embedding")
    assert by_id[embedding.parent.span_id].name == "memconsole.remember"


def test_it_continues_the_callers_trace(api, exporter):
    remember(api, traceparent=f"00-{TRACE_ID}-00f067aa0ba902b7-01")
    (server,) = [span for span in exporter.get_finished_spans() if span.kind == SpanKind.SERVER]
    assert format(server.context.trace_id, "032x") == TRACE_ID


def test_it_marks_a_failed_vector_index_call_as_an_error(exporter, monkeypatch):
    class Unreachable:
        def heartbeat(self):
            raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(vectors, "get_client", Unreachable)
    with pytest.raises(vectors.VectorIndexError):
        vectors.heartbeat()
    (span,) = exporter.get_finished_spans()
    assert span.name == "chroma.heartbeat" and span.status.status_code == StatusCode.ERROR


def test_it_records_nothing_when_tracing_is_off(api):
    exporter = InMemorySpanExporter()
    tracing.start(exporter, SimpleSpanProcessor)
    tracing.stop()
    assert not tracing.enabled()
    assert remember(api).status_code == 201
    assert exporter.get_finished_spans() == ()
    with tracing.span("anything") as span:
        assert span is None


@pytest.mark.parametrize(("endpoint", "expected"), [("http://127.0.0.1:4317", "True True"), (None, "False False")])
def test_it_is_switched_on_by_the_standard_otlp_endpoint_variable(tmp_path, endpoint, expected):
    env = processes.clean_env(MEMCONSOLE_VAR_DIR=tmp_path)
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    result = processes.run_script(SCRIPTS / "tracing_state.py", env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == expected
