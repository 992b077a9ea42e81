"""Issue 20: an episode's kind and metadata through export, import, erasure, key rotation and the console."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cryptography.fernet import Fernet
from django.urls import reverse

from memconsole.lib import crypto
from memconsole.memory import episodes, exports, imports, sessions
from memconsole.memory.audit import Actor
from memconsole.memory.episode_extras import EpisodeMetadata
from memconsole.memory.erasure import erase_subject
from memconsole.memory.errors import PermissionDenied
from memconsole.memory.models import Episode, Scope
from memconsole.memory.rotation import rotate_keys
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db

ACTOR = Actor.system("tests")


def _export(keys) -> dict:
    return json.loads("".join(exports.stream_scope_export(keys, ACTOR)))


def test_it_exports_and_imports_kind_and_metadata(tmp_path, keys, system):
    episodes.remember(keys, system, "Do you ship to Norway?", kind="question", metadata={"channel": "web"})
    episodes.remember(keys, system, "Plain memory")
    document = _export(keys)
    records = {r["content"]: r for r in document["episodes"]["episodes"]}
    assert records["Do you ship to Norway?"]["kind"] == "question"
    assert records["Do you ship to Norway?"]["metadata"] == {"channel": "web"}
    assert "kind" not in records["Plain memory"] and "metadata" not in records["Plain memory"]

    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    report = imports.import_file(path, "memconsole", bot_uuid="bot-new", isolation="session", actor=ACTOR)
    assert report.episodes == 2
    copied = Episode.objects.get(bot_uuid="bot-new", kind="question")
    assert copied.content == "Do you ship to Norway?" and copied.metadata == {"channel": "web"}
    assert Episode.objects.get(bot_uuid="bot-new", kind="").metadata == {}


def test_it_refuses_an_import_with_bad_metadata_and_writes_nothing(tmp_path, keys, system):
    episodes.remember(keys, system, "Fine", metadata={"ok": True})
    document = _export(keys)
    document["episodes"]["episodes"][0]["metadata"] = ["not", "an", "object"]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(document))
    with pytest.raises(imports.ImportFileError, match="metadata"):
        imports.import_file(path, "memconsole", bot_uuid="bot-new", isolation="session", actor=ACTOR)
    assert not Episode.objects.filter(bot_uuid="bot-new").exists()


def test_it_keeps_a_jw_agents_records_kind_and_metadata(tmp_path):
    path = tmp_path / "memory.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE records (id INTEGER PRIMARY KEY, session_id TEXT, timestamp TEXT, kind TEXT, "
            "content TEXT, metadata TEXT, encrypted INTEGER)"
        )
        db.execute(
            "INSERT INTO records VALUES (1, 's1', '2024-05-01T10:00:00Z', 'preference', 'likes tea', ?, 0)",
            (json.dumps({"source_msg": 7, "tags": ["drink"]}),),
        )
    imports.import_file(path, "jw-agents", bot_uuid="bot-jw", isolation="session", actor=ACTOR)
    episode = Episode.objects.get()
    assert episode.kind == "preference" and episode.metadata == {"source_msg": 7, "tags": ["drink"]}
    assert "preference" in episode.tags  # as before: the kind is also a tag


def test_erasure_removes_a_persons_episodes_with_their_metadata(keys, system):
    episodes.remember(keys, system, "Alice's card ends 1234", sender_id="alice", metadata={"card": "1234"})
    episodes.remember(keys, system, "Bob likes tea", sender_id="bob", metadata={"drink": "tea"})
    erase_subject("alice", bot_uuid="bot-a", actor=ACTOR)
    assert [row.payload for row in EpisodeMetadata.objects.all()] == [{"drink": "tea"}]


def test_key_rotation_reencrypts_metadata(keys, system, settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.MEMCONSOLE_FERNET_KEYS = [old]
    episodes.remember(keys, system, "sealed", metadata={"secret": "s3"})
    settings.MEMCONSOLE_FERNET_KEYS = [new, old]
    report = rotate_keys()
    assert report.tables["episode_metadata"].rotated == 1
    settings.MEMCONSOLE_FERNET_KEYS = [new]
    assert Episode.objects.get().metadata == {"secret": "s3"}


def test_forget_session_refuses_another_bots_actor(keys, system):
    episodes.remember(keys, system, "kept")
    with pytest.raises(PermissionDenied):
        sessions.forget_session(keys, Actor("token", "t", frozenset({"bot-b"})))
    assert Episode.objects.count() == 1


def test_sessions_of_the_health_probe_bot_are_not_listed(system):
    assert sessions.list_sessions(system, "memconsole-health-probe") == []


# --- the console --------------------------------------------------------------------------------


def test_the_console_filters_by_kind_and_shows_kind_and_metadata(viewer_client, keys, system):
    question = episodes.remember(keys, system, "Do you ship to Norway?", kind="question", metadata={"ticket": 7})
    episodes.remember(keys, system, "Yes we ship to Norway", kind="answer")
    scope = Scope.objects.get(scope_key=keys.scope_key)
    listing = viewer_client.get(reverse("console:episodes", args=[scope.pk]), {"kind": "question"})
    page = listing.content.decode()
    assert listing.status_code == 200
    assert "Do you ship to Norway?" in page and "Yes we ship to Norway" not in page

    detail = viewer_client.get(reverse("console:episode_detail", args=[scope.pk, question.episode.episode_id]))
    page = detail.content.decode()
    assert "question" in page and "&quot;ticket&quot;: 7" in page


def test_the_console_refuses_a_kind_that_is_not_one_word(viewer_client, keys, system):
    episodes.remember(keys, system, "anything")
    scope = Scope.objects.get(scope_key=keys.scope_key)
    response = viewer_client.get(reverse("console:episodes", args=[scope.pk]), {"kind": "two words"})
    assert "A kind is one word" in response.content.decode()


def test_other_scopes_keys_do_not_see_a_kind(system):
    mine, theirs = derive_scope("bot-a", "group_1"), derive_scope("bot-a", "group_2")
    episodes.remember(mine, system, "mine", kind="answer")
    assert episodes.list_episodes(theirs, kind="answer").episodes == []
    assert [e.content for e in episodes.list_episodes(mine, kind="answer").episodes] == ["mine"]


def test_metadata_is_sealed_with_its_episodes_identity(keys, system, settings):
    settings.MEMCONSOLE_FERNET_KEYS = [Fernet.generate_key().decode()]
    first = episodes.remember(keys, system, "one", metadata={"n": 1}).episode
    second = episodes.remember(keys, system, "two", metadata={"n": 2}).episode
    a, b = EpisodeMetadata.objects.get(episode=first), EpisodeMetadata.objects.get(episode=second)
    # A sealed value copied into another episode's metadata row no longer opens there.
    EpisodeMetadata.objects.filter(pk=b.pk).update(payload_stored=a.payload_stored)
    with pytest.raises(crypto.RowBindingError):
        _ = EpisodeMetadata.objects.get(pk=b.pk).payload
