"""The `mem0` format: memories leaving mem0 or OpenMemory (issue 20).

Three shapes are read, told apart by their content:
- **OpenMemory's backup zip** (`POST /api/v1/backup/export`): `memories.json` holds the user, the
  categories and the memories (`content`, `state`, `metadata`, `category_ids`, `created_at`,
  `updated_at`, `archived_at`, `deleted_at`); `memories.jsonl.gz` holds one memory per line with
  its category names. `memories.json` is read when present, the JSON lines otherwise.
- **mem0's `get_all` answer**: `{"results": [...]}` (API v1.1) or a bare list (v1.0), each
  memory with `id`, `memory`, `user_id`, `agent_id`, `run_id`, `metadata`, `categories`,
  `created_at`, `updated_at`.
- `memories.json` (or its JSON lines, unpacked) on its own.

Mapping: a memory becomes an episode of the target session. Its user id becomes the speaker
(OpenMemory's user id, and name when the backup holds it). Its categories become tags. Its creation
time becomes the event time. Its state maps as `active` → active, `paused` → archived (with a
warning: memconsole has no paused state, and an archived memory is not injected either), `archived`
→ archived, and `deleted` is skipped and counted, never revived. `metadata.importance`, when a
whole number, is kept (clamped like a live write). The rest of `metadata`, with `updated_at`, the
app and mem0's `hash`, is kept as the episode's metadata. `original_source` is `mem0`, or the
OpenMemory app's name.
"""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib
from datetime import datetime
from pathlib import Path
from typing import Any

from django.utils.translation import gettext_noop

from .. import validation
from ..wording import said
from . import fields
from .plan import EpisodeIn, Plan, Target
from .readers import check_size, max_import_bytes, parse_json
from .report import ImportFileError

BACKUP_JSON, BACKUP_LINES = "memories.json", "memories.jsonl.gz"
STATES = {"active": "active", "paused": "archived", "archived": "archived", "deleted": "deleted"}
MAX_METADATA_KEYS = 50


def parse(path: Path, plan: Plan, target: Target, *, session_name: str | None = None, **_options: Any) -> None:
    check_size(path)
    if _looks_like_zip(path):
        records, speakers, categories = _from_backup(path)
    else:
        records, speakers, categories = _from_document(parse_json(path.read_bytes(), "mem0"))
    for index, record in enumerate(records):
        where = f"memories[{index}]"
        keys = target(session_name or _session_of(record), where)
        plan.add_episode(_episode(record, where, keys, plan.imported_at, speakers, categories))


def _looks_like_zip(path: Path) -> bool:
    """A zip by its directory, or by its first bytes (a truncated zip has lost its directory, and is
    a damaged zip to report, not JSON that fails at line 1)."""
    with path.open("rb") as stream:
        head = stream.read(4)
    return head in (b"PK\x03\x04", b"PK\x05\x06") or zipfile.is_zipfile(path)


def _session_of(record: Any) -> str | None:
    """A session only when the file names one (mem0's `run_id`); otherwise the target's is required."""
    run_id = record.get("run_id") if isinstance(record, dict) else None
    return run_id if isinstance(run_id, str) and run_id.strip() else None


# --- the three shapes ---------------------------------------------------------------------------


def _member(archive: zipfile.ZipFile, name: str) -> zipfile.ZipInfo | None:
    for info in archive.infolist():
        if not info.is_dir() and info.filename.rsplit("/", 1)[-1] == name:
            return info
    return None


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """A member's bytes, refused past the import size limit whatever its header claims (a zip bomb)."""
    limit = max_import_bytes()
    if info.file_size > limit:
        raise ImportFileError(f"{info.filename} is {info.file_size:,} bytes unpacked; the limit is {limit:,}")
    with archive.open(info) as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ImportFileError(f"{info.filename} unpacks to more than {limit:,} bytes")
    return data


def _gunzip(data: bytes, name: str) -> bytes:
    limit = max_import_bytes()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            out = stream.read(limit + 1)
    except (OSError, EOFError):
        raise ImportFileError(said(gettext_noop("%(name)s is not a valid gzip file"), name=name)) from None
    if len(out) > limit:
        raise ImportFileError(f"{name} unpacks to more than {limit:,} bytes")
    return out


def _from_backup(path: Path) -> tuple[list[Any], dict[str, tuple[str, str]], dict[str, str]]:
    try:
        with zipfile.ZipFile(path) as archive:
            main, lines = _member(archive, BACKUP_JSON), _member(archive, BACKUP_LINES)
            if main is not None:
                return _from_document(parse_json(_read_member(archive, main), "mem0", BACKUP_JSON))
            if lines is not None:
                return _json_lines(_gunzip(_read_member(archive, lines), BACKUP_LINES)), {}, {}
    except RuntimeError as exc:  # zipfile's word for a member that needs a password
        if "encrypted" not in str(exc):
            raise
        raise ImportFileError(
            said(gettext_noop("the zip file is password-protected; export the mem0 backup without a password"))
        ) from None
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:  # a damaged or odd member too
        raise ImportFileError(
            said(gettext_noop("the zip file is damaged or truncated (%(error)s)"), error=str(exc))
        ) from None
    raise ImportFileError(
        said(
            gettext_noop("not an OpenMemory backup: the zip holds neither %(json)s nor %(lines)s"),
            json=BACKUP_JSON,
            lines=BACKUP_LINES,
        )
    )


def _json_lines(data: bytes) -> list[Any]:
    records = []
    for number, line in enumerate(data.splitlines(), 1):
        if line.strip():
            records.append(parse_json(line, "mem0", f"{BACKUP_LINES} line {number}"))
    return records


def _from_document(doc: Any) -> tuple[list[Any], dict[str, tuple[str, str]], dict[str, str]]:
    """(memory records, speakers by user id, category names by id) of a JSON document."""
    if isinstance(doc, list):
        return doc, {}, {}
    if not isinstance(doc, dict):
        raise ImportFileError(
            said(gettext_noop("not a mem0 export: the file must hold a JSON object or a list of memories"))
        )
    if isinstance(doc.get("results"), list):
        return doc["results"], {}, {}
    if not isinstance(doc.get("memories"), list):
        raise ImportFileError(
            said(gettext_noop("not a mem0 export: no 'results' or 'memories' list")), field="memories"
        )
    speakers: dict[str, tuple[str, str]] = {}
    user = doc.get("user")
    if isinstance(user, dict) and isinstance(user.get("id"), str):
        # OpenMemory: memories name the user's row id; the person is its `user_id` (and `name`).
        speakers[user["id"]] = (str(user.get("user_id") or user["id"]), str(user.get("name") or ""))
    categories = {
        str(c["id"]): str(c.get("name", "")) for c in doc.get("categories") or [] if isinstance(c, dict) and "id" in c
    }
    return doc["memories"], speakers, categories


# --- one memory ---------------------------------------------------------------------------------


def _episode(
    record: Any,
    where: str,
    keys: Any,
    imported_at: datetime,
    speakers: dict[str, tuple[str, str]],
    categories: dict[str, str],
) -> EpisodeIn:
    if not isinstance(record, dict):
        raise ImportFileError(said(gettext_noop("%(where)s: a memory must be an object"), where=where))
    notes: list[fields.Note] = []
    content = record.get("memory", record.get("content", record.get("text")))
    raw_user = record.get("user_id")
    user = fields.text(raw_user, where, "user_id", validation.MAX_SENDER_CHARS, trim=True) if raw_user else ""
    sender_id, sender_name = speakers.get(user, (user, ""))
    meta = record.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise fields.fail(where, "metadata", fields.MUST_BE_OBJECT)
    meta = dict(meta or {})
    names = record.get("categories")
    if names is None and isinstance(record.get("category_ids"), list):
        names = [categories.get(str(c), "") for c in record["category_ids"]]
    tags = [tag for tag in fields.tags(names, where) if tag]
    kept = {key: value for key, value in meta.items() if key != "importance"}
    for extra in ("updated_at", "hash", "app", "agent_id", "archived_at"):
        if record.get(extra):
            kept[f"mem0_{extra}"] = record[extra]
    if len(kept) > MAX_METADATA_KEYS:
        raise fields.fail(where, "metadata", gettext_noop("has more than %(max)s keys"), max=MAX_METADATA_KEYS)
    return EpisodeIn(
        keys=keys,
        where=where,
        old_id=fields.old_id(record.get("id"), where),
        content=fields.content(content, where, "memory"),
        tags=tags,
        importance=fields.importance(meta.get("importance"), where + " metadata", notes),
        timestamp=fields.episode_time(record.get("created_at"), where, notes, imported_at, "created_at"),
        sender_id=sender_id,
        sender_name=fields.text(sender_name, where, "user.name", validation.MAX_SENDER_CHARS, trim=True),
        status=_state(record.get("state"), where, notes),
        superseded_by="",
        original_source=fields.source(record.get("app") or "mem0", where),
        notes=notes,
        metadata=fields.metadata(kept, where),
    )


def _state(value: Any, where: str, notes: list[fields.Note]) -> str:
    if value is None:
        return "active"
    if not isinstance(value, str):
        raise fields.fail(where, "state", fields.MUST_BE_STRING)
    name = value.strip().lower()
    if name == "paused":
        notes.append(
            ("paused", said(gettext_noop("paused in mem0; imported as archived (not injected until restored)")))
        )
    if name in STATES:
        return fields.status(STATES[name], where, notes)
    return fields.status(value, where, notes)  # an unknown state: active, with a warning
