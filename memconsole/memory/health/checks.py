"""The configuration checks: `database`, `vector_index`, `embedding`."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from memconsole.lib import embeddings, vectors

from ..models import Episode
from ..pending_models import PendingVector
from ..scopes import PROBE_USER_KEY_PREFIX
from .result import ERROR, OK, REINDEX_FIX, WARN, Check


def _database_label() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"SQLite {db['NAME']}"
    host = db.get("HOST") or "local socket"
    return f"{connection.vendor} database {db['NAME']!s} on {host}"


def check_database() -> Check:
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


def check_vector_index() -> Check:
    vectors.heartbeat()
    collections = {uk for uk in vectors.list_collections().values() if not uk.startswith(PROBE_USER_KEY_PREFIX)}
    scopes = set(
        Episode.objects.exclude(user_key__startswith=PROBE_USER_KEY_PREFIX)
        .values_list("user_key", flat=True)
        .distinct()
    )
    # A new scope whose vectors still wait for the write-behind indexer has no collection yet.
    missing = scopes - collections - set(PendingVector.objects.values_list("user_key", flat=True).distinct())
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


def check_embedding() -> Check:
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
