"""The health check: can this memory be trusted?

One run answers with `{status, checks: [{id, status, detail, fix?}], checked_at, duration_ms}`,
`status` being the worst of OK < WARN < ERROR, in this order of checks:

- configuration: `database`, `vector_index` (reachable, a collection for every scope with
  episodes), `embedding` (the real model, or the lexical fallback: WARN);
- the isolation probe (LangBot's semantics, extended to every read and delete path): `write` two
  canary episodes into two synthetic user_keys, then `search`, `list`, `get`, `recall`, `inject`,
  `export` and `delete` must each keep the two apart, and `cleanup` always removes them;
- integrity: `index_drift` (`reindex --check`), `audit_chain`, `encryption`.

The probe runs against the real database and the configured vector index, through the same
operations the bot API and the console use. Its canaries live in scopes of the reserved bot
`memconsole-health-probe`, carry `source=health_probe`, are never registered as scopes (so no
console list shows them), and are removed in a `finally` whatever happens: rows, vectors,
collections, snapshots and counters. Their audit entries stay (the audit log is never edited);
they are labelled by their actor `system:health-probe` and their scope keys. Leftovers of a
probe that was killed outright are swept by the next run.

Every run is stored (`HealthRun`, the newest `HEALTH_RUNS_KEPT`) and audited as `health_check`.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from memconsole.lib import crypto, embeddings, vectors

from . import audit, exports, reindex, rotation
from . import operations as ops
from .audit import Actor
from .errors import NotFound
from .models import STATUSES, Episode, EpisodeCounts, HealthRun, InjectionSnapshot, Profile, Scope
from .scopes import HEALTH_PROBE_BOT_UUID, ScopeKeys, derive_scope, unregistered_scopes

log = logging.getLogger("memconsole.health")

OK, WARN, ERROR = "OK", "WARN", "ERROR"
SEVERITY = {OK: 0, WARN: 1, ERROR: 2}
EXIT_CODES = {OK: 0, WARN: 1, ERROR: 2}

CHECK_IDS = (
    "database",
    "vector_index",
    "embedding",
    "write",
    "search",
    "list",
    "get",
    "recall",
    "inject",
    "export",
    "delete",
    "cleanup",
    "index_drift",
    "audit_chain",
    "encryption",
)
PROBE_CHECKS = ("search", "list", "get", "recall", "inject", "export", "delete")

PROBE_BOT_UUID = HEALTH_PROBE_BOT_UUID  # reserved: derive_scope refuses it outside unregistered_scopes()
PROBE_USER_KEY_PREFIX = PROBE_BOT_UUID + ":"
PROBE_SOURCE = "health_probe"
# A system actor that may only touch the probe's own bot: the probe cannot reach real data.
PROBE_ACTOR = Actor("system", "health-probe", frozenset({PROBE_BOT_UUID}))
LEFTOVER_AGE = timedelta(minutes=10)
HEALTH_RUNS_KEPT = 1000
SEARCH_TOP_K = 5

INDEX_FIX = (
    "Check the vector index: with embedded Chroma, that CHROMA_PATH exists and is writable by this process; "
    "with a Chroma server, that it runs at CHROMA_HOST:CHROMA_PORT and is reachable from here."
)
REINDEX_FIX = "Run `python manage.py reindex` (it rebuilds the index from the database, which is the source of truth)."


@dataclass
class Check:
    id: str
    status: str
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        out = {"id": self.id, "status": self.status, "detail": self.detail}
        if self.fix:
            out["fix"] = self.fix
        return out


@dataclass
class Canaries:
    """The probe's two synthetic scopes and what was written into them."""

    run_id: str
    a: ScopeKeys
    b: ScopeKeys
    content_a: str
    content_b: str
    query: str
    id_a: str = ""
    id_b: str = ""

    @property
    def user_keys(self) -> list[str]:
        return [self.a.user_key, self.b.user_key]

    @property
    def scope_keys(self) -> list[str]:
        return [self.a.scope_key, self.b.scope_key]

    def sides(self) -> list[tuple[str, ScopeKeys, str, str]]:
        """(label, own keys, own canary id, the other canary's id) for both directions."""
        return [("a", self.a, self.id_a, self.id_b), ("b", self.b, self.id_b, self.id_a)]


def worst(statuses: list[str]) -> str:
    return max(statuses, key=SEVERITY.__getitem__, default=OK)


def run_health_check(
    actor: Actor, *, store: bool = True, on_canaries: Callable[[Canaries], None] | None = None
) -> dict[str, Any]:
    """Run every check and return the result (see the module docstring). Never raises for a
    failing check: a check that raises is reported as ERROR with what it raised.

    `store=False` skips the HealthRun row (the run is still audited). `on_canaries` is a test
    hook, never set in production: it is called with the `Canaries` once both are written and
    before any read check, so that tests can tamper with the index mid-probe; if it raises, the
    probe still cleans up and the exception propagates.
    """
    started = time.monotonic()
    checked_at = timezone.now()
    results: dict[str, Check] = {}
    results["database"] = _safely("database", _check_database)
    results["vector_index"] = _safely("vector_index", _check_vector_index)
    results["embedding"] = _safely("embedding", _check_embedding)
    results.update(_run_probe(on_canaries))
    results["index_drift"] = _safely("index_drift", _check_index_drift)
    results["audit_chain"] = _safely("audit_chain", _check_audit_chain)
    results["encryption"] = _safely("encryption", _check_encryption)
    checks = [results[check_id].as_dict() for check_id in CHECK_IDS]
    result = {
        "status": worst([c["status"] for c in checks]),
        "checks": checks,
        "checked_at": checked_at.isoformat(),
        "duration_ms": int((time.monotonic() - started) * 1000),
    }
    _record(actor, result, checked_at, store)
    return result


def latest_runs(limit: int = 20) -> list[HealthRun]:
    """The newest stored health runs, newest first (`.result` holds the full result)."""
    return list(HealthRun.objects.order_by("-checked_at", "-id")[:limit])


def _safely(check_id: str, fn: Callable[..., Check], *args: Any) -> Check:
    try:
        return fn(*args)
    except Exception as exc:  # a check that breaks is a finding, not a crash of the whole run
        log.exception("health check %s raised", check_id)
        fix = ""
        if isinstance(exc, vectors.VectorIndexError):
            fix = INDEX_FIX
        elif isinstance(exc, DatabaseError):
            fix = "Check that the database named by DATABASE_URL is running and reachable."
        return Check(check_id, ERROR, f"the check could not run: {type(exc).__name__}: {exc}", fix)


def _record(actor: Actor, result: dict[str, Any], checked_at: datetime, store: bool) -> None:
    failing = [f"{c['id']} {c['status']}" for c in result["checks"] if c["status"] != OK]
    try:
        with transaction.atomic():
            run = None
            if store:
                run = HealthRun.objects.create(
                    checked_at=checked_at,
                    status=result["status"],
                    duration_ms=result["duration_ms"],
                    result=result,
                    actor=actor.label[:255],
                )
            audit.append(
                "health_check",
                actor,
                target_type="health_run",
                target_id=str(run.pk) if run else "",
                summary=f"health check: {result['status']}" + (f" ({', '.join(failing)})" if failing else ""),
                metadata={
                    "status": result["status"],
                    "checks": {c["id"]: c["status"] for c in result["checks"]},
                    "duration_ms": result["duration_ms"],
                },
            )
        if store:
            beyond = HealthRun.objects.order_by("-checked_at", "-id").values_list("pk", flat=True)[HEALTH_RUNS_KEPT:]
            expired = list(beyond)
            if expired:
                HealthRun.objects.filter(pk__in=expired).delete()
    except Exception:  # the database may be the very thing that is down
        log.exception("the health check result could not be stored")


# --- configuration ------------------------------------------------------------------------------


def _database_label() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"SQLite {db['NAME']}"
    host = db.get("HOST") or "local socket"
    return f"{connection.vendor} database {db['NAME']!s} on {host}"


def _check_database() -> Check:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        return Check(
            "database",
            WARN,
            f"{_database_label()} is reachable but {len(pending)} migrations are not applied",
            "Run `python manage.py migrate`.",
        )
    return Check("database", OK, f"{_database_label()} is reachable and migrated")


def _check_vector_index() -> Check:
    vectors.heartbeat()
    collections = {uk for uk in vectors.list_collections().values() if not uk.startswith(PROBE_USER_KEY_PREFIX)}
    scopes = set(
        Episode.objects.exclude(user_key__startswith=PROBE_USER_KEY_PREFIX)
        .values_list("user_key", flat=True)
        .distinct()
    )
    missing = scopes - collections
    if missing:
        return Check(
            "vector_index",
            WARN,
            f"{vectors.describe()} is reachable, but {len(missing)} of {len(scopes)} scopes with episodes "
            "have no collection: their episodes cannot be found by search",
            REINDEX_FIX,
        )
    return Check(
        "vector_index",
        OK,
        f"{vectors.describe()} is reachable; {len(collections)} collections for {len(scopes)} scopes with episodes",
    )


def _check_embedding() -> Check:
    try:
        embedder = embeddings.get_embedder()
        vector = embedder.embed(["memconsole health check"])
    except embeddings.EmbeddingError as exc:
        return Check(
            "embedding",
            ERROR,
            str(exc),
            "Replace the model folder (`python manage.py fetch_model` downloads and verifies it) or point "
            "MEMCONSOLE_MODEL_DIR at a working all-MiniLM-L6-v2 folder, then restart.",
        )
    if vector.shape != (1, embeddings.DIMENSIONS) or abs(float((vector[0] ** 2).sum()) - 1.0) > 1e-3:
        return Check("embedding", ERROR, f"the embedder returned vectors of shape {vector.shape}, not unit length")
    model_dir = settings.MEMCONSOLE_MODEL_DIR
    if embedder.is_fallback:
        return Check(
            "embedding",
            WARN,
            f"No embedding model in {model_dir}: the lexical fallback is in use, which matches shared words, "
            "not meaning (a search for 'travel plans' will not find 'a trip to Beijing').",
            "Run `python manage.py fetch_model` where a network is available (or set MEMCONSOLE_MODEL_DIR to an "
            "all-MiniLM-L6-v2 folder with model.onnx and tokenizer.json), restart, then run "
            "`python manage.py reindex` to re-embed what the fallback indexed.",
        )
    return Check("embedding", OK, f"all-MiniLM-L6-v2 loaded from {model_dir} (model id {embedder.model_id})")


# --- the isolation probe ------------------------------------------------------------------------


def _new_canaries() -> Canaries:
    run_id = secrets.token_hex(4)
    with unregistered_scopes():  # the probe's bot is reserved everywhere else
        a = derive_scope(PROBE_BOT_UUID, f"probe_{run_id}a", "session")
        b = derive_scope(PROBE_BOT_UUID, f"probe_{run_id}b", "session")
    theme = f"memconsole health probe canary {run_id}: the lighthouse keeper paints the door"
    return Canaries(
        run_id=run_id,
        a=a,
        b=b,
        content_a=f"{theme} blue (scope a)",
        content_b=f"{theme} green (scope b)",
        # Close to both canaries, so that a leak of b into a's results would show.
        query=f"memconsole health probe canary {run_id} lighthouse keeper door",
    )


def _run_probe(on_canaries: Callable[[Canaries], None] | None) -> dict[str, Check]:
    out: dict[str, Check] = {}
    probe = _new_canaries()
    with unregistered_scopes():
        try:
            _sweep_leftovers()
            out["write"] = _safely("write", _check_write, probe)
            if not (probe.id_a and probe.id_b):
                for check_id in PROBE_CHECKS:
                    out[check_id] = Check(check_id, WARN, "not run: the canary episodes could not be written")
            else:
                if on_canaries is not None:
                    on_canaries(probe)
                for check_id, fn in (
                    ("search", _check_search),
                    ("list", _check_list),
                    ("get", _check_get),
                    ("recall", _check_recall),
                    ("inject", _check_inject),
                    ("export", _check_export),
                    ("delete", _check_delete),
                ):
                    out[check_id] = _safely(check_id, fn, probe)
        finally:
            out["cleanup"] = _cleanup(probe)
    return out


def _check_write(probe: Canaries) -> Check:
    written = []
    for label, keys, content in (("a", probe.a, probe.content_a), ("b", probe.b, probe.content_b)):
        result = ops.remember(
            keys,
            PROBE_ACTOR,
            content,
            tags=["health-probe"],
            sender_id="health-probe",
            sender_name="health probe",
            source=PROBE_SOURCE,
            query_id=f"health-probe-{probe.run_id}",
        )
        if label == "a":
            probe.id_a = result.episode.episode_id
        else:
            probe.id_b = result.episode.episode_id
        written.append(result)
    if not all(r.indexed for r in written):
        return Check(
            "write",
            ERROR,
            "the canary episodes were saved in the database but the vector index refused them: new memories are "
            "not searchable",
            f"Check that {vectors.describe()} is reachable and writable. {REINDEX_FIX}",
        )
    return Check("write", OK, f"2 canary episodes written to the database and to {vectors.describe()}")


def _leak(what: str, details: list[str]) -> Check:
    return Check(
        what,
        ERROR,
        "ISOLATION BREACH: " + "; ".join(details),
        "Stop the bots' access (revoke their tokens) until this is understood. If the vector index was changed "
        f"outside memconsole: {REINDEX_FIX} Then run the health check again.",
    )


def _judge(check_id: str, leaks: list[str], missing: list[str], ok_detail: str, fix: str = REINDEX_FIX) -> Check:
    if leaks:
        return _leak(check_id, leaks)
    if missing:
        return Check(check_id, WARN, "no leak, but " + "; ".join(missing), fix)
    return Check(check_id, OK, ok_detail)


def _check_search(probe: Canaries) -> Check:
    model_id = embeddings.current_model_id()
    vector = embeddings.embed([probe.query])[0]
    leaks, missing = [], []
    for label, keys, own_id, other_id in probe.sides():
        hits = vectors.query(keys.user_key, model_id, vector, SEARCH_TOP_K, include_metadata=True)
        found = False
        for hit in hits:
            owner = hit.metadata.get("user_key")
            if hit.episode_id == other_id:
                leaks.append(f"searching canary scope {label} returned the other canary's vector {hit.episode_id}")
            elif owner != keys.user_key:
                whose = "the other canary scope" if owner in probe.user_keys else f"user_key {owner!r}"
                leaks.append(f"searching canary scope {label} returned vector {hit.episode_id} labelled for {whose}")
            elif hit.episode_id == own_id:
                found = True
        if not found:
            missing.append(f"searching canary scope {label} did not find its own canary")
    return _judge(
        "search", leaks, missing, f"each canary scope's search (top {SEARCH_TOP_K}) found its own canary only"
    )


def _check_list(probe: Canaries) -> Check:
    leaks, missing = [], []
    for label, keys, own_id, other_id in probe.sides():
        page = ops.list_episodes(keys, statuses=None, limit=50)
        ids = {e.episode_id for e in page.episodes}
        strangers = [e.episode_id for e in page.episodes if e.user_key != keys.user_key or e.episode_id == other_id]
        if strangers:
            leaks.append(f"listing canary scope {label} showed episodes of another scope: {', '.join(strangers)}")
        if own_id not in ids:
            missing.append(f"listing canary scope {label} did not show its own canary")
    return _judge("list", leaks, missing, "each canary scope's list shows its own canary only", "")


def _check_get(probe: Canaries) -> Check:
    leaks, missing = [], []
    for label, keys, own_id, other_id in probe.sides():
        try:
            ops.get_episode(keys, other_id)
        except NotFound:
            pass
        else:
            leaks.append(f"the other canary's id resolved through canary scope {label}")
        try:
            ops.get_episode(keys, own_id)
        except NotFound:
            missing.append(f"canary scope {label} could not open its own canary")
    return _judge("get", leaks, missing, "an id resolves only through its own scope", "")


def _check_recall(probe: Canaries) -> Check:
    leaks, missing = [], []
    for label, keys, own_id, other_id in probe.sides():
        hits = ops.recall(keys, probe.query, top_k=SEARCH_TOP_K, actor=PROBE_ACTOR, current_speaker_id="health-probe")
        ids = [hit.episode.episode_id for hit in hits]
        strangers = [hit.episode.episode_id for hit in hits if hit.episode.user_key != keys.user_key]
        if other_id in ids or strangers:
            leaks.append(f"recall in canary scope {label} returned the other scope's episodes")
        if own_id not in ids:
            missing.append(f"recall in canary scope {label} did not return its own canary")
    return _judge(
        "recall",
        leaks,
        missing,
        f"recall (top {SEARCH_TOP_K}, as the bot API runs it) returns each scope's own canary only",
    )


def _check_inject(probe: Canaries) -> Check:
    injection = ops.record_injection(
        probe.a,
        PROBE_ACTOR,
        probe.query,
        query_id=f"health-probe-{probe.run_id}",
        sender_id="health-probe",
        sender_name="health probe",
        top_k=SEARCH_TOP_K,
    )
    ids = [episode["episode_id"] for episode in injection.context["episodes"]]
    blocks = "\n".join(injection.system_blocks)
    snapshot = InjectionSnapshot.objects.get(pk=injection.snapshot.pk)
    stored = json.dumps(snapshot.payload, ensure_ascii=False)
    leaks, missing = [], []
    if probe.id_b in ids or probe.content_b in blocks:
        leaks.append("the injection built for canary scope a carried canary b")
    if probe.id_b in stored or probe.content_b in stored or snapshot.user_key != probe.a.user_key:
        leaks.append("the stored injection snapshot of canary scope a holds canary b")
    if probe.id_a not in ids or probe.content_a not in blocks:
        missing.append("the injection for canary scope a did not carry its own canary")
    return _judge(
        "inject", leaks, missing, "the injection (and its stored snapshot) carries the scope's own canary only"
    )


def _check_export(probe: Canaries) -> Check:
    text = "".join(exports.stream_scope_export(probe.a, PROBE_ACTOR, statuses=list(STATUSES), include_audit=True))
    if probe.id_b in text or probe.content_b in text:
        return _leak("export", ["the export of canary scope a contains canary b"])
    if probe.id_a not in text:
        return Check("export", WARN, "no leak, but the export of canary scope a did not contain its own canary", "")
    try:
        json.loads(text)
    except ValueError:
        return Check("export", WARN, "no leak, but the export of canary scope a is not valid JSON", "")
    return Check("export", OK, "the scope export (episodes, profiles and audit) carries the scope's own canary only")


def _check_delete(probe: Canaries) -> Check:
    leaks = []
    try:
        ops.delete(probe.a, PROBE_ACTOR, [probe.id_b])
    except NotFound:
        pass
    else:
        leaks.append("deleting canary b through canary scope a's keys succeeded")
    ids = list(Episode.objects.filter(ops.episode_filter(probe.a, statuses=None)).values_list("episode_id", flat=True))
    deleted = ops.delete(probe.a, PROBE_ACTOR, ids) if ids else 0
    b_row = Episode.objects.filter(user_key=probe.b.user_key, episode_id=probe.id_b).exists()
    b_vector = probe.id_b in vectors.get(probe.b.user_key, [probe.id_b])
    if not (b_row and b_vector):
        leaks.append("deleting canary scope a's episodes removed canary b's " + ("row" if not b_row else "vector"))
    if deleted > 1:
        leaks.append(f"deleting by canary scope a's filter deleted {deleted} episodes, expected 1")
    if leaks:
        return _leak("delete", leaks)
    if deleted == 0:
        return Check("delete", WARN, "deleting by canary scope a's filter deleted nothing (expected 1)", REINDEX_FIX)
    if probe.id_a in vectors.get(probe.a.user_key, [probe.id_a]):
        return Check("delete", WARN, "the deleted canary's row is gone but its vector remains", REINDEX_FIX)
    return Check("delete", OK, "deleting by a scope's filter removed exactly its own canary (row and vector)")


def _remove_probe_data(user_keys: list[str], scope_keys: list[str]) -> None:
    """Delete every trace of the given probe scopes except their audit entries."""
    for user_key, scope_key in zip(user_keys, scope_keys, strict=True):
        ids = list(Episode.objects.filter(user_key=user_key).values_list("episode_id", flat=True))
        if ids:
            try:
                keys = derive_scope(PROBE_BOT_UUID, scope_key.split(":", 1)[1], "session")
                ops.delete(keys, PROBE_ACTOR, ids)  # audited, and removes the vectors
            except Exception:
                log.exception("probe canary delete failed; removing the rows directly")
    with transaction.atomic():
        Episode.objects.filter(user_key__in=user_keys).delete()
        InjectionSnapshot.objects.filter(user_key__in=user_keys).delete()
        EpisodeCounts.objects.filter(user_key__in=user_keys).delete()
        Scope.objects.filter(user_key__in=user_keys).delete()
        Profile.objects.filter(scope_key__in=scope_keys).delete()
    failed: list[vectors.VectorIndexError] = []
    for user_key in user_keys:
        try:
            vectors.drop(user_key)
        except vectors.VectorIndexError as exc:
            failed.append(exc)
    if failed:
        raise failed[0]


def _cleanup(probe: Canaries) -> Check:
    problems = []
    try:
        _remove_probe_data(probe.user_keys, probe.scope_keys)
    except Exception as exc:
        log.exception("health probe cleanup failed")
        problems.append(f"{type(exc).__name__}: {exc}")
    try:
        left = []
        rows = Episode.objects.filter(user_key__in=probe.user_keys).count()
        if rows:
            left.append(f"{rows} canary episodes")
        snapshots = InjectionSnapshot.objects.filter(user_key__in=probe.user_keys).count()
        if snapshots:
            left.append(f"{snapshots} canary snapshots")
        collections = [uk for uk in vectors.list_collections().values() if uk in probe.user_keys]
        if collections:
            left.append(f"{len(collections)} canary collections")
        if left:
            problems.append("left behind: " + ", ".join(left))
    except Exception as exc:
        problems.append(f"could not verify the cleanup: {type(exc).__name__}: {exc}")
    if problems:
        return Check(
            "cleanup",
            WARN,
            "the probe's canaries were not all removed: " + "; ".join(problems),
            "The next health check removes probe leftovers older than 10 minutes; run it again once the "
            "database and the vector index are reachable.",
        )
    return Check(
        "cleanup",
        OK,
        "canary episodes, vectors, collections and snapshots removed; the probe's audit entries stay "
        "(actor system:health-probe)",
    )


def _sweep_leftovers() -> None:
    """Remove what an earlier probe left behind when its process was killed outright."""
    cutoff = timezone.now() - LEFTOVER_AGE
    stale: set[str] = set()
    try:
        for user_key in vectors.list_collections().values():
            if user_key.startswith(PROBE_USER_KEY_PREFIX) and not Episode.objects.filter(user_key=user_key).exists():
                stale.add(user_key)
    except vectors.VectorIndexError:
        pass
    stale.update(
        Episode.objects.filter(user_key__startswith=PROBE_USER_KEY_PREFIX, created_at__lt=cutoff)
        .values_list("user_key", flat=True)
        .distinct()
    )
    stale.update(
        InjectionSnapshot.objects.filter(user_key__startswith=PROBE_USER_KEY_PREFIX, recorded_at__lt=cutoff)
        .values_list("user_key", flat=True)
        .distinct()
    )
    stale.update(
        EpisodeCounts.objects.filter(user_key__startswith=PROBE_USER_KEY_PREFIX, last_activity__lt=cutoff).values_list(
            "user_key", flat=True
        )
    )
    stale = {uk for uk in stale if uk.startswith(PROBE_USER_KEY_PREFIX) and ":" in uk}
    if stale:
        ordered = sorted(stale)
        try:
            _remove_probe_data(ordered, ordered)  # session isolation: scope_key == user_key
        except Exception:
            log.exception("sweeping health probe leftovers failed")


# --- integrity ----------------------------------------------------------------------------------


def _check_index_drift() -> Check:
    report = reindex.reindex(check_only=True)
    counted = f"{report.episodes} episodes and {report.vectors} vectors in {report.scopes} scopes checked"
    if report.errors:
        return Check("index_drift", ERROR, f"{counted}; errors: {'; '.join(report.errors[:3])}", REINDEX_FIX)
    if report.drift:
        fix = "Run `python manage.py reindex` (`--check` reports without changing anything)."
        if report.foreign_model_collections and embeddings.get_embedder().is_fallback:
            fix = (
                "The embedding model is missing (see the embedding check): install it first, otherwise "
                "`python manage.py reindex` re-embeds everything with the lexical fallback. " + fix
            )
        return Check(
            "index_drift",
            WARN,
            f"the vector index is out of step with the database: {report.describe_drift()} ({counted})",
            fix,
        )
    return Check("index_drift", OK, f"the vector index matches the database ({counted})")


def _check_audit_chain() -> Check:
    report = audit.verify_audit_chain()
    if report.ok:
        return Check("audit_chain", OK, f"the audit chain verifies: {report.checked} entries")
    return Check(
        "audit_chain",
        ERROR,
        str(report),
        f"Entry #{report.broken_seq} was changed, inserted or deleted outside memconsole. Compare it with your "
        "latest backup to see what changed; the chain cannot be repaired in place, and new entries keep "
        "being appended after it.",
    )


def _check_encryption() -> Check:
    census = rotation.encryption_census()
    rows = sum(c.rows for c in census.values())
    encrypted = sum(c.encrypted for c in census.values())
    newest = sum(c.newest for c in census.values())
    older = sum(c.older for c in census.values())
    plain = sum(c.plain for c in census.values())
    unreadable = sum(c.unreadable for c in census.values())
    if not crypto.enabled():
        if encrypted == 0:
            return Check(
                "encryption", OK, f"encryption at rest is off ({crypto.SETTING} is not set); no row is encrypted"
            )
        return Check(
            "encryption",
            ERROR,
            f"{encrypted} rows are encrypted but {crypto.SETTING} is not set: they cannot be read",
            f"Set {crypto.SETTING} to the key(s) this data was written with (newest first) and restart.",
        )
    key_count = len(settings.MEMCONSOLE_FERNET_KEYS)
    if unreadable:
        first = next(f"{name} #{c.first_unreadable}" for name, c in census.items() if c.unreadable)
        return Check(
            "encryption",
            ERROR,
            f"{unreadable} encrypted rows open with none of the {key_count} configured keys (first: {first})",
            f"Add the key they were written with to {crypto.SETTING} (after the newest) and restart. Remove a key "
            "only after `python manage.py rotate_keys` reports no unreadable rows.",
        )
    share = f"{100.0 * newest / rows:.1f}%" if rows else "100%"
    configured = f"{key_count} key{'s' if key_count != 1 else ''} configured"
    detail = f"encryption at rest is on ({configured}): {share} of {rows} rows are under the newest key"
    if older or plain:
        parts = []
        if older:
            parts.append(f"{older} under an older key")
        if plain:
            parts.append(f"{plain} not encrypted (written before keys were set)")
        return Check("encryption", WARN, f"{detail}; {', '.join(parts)}", "Run `python manage.py rotate_keys`.")
    if key_count > 1 and encrypted:
        detail += "; the older keys can be removed"
    return Check("encryption", OK, detail)
