"""Imports from the systems people leave (issue 20): mem0 / OpenMemory and Letta. The files are
written here from the formats' public documentation and code: OpenMemory's backup router
(`openmemory/api/app/routers/backup.py`: a zip of `memories.json` and `memories.jsonl.gz`), mem0's
`get_all` answer, a Letta AgentFile (`agents` + `blocks`) and Letta's archival export."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from memconsole.lib import vectors
from memconsole.memory import imports, retrieval
from memconsole.memory.audit import Actor
from memconsole.memory.imports import ImportFileError
from memconsole.memory.models import AuditEntry, Episode, Profile
from memconsole.memory.profiles import get_profile
from memconsole.memory.scopes import derive_scope

pytestmark = pytest.mark.django_db

ACTOR = Actor.system("import-tests")
KEYS = derive_scope("bot-new", "person_alice")

OPENMEMORY: dict[str, Any] = {
    "user": {"id": "6c1f-row", "user_id": "alice", "name": "Alice Liddell", "email": None, "metadata": {}},
    "apps": [{"id": "app-1", "name": "claude-desktop"}],
    "categories": [
        {"id": "cat-food", "name": "food", "description": None},
        {"id": "cat-travel", "name": "travel", "description": None},
    ],
    "memories": [
        {
            "id": "m-1",
            "user_id": "6c1f-row",
            "app_id": "app-1",
            "content": "Prefers oat milk in coffee",
            "metadata": {"importance": 4, "source_app": "claude"},
            "state": "active",
            "created_at": "2025-03-01T08:00:00+00:00",
            "updated_at": "2025-03-02T08:00:00+00:00",
            "archived_at": None,
            "deleted_at": None,
            "category_ids": ["cat-food"],
        },
        {
            "id": "m-2",
            "user_id": "6c1f-row",
            "app_id": "app-1",
            "content": "Is planning a trip to Lisbon",
            "metadata": {},
            "state": "paused",
            "created_at": "2025-03-05T08:00:00+00:00",
            "updated_at": None,
            "category_ids": ["cat-travel"],
        },
        {
            "id": "m-3",
            "user_id": "6c1f-row",
            "content": "Used to live in Porto",
            "metadata": {},
            "state": "archived",
            "created_at": "2024-01-01T08:00:00+00:00",
            "category_ids": [],
        },
        {
            "id": "m-4",
            "user_id": "6c1f-row",
            "content": "Old phone number 555-0100",
            "metadata": {},
            "state": "deleted",
            "created_at": "2024-01-01T08:00:00+00:00",
            "deleted_at": "2024-06-01T08:00:00+00:00",
            "category_ids": [],
        },
    ],
    "memory_categories": [{"memory_id": "m-1", "category_id": "cat-food"}],
    "status_history": [],
    "access_controls": [],
    "export_meta": {"version": "1", "generated_at": "2025-04-01T00:00:00+00:00"},
}


def backup_zip(path: Path, *, with_json: bool = True) -> Path:
    lines = io.BytesIO()
    with gzip.GzipFile(fileobj=lines, mode="wb") as gz:
        for memory in OPENMEMORY["memories"]:
            record = {
                "id": memory["id"],
                "content": memory["content"],
                "metadata": memory["metadata"],
                "created_at": memory["created_at"],
                "updated_at": memory.get("updated_at"),
                "state": memory["state"],
                "app": "claude-desktop",
                "categories": ["food"] if memory["id"] == "m-1" else [],
            }
            gz.write((json.dumps(record) + "\n").encode())
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        if with_json:
            archive.writestr("memories.json", json.dumps(OPENMEMORY, indent=2))
        archive.writestr("memories.jsonl.gz", lines.getvalue())
    return path


def stored() -> dict[str, Episode]:
    return {e.imported_episode_id: e for e in Episode.objects.filter(user_key=KEYS.user_key)}


def test_an_openmemory_backup_comes_across_with_states_speakers_and_categories(tmp_path):
    report = imports.import_file(
        backup_zip(tmp_path / "memories_export_alice.zip"),
        "mem0",
        bot_uuid="bot-new",
        session_name="person_alice",
        actor=ACTOR,
    )
    rows = stored()
    assert set(rows) == {"m-1", "m-2", "m-3"}  # the deleted memory is not revived
    assert report.skipped_deleted == 1
    milk = rows["m-1"]
    assert (milk.content, milk.sender_id, milk.sender_name) == ("Prefers oat milk in coffee", "alice", "Alice Liddell")
    assert milk.tags == ["food"] and milk.importance == 4 and milk.status == "active"
    assert milk.timestamp == datetime(2025, 3, 1, 8, tzinfo=UTC)
    assert milk.metadata["source_app"] == "claude" and milk.metadata["mem0_updated_at"].startswith("2025-03-02")
    assert milk.original_source == "mem0"
    assert rows["m-2"].status == "archived"  # paused: not injected, with a warning saying so
    assert any("paused in mem0" in str(warning) for warning in report.warnings)
    assert rows["m-3"].status == "archived"
    hits = retrieval.recall(KEYS, "what does Alice put in her coffee?", top_k=1)
    assert [hit.episode.episode_id for hit in hits] == [milk.episode_id]
    assert AuditEntry.objects.filter(operation="import", user_key=KEYS.user_key).count() == 1


def test_the_json_lines_alone_and_a_second_run_add_nothing_twice(tmp_path):
    archive = backup_zip(tmp_path / "lines_only.zip", with_json=False)
    first = imports.import_file(archive, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    assert first.episodes == 3 and stored()["m-1"].tags == ["food"]
    again = imports.import_file(archive, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    assert again.episodes == 0 and again.conflict_count == 3


def test_mem0_get_all_answers_both_versions_and_a_dry_run(tmp_path):
    results = [
        {
            "id": "a1",
            "memory": "Likes sci-fi movies",
            "hash": "9f86d08",
            "metadata": None,
            "categories": ["entertainment"],
            "created_at": "2025-02-01T10:00:00-08:00",
            "updated_at": None,
            "user_id": "bob",
        }
    ]
    v11 = tmp_path / "get_all.json"
    v11.write_text(json.dumps({"results": results, "relations": []}))
    dry = imports.import_file(v11, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR, dry_run=True)
    assert dry.episodes == 1 and not Episode.objects.exists()
    imports.import_file(v11, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    movie = stored()["a1"]
    assert (movie.sender_id, movie.tags, movie.metadata["mem0_hash"]) == ("bob", ["entertainment"], "9f86d08")
    assert movie.timestamp == datetime(2025, 2, 1, 18, tzinfo=UTC)
    bare = tmp_path / "v10.json"
    bare.write_text(json.dumps([{**results[0], "id": "a2", "memory": "Has a dog named Rex"}]))
    imports.import_file(bare, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    assert stored()["a2"].content == "Has a dog named Rex"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"results": [{"id": "x", "memory": 42}]}, "memories[0], field 'memory': must be a string"),
        (
            {"results": [{"id": "x", "memory": "ok", "metadata": "no"}]},
            "memories[0], field 'metadata': must be an object",
        ),
        ({"results": [{"id": "x", "memory": "ok", "state": 3}]}, "memories[0], field 'state': must be a string"),
        ({"colour": "red"}, "not a mem0 export"),
    ],
)
def test_a_bad_mem0_file_is_refused_whole_with_its_place(tmp_path, payload, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(ImportFileError) as refused:
        imports.import_file(path, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    assert message in str(refused.value)
    assert not Episode.objects.exists() and not vectors.list_collections()


def test_a_zip_bomb_or_a_zip_without_memories_is_refused(tmp_path, settings):
    settings.MEMCONSOLE_IMPORT_MAX_BYTES = 50_000
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("memories.json", "[" + " " * 200_000 + "]")
    with pytest.raises(ImportFileError, match=r"unpacked; the limit is"):
        imports.import_file(bomb, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    empty = tmp_path / "other.zip"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(ImportFileError, match=r"neither memories\.json nor memories\.jsonl\.gz"):
        imports.import_file(empty, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)


@pytest.mark.parametrize("cut", [12, 60, -30])
def test_a_damaged_zip_is_reported_as_a_damaged_zip(tmp_path, cut):
    whole = backup_zip(tmp_path / "backup.zip").read_bytes()
    damaged = tmp_path / "damaged.zip"
    damaged.write_bytes(whole[:cut])  # truncated: the directory is gone
    with pytest.raises(ImportFileError, match=r"^the zip file is damaged or truncated"):
        imports.import_file(damaged, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    garbage = tmp_path / "garbage.zip"
    garbage.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(ImportFileError, match=r"^the zip file is damaged or truncated"):
        imports.import_file(garbage, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    assert not Episode.objects.exists()


def test_a_password_protected_zip_or_a_folder_is_refused_in_plain_words(tmp_path):
    plain = backup_zip(tmp_path / "backup.zip").read_bytes()
    locked = bytearray(plain)  # every member marked encrypted, as in a zip made with a password
    for signature, flags in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # local headers, central directory
        start = plain.find(signature)
        while start >= 0:
            locked[start + flags] |= 1
            start = plain.find(signature, start + 1)
    protected = tmp_path / "protected.zip"
    protected.write_bytes(bytes(locked))
    with pytest.raises(ImportFileError, match=r"^the zip file is password-protected"):
        imports.import_file(protected, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    with pytest.raises(ImportFileError, match=r"is a folder, not a file$"):
        imports.import_file(tmp_path, "mem0", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    assert not Episode.objects.exists()


AGENT_FILE = {
    "agents": [
        {
            "name": "memgpt_agent",
            "block_ids": ["block-0", "block-1"],
            "messages": [],
            "passages": [
                {"id": "passage-9", "text": "Chad's advisor is Prof. Gonzalez", "created_at": "2025-11-20T10:00:00Z"}
            ],
        }
    ],
    "blocks": [
        {"id": "block-1", "label": "persona", "value": "I am Sam. I am curious and empathetic.", "limit": 20000},
        {
            "id": "block-0",
            "label": "human",
            "value": "\nFirst name: Chad\nOccupation: Computer science PhD student at UC Berkeley\n",
            "limit": 20000,
        },
    ],
    "groups": [],
    "files": [],
    "sources": [],
    "tools": [],
}


def test_a_letta_agent_file_brings_its_core_memory_and_passages(tmp_path):
    path = tmp_path / "memgpt_agent.af"
    path.write_text(json.dumps(json.dumps(AGENT_FILE)))  # written twice over, as some .af files are
    report = imports.import_file(path, "letta", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    assert report.profiles == 1 and report.episodes == 1
    profile, _ = get_profile(KEYS, "session")
    assert profile["notes"].startswith("human: First name: Chad\nOccupation: Computer science PhD student")
    assert profile["notes"].endswith("persona: I am Sam. I am curious and empathetic.")
    passage = stored()["passage-9"]
    assert passage.content == "Chad's advisor is Prof. Gonzalez" and passage.original_source == "letta"
    assert passage.timestamp == datetime(2025, 11, 20, 10, tzinfo=UTC)


def test_letta_archival_export_and_its_refusals(tmp_path):
    passages = tmp_path / "agent-123_passages.json"
    passages.write_text(
        json.dumps(
            [
                {
                    "id": "p1",
                    "text": "Met Dana at the conference",
                    "created_at": "2025-10-01T12:00:00Z",
                    "tags": ["work"],
                },
                {"id": "p2", "text": "Dana works on compilers", "created_at": "2025-10-02T12:00:00Z"},
            ]
        )
    )
    call_command(
        "import_memory",
        str(passages),
        "--format",
        "letta",
        "--bot-uuid",
        "bot-new",
        "--isolation",
        "session",
        "--session-name",
        "person_alice",
    )
    assert stored()["p1"].tags == ["work"] and stored()["p2"].content == "Dana works on compilers"
    assert not Profile.objects.exists()  # an archival export holds no core memory
    with pytest.raises(ImportFileError, match="no session name"):
        imports.import_file(passages, "letta", bot_uuid="bot-new", actor=ACTOR)
    nothing = tmp_path / "nothing.json"
    nothing.write_text(json.dumps({"agents": []}))
    with pytest.raises(ImportFileError, match="no agents, memory blocks or archival passages"):
        imports.import_file(nothing, "letta", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "p3", "text": ""}]))
    with pytest.raises(ImportFileError, match=r"passages\[0\], field 'text': is missing or empty"):
        imports.import_file(bad, "letta", bot_uuid="bot-new", session_name="person_alice", actor=ACTOR)
