"""Fixtures for the memory domain tests: encryption keys and whole-database counts."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from memconsole.lib import vectors
from memconsole.memory.models import (
    AuditEntry,
    Episode,
    EpisodeCounts,
    InjectionSnapshot,
    Profile,
    ProfileVersion,
    Scope,
)


@pytest.fixture
def fernet_keys(settings):
    """Encryption on: MEMCONSOLE_FERNET_KEYS holds one fresh key (returned)."""
    key = Fernet.generate_key().decode()
    settings.MEMCONSOLE_FERNET_KEYS = [key]
    return key


def database_counts() -> dict[str, int]:
    """Row counts of every memory table: an operation refused must leave them all unchanged."""
    return {
        model.__name__: model.objects.count()
        for model in (Scope, Episode, EpisodeCounts, Profile, ProfileVersion, AuditEntry, InjectionSnapshot)
    }


def vector_counts() -> dict[str, int]:
    """{user_key: number of vectors} over every collection of the index."""
    return {user_key: len(vectors.all_ids(user_key)) for user_key in vectors.list_collections().values()}


@pytest.fixture
def counts():
    """A callable returning (database row counts, vector counts) to compare before and after."""

    def snapshot() -> tuple[dict[str, int], dict[str, int]]:
        return database_counts(), vector_counts()

    return snapshot
