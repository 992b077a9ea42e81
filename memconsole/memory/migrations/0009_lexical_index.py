# The lexical index of episodes (memconsole/memory/lexical.py): keyed-hash tokens, never readable text.
# SQLite: an FTS5 table (rowid = episode pk) with an fts5vocab table; an episode's entry goes with it
# through a post_delete receiver (a trigger would not survive SQLite's table remakes in later
# migrations). PostgreSQL: a tsvector per episode (GIN), removed by the same receiver. No foreign key:
# one would make Django's flush (TRUNCATE of its own tables, in tests and `manage.py flush`) fail.
from __future__ import annotations

from typing import Any

from django.db import migrations

SQLITE = [
    "CREATE VIRTUAL TABLE memory_episode_lexical USING fts5(tokens, tokenize='ascii', detail='none')",
    "CREATE VIRTUAL TABLE memory_episode_lexical_vocab USING fts5vocab(memory_episode_lexical, 'row')",
]
SQLITE_REVERSE = [
    "DROP TABLE IF EXISTS memory_episode_lexical_vocab",
    "DROP TABLE IF EXISTS memory_episode_lexical",
]
POSTGRES = [
    (
        "CREATE TABLE memory_episode_lexical ("
        " episode_id bigint PRIMARY KEY,"
        " tokens tsvector NOT NULL)"
    ),
    "CREATE INDEX memory_episode_lexical_tokens ON memory_episode_lexical USING gin (tokens)",
]
POSTGRES_REVERSE = ["DROP TABLE IF EXISTS memory_episode_lexical"]


def _run(statements: list[str]) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        for statement in statements:
            schema_editor.execute(statement)

    return run


def forwards(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(SQLITE)(apps, schema_editor)
    elif vendor == "postgresql":
        _run(POSTGRES)(apps, schema_editor)
    else:
        raise RuntimeError(f"the lexical index needs SQLite (FTS5) or PostgreSQL, not {vendor}")
    # Index the episodes already stored (their content may be encrypted: the tokens are computed in
    # Python with the lexical key, as every later write does).
    from memconsole.memory import lexical  # noqa: PLC0415

    if apps.get_model("memory", "Episode").objects.exists():
        lexical.rebuild()


def backwards(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    _run(SQLITE_REVERSE if vendor == "sqlite" else POSTGRES_REVERSE)(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("memory", "0008_erasure_journal")]

    operations = [migrations.RunPython(forwards, backwards)]
