"""The health check against the real database, embedded Chroma and the real model."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from memconsole.lib import embeddings, vectors
from memconsole.memory import episodes, exports, health, imports, reindex, tokens
from memconsole.memory.audit import Actor
from memconsole.memory.errors import ValidationError
from memconsole.memory.health import runner
from memconsole.memory.models import (
    AuditEntry,
    Episode,
    EpisodeCounts,
    HealthRun,
    InjectionSnapshot,
    Scope,
)
from memconsole.memory.scopes import derive_scope, unregistered_scopes
from tests.conftest import MODEL_DIR

pytestmark = pytest.mark.django_db


def by_id(result: dict) -> dict[str, dict]:
    return {check["id"]: check for check in result["checks"]}


def assert_no_canary_left() -> None:
    prefix = health.PROBE_USER_KEY_PREFIX
    assert not Episode.objects.filter(user_key__startswith=prefix).exists()
    assert not Episode.objects.filter(source=health.PROBE_SOURCE).exists()
    assert not InjectionSnapshot.objects.filter(user_key__startswith=prefix).exists()
    assert not EpisodeCounts.objects.filter(user_key__startswith=prefix).exists()
    assert not Scope.objects.filter(bot_uuid=health.PROBE_BOT_UUID).exists()
    assert not [uk for uk in vectors.list_collections().values() if uk.startswith(prefix)]


def test_it_reports_a_healthy_install_all_ok(system, scope_with_episodes):
    result = health.run_health_check(system)

    assert [c["id"] for c in result["checks"]] == list(health.CHECK_IDS)
    assert {c["id"]: c["status"] for c in result["checks"]} == dict.fromkeys(health.CHECK_IDS, "OK")
    assert result["status"] == "OK"
    assert result["duration_ms"] >= 0 and result["checked_at"]
    assert all(c["detail"] and "fix" not in c for c in result["checks"])
    assert "4 episodes and 4 vectors" in by_id(result)["index_drift"]["detail"]


def test_it_leaves_no_canary_behind_and_registers_no_scope(system, scope_with_episodes):
    scopes_before = list(Scope.objects.values_list("scope_key", flat=True))
    counts_before = list(EpisodeCounts.objects.values_list("user_key", "active", "superseded", "archived"))
    seen = {}

    def look(probe: health.Canaries) -> None:
        seen["rows"] = Episode.objects.filter(user_key__in=probe.user_keys, source="health_probe").count()
        seen["scopes"] = Scope.objects.filter(user_key__in=probe.user_keys).count()

    health.run_health_check(system, on_canaries=look)

    assert seen == {"rows": 2, "scopes": 0}
    assert list(Scope.objects.values_list("scope_key", flat=True)) == scopes_before
    assert list(EpisodeCounts.objects.values_list("user_key", "active", "superseded", "archived")) == counts_before
    assert_no_canary_left()
    probe_entries = AuditEntry.objects.filter(scope_key__startswith=health.PROBE_USER_KEY_PREFIX)
    assert probe_entries.exists()
    assert set(probe_entries.values_list("actor", flat=True)) == {"system:health-probe"}


@pytest.mark.parametrize("relabelled", ["a", "b"])
def test_it_flags_a_canary_vector_relabelled_to_the_other_canary_as_a_search_error(system, relabelled):
    def tamper(probe: health.Canaries) -> None:
        own, other, episode_id = (probe.a, probe.b, probe.id_a) if relabelled == "a" else (probe.b, probe.a, probe.id_b)
        meta = vectors.get(own.user_key, [episode_id])[episode_id]["metadata"]
        vectors.update_metadata(own.user_key, [episode_id], [{**meta, "user_key": other.user_key}])

    result = health.run_health_check(system, on_canaries=tamper)

    search = by_id(result)["search"]
    assert search["status"] == "ERROR"
    assert "ISOLATION BREACH" in search["detail"] and "labelled for the other canary scope" in search["detail"]
    assert "reindex" in search["fix"]
    assert result["status"] == "ERROR"
    assert by_id(result)["cleanup"]["status"] == "OK"
    assert_no_canary_left()


def test_it_cleans_up_when_a_check_raises(system, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("list is broken")

    monkeypatch.setattr(episodes, "list_episodes", broken)

    result = health.run_health_check(system)

    assert by_id(result)["list"]["status"] == "ERROR"
    assert "RuntimeError: list is broken" in by_id(result)["list"]["detail"]
    assert by_id(result)["search"]["status"] == "OK"
    assert by_id(result)["cleanup"]["status"] == "OK"
    assert_no_canary_left()


def test_it_cleans_up_when_the_probe_is_interrupted(system):
    def interrupt(probe: health.Canaries) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        health.run_health_check(system, on_canaries=interrupt)

    assert_no_canary_left()


def test_it_sweeps_the_leftovers_of_a_killed_probe(system):
    old = health.new_canaries()
    with unregistered_scopes():
        written = episodes.remember(old.a, health.PROBE_ACTOR, old.content_a, source="health_probe")
    Episode.objects.filter(pk=written.episode.pk).update(created_at=timezone.now() - timedelta(hours=1))
    orphan = health.new_canaries().b
    vectors.upsert(
        orphan.user_key,
        embeddings.current_model_id(),
        ["0123456789ab"],
        embeddings.embed(["left over"]),
        [{"user_key": orphan.user_key}],
    )

    result = health.run_health_check(system)

    assert result["status"] == "OK"
    assert_no_canary_left()


def test_it_reports_a_deleted_and_an_orphan_vector_as_drift_until_reindex(system, keys, scope_with_episodes):
    gone = scope_with_episodes[0]
    vectors.delete(keys.user_key, [gone.episode_id])
    vectors.upsert(
        keys.user_key,
        embeddings.current_model_id(),
        ["feedfeedfeed"],
        embeddings.embed(["a vector nobody wrote"]),
        [{"user_key": keys.user_key, "status": "active"}],
    )

    drift = by_id(health.run_health_check(system))["index_drift"]

    assert drift["status"] == "WARN"
    assert "1 episodes whose vector is missing" in drift["detail"]
    assert "1 orphan vectors" in drift["detail"]
    assert "python manage.py reindex" in drift["fix"]

    reindex.reindex(check_only=False)

    assert by_id(health.run_health_check(system))["index_drift"]["status"] == "OK"


def test_it_names_an_edited_audit_row(system, scope_with_episodes):
    entry = AuditEntry.objects.order_by("id")[2]
    AuditEntry.objects.filter(pk=entry.pk).update(operation="archive")

    result = health.run_health_check(system)

    chain = by_id(result)["audit_chain"]
    assert chain["status"] == "ERROR"
    assert f"#{entry.seq}" in chain["detail"] and entry.audit_id in chain["detail"]
    assert f"Entry #{entry.seq}" in chain["fix"]
    assert result["status"] == "ERROR"


def test_it_says_encryption_is_off_when_nothing_is_encrypted(system, scope_with_episodes):
    check = by_id(health.run_health_check(system))["encryption"]

    assert check["status"] == "OK"
    assert "off" in check["detail"]


def test_it_errors_on_a_row_encrypted_under_a_key_no_longer_configured(system, keys, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    written = episodes.remember(keys, system, "a secret written under the old key")
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]

    result = health.run_health_check(system)

    check = by_id(result)["encryption"]
    assert check["status"] == "ERROR"
    assert f"episodes #{written.episode.pk}" in check["detail"]
    assert "MEMCONSOLE_FERNET_KEYS" in check["fix"]
    assert result["status"] == "ERROR"


def test_it_errors_on_encrypted_rows_without_any_key(system, keys, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    episodes.remember(keys, system, "a secret")
    settings.MEMCONSOLE_FERNET_KEYS = []

    check = by_id(health.run_health_check(system))["encryption"]

    assert check["status"] == "ERROR"
    assert "not set" in check["detail"]


def test_it_shows_the_share_under_the_newest_key(system, keys, settings):
    old = Fernet.generate_key().decode()
    settings.MEMCONSOLE_FERNET_KEYS = [old]
    episodes.remember(keys, system, "written under the old key")
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode(), old]

    check = by_id(health.run_health_check(system))["encryption"]

    assert check["status"] == "WARN"
    assert "of" in check["detail"] and "under an older key" in check["detail"]
    assert "rotate_keys" in check["fix"]


def test_it_warns_without_a_model(system, settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path

    result = health.run_health_check(system)

    check = by_id(result)["embedding"]
    assert check["status"] == "WARN"
    assert "lexical fallback" in check["detail"]
    assert "fetch_model" in check["fix"] and "MEMCONSOLE_MODEL_DIR" in check["fix"]
    assert result["status"] == "WARN"
    assert by_id(result)["search"]["status"] == "OK"


def test_it_reports_an_unreachable_index(system, settings):
    settings.CHROMA_HOST = "127.0.0.1"
    settings.CHROMA_PORT = 9  # discard: nothing listens there
    vectors.reset_client()

    result = health.run_health_check(system)

    checks = by_id(result)
    assert checks["database"]["status"] == "OK"
    assert checks["vector_index"]["status"] == "ERROR"
    assert checks["write"]["status"] == "ERROR"
    assert checks["cleanup"]["status"] == "WARN"
    assert result["status"] == "ERROR"
    assert not Episode.objects.filter(user_key__startswith=health.PROBE_USER_KEY_PREFIX).exists()


def test_it_reports_an_export_that_breaks_as_an_error_of_that_check(system, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(exports, "stream_scope_export", broken)

    result = health.run_health_check(system)

    check = by_id(result)["export"]
    assert check["status"] == "ERROR" and "OSError: disk full" in check["detail"]
    assert by_id(result)["search"]["status"] == "OK"  # the other checks still ran


def test_it_stores_every_run_and_audits_it(system, admin_user):
    first = health.run_health_check(system)
    second = health.run_health_check(Actor.for_user(admin_user))
    health.run_health_check(system, store=False)

    runs = health.latest_runs(10)
    assert [r.result for r in runs] == [second, first]
    assert runs[0].status == "OK" and runs[0].actor == "user:admin"
    entries = list(AuditEntry.objects.filter(operation="health_check").order_by("id"))
    assert len(entries) == 3
    assert entries[1].actor == "user:admin" and entries[1].target_id == str(runs[0].pk)
    assert entries[1].payload["metadata"]["checks"]["search"] == "OK"
    assert entries[2].target_id == ""


def test_it_keeps_the_newest_runs_only(system, monkeypatch):
    monkeypatch.setattr(runner, "HEALTH_RUNS_KEPT", 2)
    for _ in range(3):
        health.run_health_check(system)

    assert HealthRun.objects.count() == 2


def test_it_exits_0_1_or_2_from_the_command(system, settings, tmp_path, capsys):
    call_command("memory_health")
    out = capsys.readouterr().out
    assert "OK    search" in out and "health: OK" in out

    call_command("memory_health", "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "OK"

    settings.MEMCONSOLE_MODEL_DIR = tmp_path
    with pytest.raises(CommandError) as warned:
        call_command("memory_health", "--json")
    assert warned.value.returncode == 1
    assert json.loads(capsys.readouterr().out)["status"] == "WARN"

    AuditEntry.objects.filter(seq=1).update(actor="someone else")
    with pytest.raises(CommandError) as failed:
        call_command("memory_health")
    assert failed.value.returncode == 2
    assert "ERROR audit_chain" in capsys.readouterr().out


def test_it_probes_through_a_vector_index_of_another_model_without_touching_it(system, keys, settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path  # the fallback writes this scope's vectors
    episodes.remember(keys, system, "written while the model was missing")
    settings.MEMCONSOLE_MODEL_DIR = MODEL_DIR

    result = health.run_health_check(system)

    checks = by_id(result)
    assert checks["search"]["status"] == "OK"
    assert checks["index_drift"]["status"] == "WARN"
    assert "1 collections made by another embedding model" in checks["index_drift"]["detail"]


def test_it_warns_against_reindexing_with_the_fallback(system, scope_with_episodes, settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path  # the model went missing after the index was built

    drift = by_id(health.run_health_check(system))["index_drift"]

    assert drift["status"] == "WARN"
    assert "1 collections made by another embedding model" in drift["detail"]
    assert "install it first" in drift["fix"]


def test_it_keeps_the_probes_bot_out_of_reach_of_tokens_and_bots(system, tmp_path):
    """The probe sweeps and deletes what its bot holds: nobody else may write there."""

    with pytest.raises(ValidationError) as caught:
        tokens.create_token("probe lookalike", [health.PROBE_BOT_UUID], system)
    assert caught.value.field == "bot_uuid"
    with pytest.raises(ValidationError):
        derive_scope(health.PROBE_BOT_UUID, "group_1", "session")
    export = tmp_path / "episodes.json"
    export.write_text(json.dumps({"version": 1, "scope_key": "x:group_1", "episodes": [{"id": "e1", "content": "hi"}]}))
    with pytest.raises(ValidationError):
        imports.import_file(export, "langbot", bot_uuid=health.PROBE_BOT_UUID, actor=system)
    assert not Episode.objects.exists()
