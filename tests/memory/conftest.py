"""Fixtures for the memory domain tests: encryption keys and whole-database counts."""

from __future__ import annotations

import threading
import time

import pytest
from cryptography.fernet import Fernet
from django.db import connection, transaction
from django.db.models import QuerySet

from memconsole.lib import vectors
from memconsole.memory import audit, counters
from memconsole.memory.models import (
    MEMORY_TABLES,
)


@pytest.fixture
def fernet_keys(settings):
    """Encryption on: MEMCONSOLE_FERNET_KEYS holds one fresh key (returned)."""
    key = Fernet.generate_key().decode()
    settings.MEMCONSOLE_FERNET_KEYS = [key]
    return key


def database_counts() -> dict[str, int]:
    """Row counts of every memory table: an operation refused must leave them all unchanged."""
    return {model.__name__: QuerySet(model).count() for model in MEMORY_TABLES}  # whatever each manager is


def vector_counts() -> dict[str, int]:
    """{user_key: number of vectors} over every collection of the index."""
    return {user_key: len(vectors.all_ids(user_key)) for user_key in vectors.list_collections().values()}


@pytest.fixture
def counts():
    """A callable returning (database row counts, vector counts) to compare before and after."""

    def snapshot() -> tuple[dict[str, int], dict[str, int]]:
        return database_counts(), vector_counts()

    return snapshot


# --- two connections at once (PostgreSQL lock-order tests) ---------------------------------------


def wait_for_lock_waiter(timeout: float = 20.0) -> None:
    """Block until some other connection of this database waits on a lock (PostgreSQL)."""

    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.02)
    raise AssertionError("no connection started waiting on a lock")


def in_thread(fn, *args, **kwargs):
    """Run fn in a thread with its own database connection; returns (thread, outcome dict)."""

    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # reported to the test
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def remember_holding_the_chain(keys, actor):
    """Start, in a thread, what remember's transaction does in remember's order (the audit chain's
    head, then the counters), paused while it holds the chain until another connection waits for
    a lock. Returns (thread, outcome) once the chain is held; the caller then runs the operation
    that must queue behind it without a deadlock, and joins the thread."""

    holding = threading.Event()

    def remember_in_progress() -> None:
        with transaction.atomic():
            audit.append("remember", actor, scope_key=keys.scope_key, user_key=keys.user_key, summary="concurrent")
            holding.set()
            wait_for_lock_waiter()  # the other operation is now waiting for the chain
            counters.count(keys.user_key)

    writer, outcome = in_thread(remember_in_progress)
    assert holding.wait(30)
    return writer, outcome


@pytest.fixture
def postgresql(transactional_db):
    """Committed data seen by several connections; skips unless the database is PostgreSQL."""

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL row locks: SQLite's IMMEDIATE transactions serialise every writer")
