"""Hostile values shared by the hostile-input tests: what an attacker or a broken client may send."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

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

HOSTILE_TEXT = [
    "<script>alert('x')</script>",
    '"><img src=x onerror=alert(1)>',
    "javascript:alert(1)",
    "'; DROP TABLE memory_episode; --",
    "' OR '1'='1' --",
    "%",
    "_",
    "%_%",
    "\\",
    "$ne",
    "$or",
    '{"$gt": ""}',
    '{"$ne": null}',
    '{"$where": "sleep(1000)"}',
    "../../../etc/passwd",
    "..\\..\\windows\\win.ini",
    "\u202egnp.exe",
    "zero\u200bwidth",
    "🧠" * 10,
    "a\x00b",
    "\ud800 lone surrogate",
    " ",
    "",
    "x" * 100_000,
    "é" * 8001,
    "\r\n\t",
    "{{ 7*7 }}{% debug %}",
    "${7*7}",
    "__proto__",
    "correction",
]
OPERATOR_OBJECTS: list[Any] = [
    {"$ne": ""},
    {"$gt": ""},
    {"$or": [{"status": "active"}, {"status": "archived"}]},
    {"$in": ["active", "archived", "superseded"]},
    {"$where": "1"},
    ["$ne", ""],
]
ODD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    2**63,
    -(2**63),
    10**100,
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    3.5,
    b"bytes",
    [],
    {},
    [[[[["deep"]]]]],
    (1, 2),
]


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


hostile_text = st.one_of(
    st.sampled_from(HOSTILE_TEXT),
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec=None, exclude_categories=()), min_size=1, max_size=8),
)
anything = st.one_of(
    hostile_text,
    st.sampled_from(OPERATOR_OBJECTS + ODD_VALUES),
    st.integers(),
    st.floats(),
    st.lists(hostile_text, max_size=3),
)
# JSON-able values (what an API body can carry), including NaN/Infinity which json.dumps writes
json_hostile = st.one_of(
    hostile_text.filter(lambda s: len(s) < 20_000),
    st.sampled_from([v for v in OPERATOR_OBJECTS + ODD_VALUES if not isinstance(v, (bytes, tuple))]),
    st.integers(),
    st.floats(),
    st.lists(hostile_text.filter(lambda s: len(s) < 200), max_size=3),
    st.just(nested(40)),
)

MEMORY_MODELS = (Scope, Episode, EpisodeCounts, Profile, ProfileVersion, AuditEntry, InjectionSnapshot)


def rows() -> dict[str, int]:
    """Row counts of every memory table and the number of vectors in every collection."""
    counts = {model.__name__: model.objects.count() for model in MEMORY_MODELS}
    counts.update({f"vectors:{uk}": len(vectors.all_ids(uk)) for uk in vectors.list_collections().values()})
    return counts


def scope_fingerprint(user_key: str, scope_key: str) -> tuple:
    """Everything stored for one scope (rows and vectors), to prove it untouched."""
    episodes = sorted(
        Episode.objects.filter(user_key=user_key).values_list(
            "episode_id", "content_stored", "tags", "importance", "status", "sender_id", "updated_at", "vector_current"
        )
    )
    profiles = sorted(
        Profile.objects.filter(scope_key=scope_key).values_list("type", "sender_id", "version", "payload_stored")
    )
    ids = sorted(vectors.all_ids(user_key)) if user_key in vectors.list_collections().values() else []
    metadata = vectors.get(user_key, ids) if ids else {}
    counts = EpisodeCounts.objects.filter(user_key=user_key).values_list("active", "superseded", "archived").first()
    return episodes, profiles, ids, sorted((k, sorted(v["metadata"].items())) for k, v in metadata.items()), counts
