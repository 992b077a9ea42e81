"""Isolation as a property: whatever runs in one scope never reads or changes another's data.

Hypothesis draws a scope A and a random sequence of operations in it. Before and after, we take a
full fingerprint of everything that belongs to other scopes (episode rows, vectors, counters,
profiles and their versions, snapshots, scope rows, earlier audit entries) and require it unchanged;
every read must return only A's data, and every attempt to reach another scope's episode by id must
be NotFound. Bot isolation shares episodes (user_key) across sessions of the same bot, never profiles,
and never across bots.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memconsole.lib import vectors
from memconsole.memory import episodes, profiles, retrieval
from memconsole.memory.audit import Actor, verify_audit_chain
from memconsole.memory.errors import NotFound, ValidationError
from memconsole.memory.injection import record_injection
from memconsole.memory.models import (
    AuditEntry,
    Episode,
    EpisodeCounts,
    InjectionSnapshot,
    Profile,
    ProfileVersion,
    Scope,
)
from memconsole.memory.scopes import derive_scope

SCOPES = [
    derive_scope("bot-a", "group_1", "session"),
    derive_scope("bot-a", "group_2", "session"),
    derive_scope("bot-a", "group_1", "bot"),  # user_key bot:bot-a ...
    derive_scope("bot-a", "person_9", "bot"),  # ... shared with this one
    derive_scope("bot-b", "group_1", "bot"),  # bot:bot-b
    derive_scope("bot-b", "group_1", "session"),
    derive_scope(None, "group_1", "session"),  # "group_1"
    derive_scope(None, "group_1", "bot"),  # "global"
]
SENTENCES = [
    "The project deadline is Friday",
    "The project deadline is next Monday",
    "I am planning a trip to Beijing next month",
    "My favourite food is dumplings",
    "我喜欢喝绿茶",
    "The team meeting moved to Thursday",
]
SYSTEM = Actor.system("isolation")


def _seed() -> None:
    """Every scope gets the same episodes (so a correction in A has near-identical candidates
    elsewhere) and a profile of each kind."""
    for keys in SCOPES:
        for position, text in enumerate(SENTENCES[:4]):
            episodes.remember(keys, SYSTEM, text, sender_id=f"u{position % 2}", tags=["seed"])
        profiles.update_profile(keys, SYSTEM, "session", notes=f"session of {keys.scope_key}")
        profiles.update_profile(keys, SYSTEM, "speaker", "u1", name="Alice", add_traits=["kind"])
        record_injection(keys, SYSTEM, "trip", sender_id="u1")
    archived = Episode.objects.filter(user_key=SCOPES[5].user_key).first()
    assert archived is not None
    episodes.archive(SCOPES[5], SYSTEM, [archived.episode_id])


def _fingerprint(a) -> dict:
    """Everything that does not belong to scope A, in full."""
    episodes = sorted(
        Episode.objects.exclude(user_key=a.user_key).values_list(
            "episode_id",
            "user_key",
            "scope_key",
            "content_stored",
            "encrypted",
            "tags",
            "tags_text",
            "importance",
            "timestamp",
            "sender_id",
            "sender_name",
            "status",
            "superseded_by",
            "updated_at",
            "vector_current",
            "vector_model",
        )
    )
    collections = {}
    for user_key in set(vectors.list_collections().values()) - {a.user_key}:
        ids = sorted(vectors.all_ids(user_key))
        stored = vectors.get(user_key, ids, include_embeddings=True)
        collections[user_key] = {
            i: (sorted(stored[i]["metadata"].items()), stored[i]["embedding"].tobytes()) for i in ids
        }
    profiles = sorted(
        Profile.objects.exclude(scope_key=a.scope_key).values_list(
            "scope_key", "type", "sender_id", "version", "payload_stored", "updated_at"
        )
    )
    versions = sorted(
        ProfileVersion.objects.exclude(profile__scope_key=a.scope_key).values_list(
            "profile__scope_key", "profile__sender_id", "version", "payload_stored"
        )
    )
    snapshots = sorted(
        InjectionSnapshot.objects.exclude(scope_key=a.scope_key).values_list(
            "snapshot_id", "scope_key", "payload_stored"
        )
    )
    counts = sorted(
        EpisodeCounts.objects.exclude(user_key=a.user_key).values_list(
            "user_key", "active", "superseded", "archived", "last_activity"
        )
    )
    scopes = sorted(
        Scope.objects.exclude(scope_key=a.scope_key, isolation=a.isolation).values_list(
            "scope_key", "isolation", "user_key", "last_seen"
        )
    )
    return {
        "episodes": episodes,
        "vectors": collections,
        "profiles": profiles,
        "versions": versions,
        "snapshots": snapshots,
        "counts": counts,
        "scopes": scopes,
    }


def _audit_rows() -> list[tuple]:
    return list(AuditEntry.objects.order_by("id").values_list("seq", "entry_hash", "payload_stored", "user_key"))


def _pick(index: int) -> Episode | None:
    rows = list(Episode.objects.order_by("id").only("episode_id", "user_key"))
    return rows[index % len(rows)] if rows else None


def _run(a, op) -> None:
    """Run one drawn operation in scope A and check what it read."""
    kind, arg, extra = op
    if kind == "remember":
        tags = [extra] if extra else []
        episodes.remember(a, SYSTEM, arg, tags=tags, sender_id="u1")
    elif kind == "recall":
        statuses = ["active", "superseded", "archived"] if extra else None
        for hit in retrieval.recall(a, arg, top_k=50, statuses=statuses):
            assert hit.episode.user_key == a.user_key
    elif kind == "list":
        page = episodes.list_episodes(a, limit=50, statuses=None)
        assert all(e.user_key == a.user_key for e in page.episodes)
    elif kind == "inject":
        injection = record_injection(a, SYSTEM, arg, sender_id="u1")
        assert all(h.episode.user_key == a.user_key for h in injection.hits)
        assert injection.snapshot.scope_key == a.scope_key
    elif kind in ("get", "archive", "restore", "delete"):
        target = _pick(arg)
        if target is None:
            return
        mine = target.user_key == a.user_key
        call = {
            "get": lambda: episodes.get_episode(a, target.episode_id),
            "archive": lambda: episodes.archive(a, SYSTEM, [target.episode_id]),
            "restore": lambda: episodes.restore(a, SYSTEM, [target.episode_id]),
            "delete": lambda: episodes.delete(a, SYSTEM, [target.episode_id]),
        }[kind]
        if mine:
            call()
        else:
            with pytest.raises(NotFound):
                call()
    elif kind == "profile":
        sender = extra or ""
        profile_type = "speaker" if sender else "session"
        profiles.update_profile(a, SYSTEM, profile_type, sender, add_traits=[arg[:50]], notes=arg)
        data, _ = profiles.get_profile(a, profile_type, sender)
        assert arg[:50].strip() in data["traits"]
    elif kind == "replace":
        profiles.replace_profile(a, SYSTEM, "speaker", "u1", {"name": arg[:50], "notes": "replaced"})
    elif kind == "rollback":
        with contextlib.suppress(NotFound):
            profiles.rollback_profile(a, SYSTEM, "speaker", "u1", arg)
    else:  # pragma: no cover
        raise AssertionError(kind)


text = st.one_of(
    st.sampled_from(SENTENCES), st.text(min_size=1, max_size=40).filter(lambda s: s.strip() and "\x00" not in s)
)
operation = st.one_of(
    st.tuples(
        st.just("remember"), text, st.sampled_from([None, "correction", "fact-update", "clarification", "travel"])
    ),
    st.tuples(st.just("recall"), text, st.booleans()),
    st.tuples(st.just("list"), st.none(), st.none()),
    st.tuples(st.just("inject"), text, st.none()),
    st.tuples(st.sampled_from(["get", "archive", "restore", "delete"]), st.integers(0, 200), st.none()),
    st.tuples(st.just("profile"), text, st.sampled_from([None, "u1", "u2"])),
    st.tuples(st.just("replace"), text, st.none()),
    st.tuples(st.just("rollback"), st.integers(1, 4), st.none()),
)


@pytest.mark.django_db
@settings(
    max_examples=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scope_index=st.sampled_from(range(len(SCOPES))), operations=st.lists(operation, min_size=1, max_size=6))
def test_it_never_reads_or_changes_another_scope(scope_index, operations):
    if not Episode.objects.exists():
        _seed()
    a = SCOPES[scope_index]
    before = _fingerprint(a)
    audit_before = _audit_rows()

    for op in operations:
        # drawn text can be invalid (e.g. a tag with a comma); refused input changes nothing
        with contextlib.suppress(ValidationError):
            _run(a, op)

    assert _fingerprint(a) == before
    audit_after = _audit_rows()
    assert audit_after[: len(audit_before)] == audit_before  # earlier entries untouched
    assert all(row[3] == a.user_key for row in audit_after[len(audit_before) :])  # new ones are A's
    assert verify_audit_chain().ok


@pytest.mark.django_db
def test_it_shares_episodes_across_sessions_of_one_bot_in_bot_isolation_only():
    group, private, other_bot = SCOPES[2], SCOPES[3], SCOPES[4]
    session_scoped = SCOPES[0]
    made = episodes.remember(group, SYSTEM, "I am planning a trip to Beijing next month").episode
    profiles.update_profile(group, SYSTEM, "session", notes="group notes")

    # the same bot's other session sees the episode, and can archive it (shared memory) ...
    assert [h.episode.episode_id for h in retrieval.recall(private, "travel plans")] == [made.episode_id]
    assert episodes.get_episode(private, made.episode_id).pk == made.pk
    # ... but not the profile of another session
    assert profiles.get_profile(private, "session")[1] is None
    # another bot, and the same bot's session-isolated scopes, see nothing
    for keys in (other_bot, session_scoped):
        assert retrieval.recall(keys, "travel plans") == []
        with pytest.raises(NotFound):
            episodes.get_episode(keys, made.episode_id)
    episodes.archive(private, SYSTEM, [made.episode_id])
    made.refresh_from_db()
    assert made.status == "archived"
    assert AuditEntry.objects.order_by("-id").first().scope_key == group.scope_key  # where the episode lives


@pytest.mark.django_db
def test_it_refuses_to_search_a_collection_that_names_another_scope_as_owner():
    """If a scope's collection ever held another scope's metadata (a collection copied or renamed
    by hand), recall refuses to search it instead of trusting whatever vectors it holds."""
    a, b = SCOPES[0], SCOPES[1]
    episodes.remember(a, SYSTEM, "I am planning a trip to Beijing next month")
    episodes.remember(b, SYSTEM, "The blue door is the back entrance")
    collection = vectors.get_client().get_collection(vectors.collection_name(a.user_key))
    collection.modify(metadata={**collection.metadata, "user_key": b.user_key})

    with pytest.raises(vectors.VectorIndexError, match="belongs to"):
        retrieval.recall(a, "travel plans")
    assert [h.episode.content for h in retrieval.recall(b, "the door")] == ["The blue door is the back entrance"]
