"""The configuration checks: `database`, `vector_index`, `embedding`."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils.translation import gettext_noop

from memconsole.lib import embeddings, vectors

from .. import modelswitch
from ..models import Episode
from ..pending_models import PendingVector
from ..scopes import PROBE_USER_KEY_PREFIX
from ..wording import Said, said
from .result import ERROR, OK, REINDEX_FIX, WARN, Check


def index_named() -> Said:
    """The vector index, named in the reader's language inside a check's words."""
    server, where = vectors.location()
    if server:
        return said(gettext_noop("the Chroma server at %(where)s"), where=where)
    return said(gettext_noop("embedded Chroma at %(where)s"), where=where)


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
            said(
                gettext_noop("%(database)s is reachable but %(count)s migrations are not applied"),
                database=_database_label(),
                count=len(pending),
            ),
            gettext_noop("Run `python manage.py migrate`."),
        )
    return Check(
        "database", OK, said(gettext_noop("%(database)s is reachable and migrated"), database=_database_label())
    )


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
            said(
                gettext_noop(
                    "%(index)s is reachable, but %(missing)s of %(scopes)s scopes with episodes have no collection: "
                    "their episodes cannot be found by search"
                ),
                index=index_named(),
                missing=len(missing),
                scopes=len(scopes),
            ),
            REINDEX_FIX,
        )
    return Check(
        "vector_index",
        OK,
        said(
            gettext_noop("%(index)s is reachable; %(collections)s collections for %(scopes)s scopes with episodes"),
            index=index_named(),
            collections=len(collections),
            scopes=len(scopes),
        ),
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
            gettext_noop(
                "Replace the model folder (`python manage.py fetch_model` downloads and verifies it) or point "
                "MEMCONSOLE_MODEL_DIR at a working all-MiniLM-L6-v2 folder, then restart."
            ),
        )
    if vector.shape != (1, embeddings.DIMENSIONS) or abs(float((vector[0] ** 2).sum()) - 1.0) > 1e-3:
        return Check("embedding", ERROR, f"the embedder returned vectors of shape {vector.shape}, not unit length")
    model_dir = settings.MEMCONSOLE_MODEL_DIR
    if differs := modelswitch.recorded_elsewhere():
        return Check(
            "embedding",
            WARN,
            said(
                gettext_noop(
                    "This process is set up for model %(configured)s (MEMCONSOLE_MODEL_DIR=%(folder)s) but the "
                    "install's index is built with %(recorded)s: the checks that search may fail for that reason "
                    "alone. No switch was started from here."
                ),
                configured=differs[0],
                folder=str(model_dir),
                recorded=differs[1],
            ),
            gettext_noop(
                "Run the check with the server's settings (its MEMCONSOLE_MODEL_DIR). A model switch starts from the "
                "server or `first_start` with the new setting."
            ),
        )
    if embedder.is_fallback:
        return Check(
            "embedding",
            WARN,
            said(
                gettext_noop(
                    "No embedding model in %(folder)s: the lexical fallback is in use, which matches shared words, "
                    "not meaning (a search for 'travel plans' will not find 'a trip to Beijing')."
                ),
                folder=str(model_dir),
            ),
            gettext_noop(
                "Run `python manage.py fetch_model` where a network is available (or set MEMCONSOLE_MODEL_DIR to an "
                "all-MiniLM-L6-v2 folder with model.onnx and tokenizer.json), restart, then run "
                "`python manage.py reindex` to re-embed what the fallback indexed."
            ),
        )
    loaded = gettext_noop("all-MiniLM-L6-v2 loaded from %(folder)s (model id %(model)s)")
    return Check("embedding", OK, said(loaded, folder=str(model_dir), model=embedder.model_id))
