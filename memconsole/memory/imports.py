"""Imports (issue 5): bring memory from a file into target scopes, all or nothing.

Formats (`FORMATS`):
- `memconsole`: our own scope export (exports.py). Profiles, episodes; the audit envelope of
  another installation is not imported (this installation's chain records the import).
- `langbot`: a LangBot LongTermMemory export: the episodes envelope `{version: 1, exported_at,
  scope_key, user_key, collection_id, statuses, episodes[], count}` and/or the profiles envelope
  `{version: 1, ..., profiles[{type, scope_key, sender_id?, profile{...}}], count}`.
- `jw-agents`: a jw-agents `memory.db` (SQLite, table `records`); each `session_id` becomes its own
  scope, each record an episode tagged with its kind; `encrypted=1` rows are opened with the
  given Fernet key (or JW_MEMORY_KEY).
- `bot-memory`: an agent-memory `memory.db` (SQLite, tables `facts` and `messages`); the agent
  `agent_id == bot_uuid` is imported: facts into `session_name`, messages (optional) into the
  scope of their room.

Rules shared by every format: keys are re-derived for the target (`bot_uuid`, the session and
`isolation`), whatever the file says; the old id is kept as `imported_episode_id` and new ids are
made; statuses missing or unknown read as active; importance may be an int or a string "1"-"5"
(missing: 2); tags a list or a comma-joined string; `superseded_by` is mapped to the new id of the
episode it names. An episode whose old id is already in the target scope (imported before, or the
scope's own episode) is a *conflict* and is skipped, so re-running an import adds nothing twice; a
profile that already exists gets the imported one as a new version (history kept), also reported
as a conflict.

The whole file is read and checked before anything is written; a bad file is rejected with a
`ImportFileError` saying what and where (line and column for JSON syntax, the record's index or
row id and the field otherwise), and nothing is written. Then one transaction writes the rows,
the profiles with their versions, the counters and one audit entry per scope. Vectors follow
after the commit, in batches; if the index fails, the rows stay marked not current and
`manage.py reindex` repairs them (the report says how many).

Limits: files over `MEMCONSOLE_IMPORT_MAX_BYTES` (default 64 MiB) are refused before they are
read; JSON nested deeper than Python's recursion limit, NaN/Infinity literals and over-long
numbers are refused; `MAX_RECORDS` records at most per file. A long import holds the database's write lock for
its transaction (SQLite), so large imports are best run off-peak.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memconsole.lib import crypto, embeddings, vectors

from . import audit, operations
from .audit import Actor
from .errors import ValidationError
from .exports import AUDIT_FORMAT_MARKER, FORMAT_MARKER
from .models import (
    PROFILE_SESSION,
    PROFILE_SPEAKER,
    STATUS_ACTIVE,
    STATUSES,
    Episode,
    Profile,
)
from .scopes import ScopeKeys, derive_scope, register_scope

FORMATS = ("memconsole", "langbot", "jw-agents", "bot-memory")
MAX_RECORDS = 2_000_000
WRITE_BATCH = 500
INDEX_BATCH = 256
MAX_CONFLICTS_LISTED = 100
SQLITE_HEADER = b"SQLite format 3\x00"
JW_KINDS = ("question", "answer", "fact_recalled", "preference", "objection")

Progress = Callable[[str, int, int], None]


class ImportFileError(ValidationError):
    """The file is malformed, truncated, too large or of another format. Nothing was written."""


def max_import_bytes() -> int:
    return settings.MEMCONSOLE_IMPORT_MAX_BYTES


# --- the report ---------------------------------------------------------------------------------


@dataclass
class ImportReport:
    format: str
    dry_run: bool
    scopes: dict[str, dict[str, Any]] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    episodes: int = 0
    profiles: int = 0
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    conflict_count: int = 0
    indexed: int = 0
    not_indexed: int = 0
    file_name: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "file_name": self.file_name,
            "dry_run": self.dry_run,
            "episodes": self.episodes,
            "profiles": self.profiles,
            "statuses": dict(self.statuses),
            "scopes": [dict(scope) for scope in self.scopes.values()],
            "conflict_count": self.conflict_count,
            "conflicts": list(self.conflicts),
            "indexed": self.indexed,
            "not_indexed": self.not_indexed,
        }

    def summary(self) -> str:
        verb = "would import" if self.dry_run else "imported"
        text = (
            f"{verb} {self.episodes} episodes and {self.profiles} profiles into {len(self.scopes)} scope(s)"
            f" ({', '.join(f'{k} {v}' for k, v in sorted(self.statuses.items())) or 'no episodes'})"
            f", {self.conflict_count} conflict(s)"
        )
        if not self.dry_run and self.not_indexed:
            text += f"; {self.not_indexed} episodes not indexed yet (run `manage.py reindex`)"
        return text

    def _scope(self, keys: ScopeKeys) -> dict[str, Any]:
        return self.scopes.setdefault(
            keys.scope_key,
            {
                "scope_key": keys.scope_key,
                "user_key": keys.user_key,
                "bot_uuid": keys.bot_uuid,
                "session_name": keys.session_name,
                "isolation": keys.isolation,
                "episodes": 0,
                "profiles": 0,
                "statuses": {},
                "conflicts": 0,
            },
        )

    def _conflict(self, keys: ScopeKeys, kind: str, where: str, reason: str, old_id: str = "") -> None:
        self.conflict_count += 1
        self._scope(keys)["conflicts"] += 1
        if len(self.conflicts) < MAX_CONFLICTS_LISTED:
            self.conflicts.append(
                {"scope_key": keys.scope_key, "kind": kind, "where": where, "id": old_id, "reason": reason}
            )


# --- what the parsers produce -------------------------------------------------------------------


@dataclass(slots=True)
class EpisodeIn:
    keys: ScopeKeys
    where: str
    old_id: str
    content: str
    tags: list[str]
    importance: int
    timestamp: datetime | None
    sender_id: str
    sender_name: str
    status: str
    superseded_by: str
    new_id: str = ""


@dataclass(slots=True)
class ProfileIn:
    keys: ScopeKeys
    where: str
    type: str
    sender_id: str
    data: dict[str, Any]
    updated_at: datetime | None


@dataclass
class Plan:
    episodes: list[EpisodeIn] = field(default_factory=list)
    profiles: list[ProfileIn] = field(default_factory=list)
    scopes: dict[tuple[str, str], ScopeKeys] = field(default_factory=dict)

    def keys_for(self, bot_uuid: str, session_name: Any, isolation: str, where: str) -> ScopeKeys:
        if not isinstance(session_name, str) or not session_name.strip():
            raise ImportFileError(f"{where}: no session name (pass a target session name)", field="session_name")
        try:
            keys = derive_scope(bot_uuid, session_name.strip(), isolation)
        except ValidationError as exc:
            raise ImportFileError(f"{where}: {exc.message}", field=exc.field) from None
        self.scopes.setdefault((keys.scope_key, keys.isolation), keys)
        return keys

    def add_episode(self, episode: EpisodeIn) -> None:
        if len(self.episodes) >= MAX_RECORDS:
            raise ImportFileError(f"{episode.where}: more than {MAX_RECORDS} records in one file; split it")
        self.episodes.append(episode)


# --- field parsers ------------------------------------------------------------------------------


def _fail(where: str, name: str, message: str) -> ImportFileError:
    return ImportFileError(f"{where}, field '{name}': {message}", field=name)


def _str(value: Any, where: str, name: str, max_chars: int, required: bool = False) -> str:
    if value is None:
        value = ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _fail(where, name, "must be a string")
    value = str(value)
    if "\x00" in value:
        raise _fail(where, name, "contains a NUL character")
    if not operations._is_utf8(value):
        raise _fail(where, name, "is not valid text (it holds a lone surrogate)")
    if required and not value.strip():
        raise _fail(where, name, "is missing or empty")
    if len(value) > max_chars:
        raise _fail(where, name, f"is longer than {max_chars} characters")
    return value


def _importance(value: Any, where: str) -> int:
    if value is None or value == "":
        return 2
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= 10:
        # isdecimal, not isdigit: int() refuses superscripts such as "²"; the length cap keeps
        # int() away from thousands of digits.
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise _fail(where, "importance", f"must be a whole number from 1 to 5, not {value!r:.40}")
    return value


def _tags(value: Any, where: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list):
        items = value
        for item in items:
            if not isinstance(item, str):
                raise _fail(where, "tags", "must be strings")
            if "," in item:
                raise _fail(where, "tags", f"a tag may not contain a comma ({item!r:.40})")
    else:
        raise _fail(where, "tags", "must be a list of strings or a comma-joined string")
    out: list[str] = []
    for item in items:
        tag = item.strip()
        if "\x00" in tag:
            raise _fail(where, "tags", "contains a NUL character")
        if not operations._is_utf8(tag):
            raise _fail(where, "tags", "is not valid text (it holds a lone surrogate)")
        if len(tag) > operations.MAX_TAG_CHARS:
            raise _fail(where, "tags", f"a tag is longer than {operations.MAX_TAG_CHARS} characters")
        if tag and tag not in out:
            out.append(tag)
    if len(out) > operations.MAX_TAGS:
        raise _fail(where, "tags", f"at most {operations.MAX_TAGS} tags")
    return out


def _status(value: Any) -> str:
    return value if isinstance(value, str) and value in STATUSES else STATUS_ACTIVE


def _time(value: Any, where: str, name: str = "timestamp") -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise _fail(where, name, "must be an ISO-8601 date and time")
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value  # epoch milliseconds or seconds
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise _fail(where, name, f"{value!r:.40} is not a valid time") from None
    if not isinstance(value, str) or len(value) > 64:
        raise _fail(where, name, "must be an ISO-8601 date and time")
    text = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return _time(float(text), where, name)
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1) if "T" not in text else text)
    except ValueError:
        raise _fail(where, name, f"{value!r:.40} is not an ISO-8601 date and time") from None
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    try:
        parsed.astimezone(UTC)  # the database stores UTC: 9999-12-31T23:00-05:00 has no UTC time
    except (OverflowError, ValueError):
        raise _fail(where, name, f"{value!r:.40} is out of range") from None
    return parsed


def _old_id(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _fail(where, "id", "must be a string")
    value = str(value).strip()
    if "\x00" in value:
        raise _fail(where, "id", "contains a NUL character")
    if len(value) > 255:
        raise _fail(where, "id", "is longer than 255 characters")
    if not operations._is_utf8(value):
        raise _fail(where, "id", "is not valid text (it holds a lone surrogate)")
    return value


def _profile_data(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "profile", "must be an object")
    try:
        return operations.validate_profile_data(value)
    except ValidationError as exc:
        raise _fail(where, f"profile.{exc.field or 'profile'}", exc.message) from None


# --- reading files ------------------------------------------------------------------------------


def _check_size(path: Path) -> int:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ImportFileError(f"cannot read the file: {exc.strerror}") from None
    if size == 0:
        raise ImportFileError("the file is empty")
    if size > max_import_bytes():
        raise ImportFileError(
            f"the file is {size:,} bytes; the limit is {max_import_bytes():,} (MEMCONSOLE_IMPORT_MAX_BYTES)"
        )
    return size


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _load_json(path: Path, fmt: str) -> Any:
    _check_size(path)
    raw = path.read_bytes()
    if raw.startswith(SQLITE_HEADER):
        raise ImportFileError(
            f"this is a SQLite database, not a {fmt} JSON export (use the jw-agents or bot-memory format)"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ImportFileError(f"line {line}: the file is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise ImportFileError("the file is empty")
    del raw
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        at_end = exc.pos >= len(text.rstrip())
        what = "the file is truncated" if at_end else "the file is not valid JSON"
        raise ImportFileError(f"line {exc.lineno}, column {exc.colno}: {what} ({exc.msg})") from None
    except RecursionError:
        # json's C parser guards its recursion: a bracket bomb stops here, at Python's recursion limit,
        # instead of exhausting the stack. Nothing memconsole reads nests more than a few levels.
        raise ImportFileError("the JSON is nested too deeply") from None
    except ValueError as exc:  # NaN/Infinity, or an integer with too many digits
        raise ImportFileError(f"the file holds a value that is not allowed: {exc}") from None


def _session_of(scope_key: Any) -> str | None:
    """The session name inside a LangBot/memconsole scope_key ('<bot_uuid>:<session>' or '<session>')."""
    if not isinstance(scope_key, str) or not scope_key.strip():
        return None
    return scope_key.split(":", 1)[1] if ":" in scope_key else scope_key


def _list_field(envelope: dict, name: str, where: str) -> list:
    value = envelope.get(name)
    if not isinstance(value, list):
        place = f"{where.rstrip('.')}: " if where else ""
        raise ImportFileError(f"{place}'{name}' must be a list", field=name)
    return value


def _json_episode(record: Any, where: str, keys: ScopeKeys) -> EpisodeIn:
    if not isinstance(record, dict):
        raise ImportFileError(f"{where}: an episode must be an object")
    content = record.get("content")
    if content is None:
        content = record.get("text")
    return EpisodeIn(
        keys=keys,
        where=where,
        old_id=_old_id(record.get("id", record.get("episode_id")), where),
        content=_str(content, where, "content", operations.max_content_chars(), required=True),
        tags=_tags(record.get("tags"), where),
        importance=_importance(record.get("importance"), where),
        timestamp=_time(record.get("timestamp"), where),
        sender_id=_str(record.get("sender_id"), where, "sender_id", operations.MAX_SENDER_CHARS).strip(),
        sender_name=_str(record.get("sender_name"), where, "sender_name", operations.MAX_SENDER_CHARS).strip(),
        status=_status(record.get("status")),
        superseded_by=_old_id(record.get("superseded_by"), where) if record.get("superseded_by") else "",
    )


def _json_profile(record: Any, where: str, keys: ScopeKeys) -> ProfileIn:
    if not isinstance(record, dict):
        raise ImportFileError(f"{where}: a profile must be an object")
    profile_type = record.get("type")
    if profile_type not in (PROFILE_SESSION, PROFILE_SPEAKER):
        raise _fail(where, "type", "must be 'session' or 'speaker'")
    sender_id = ""
    if profile_type == PROFILE_SPEAKER:
        sender_id = _str(
            record.get("sender_id"), where, "sender_id", operations.MAX_SENDER_CHARS, required=True
        ).strip()
    profile = record.get("profile")
    updated_at = _time(profile.get("updated_at"), where, "profile.updated_at") if isinstance(profile, dict) else None
    return ProfileIn(keys, where, profile_type, sender_id, _profile_data(profile, where), updated_at)


def _episodes_envelope(plan: Plan, envelope: Any, where: str, target: Callable[[str], ScopeKeys]) -> None:
    if not isinstance(envelope, dict):
        raise ImportFileError(f"{where.rstrip('.') or 'the file'}: must be an object")
    keys = target(envelope.get("scope_key"))
    for index, record in enumerate(_list_field(envelope, "episodes", where)):
        plan.add_episode(_json_episode(record, f"{where}episodes[{index}]", keys))


def _profiles_envelope(plan: Plan, envelope: Any, where: str, target: Callable[[str], ScopeKeys]) -> None:
    if not isinstance(envelope, dict):
        raise ImportFileError(f"{where.rstrip('.') or 'the file'}: must be an object")
    for index, record in enumerate(_list_field(envelope, "profiles", where)):
        record_where = f"{where}profiles[{index}]"
        scope_key = record.get("scope_key") if isinstance(record, dict) else None
        keys = target(scope_key or envelope.get("scope_key"))
        plan.profiles.append(_json_profile(record, record_where, keys))


def _check_version(envelope: dict, where: str) -> None:
    version = envelope.get("version", 1)
    if version != 1:
        raise ImportFileError(f"{where}'version' is {version!r:.20}; only version 1 is understood", field="version")


def parse_memconsole(path: Path, plan: Plan, target: Callable[[Any, str], ScopeKeys]) -> None:
    doc = _load_json(path, "memconsole")
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_MARKER:
        if isinstance(doc, dict) and doc.get("format") == AUDIT_FORMAT_MARKER:
            raise ImportFileError("this is an audit log export; audit logs are not imported", field="format")
        if isinstance(doc, dict) and isinstance(doc.get("episodes"), list):
            raise ImportFileError(
                "this looks like a LangBot export, not a memconsole one (use the langbot format)", field="format"
            )
        raise ImportFileError(f"not a memconsole export: 'format' must be {FORMAT_MARKER!r}", field="format")
    if doc.get("format_version", 1) != 1:
        raise ImportFileError(
            f"format_version {doc.get('format_version')!r:.20} is not understood", field="format_version"
        )
    scope = doc.get("scope") if isinstance(doc.get("scope"), dict) else {}
    session = scope.get("session_name") or _session_of(scope.get("scope_key"))

    def keys_for(_scope_key: Any, where: str) -> ScopeKeys:
        return target(session, where)

    for name in ("profiles", "episodes"):
        envelope = doc.get(name)
        if envelope is None:
            continue
        if not isinstance(envelope, dict):
            raise ImportFileError(f"'{name}' must be an envelope object", field=name)
        _check_version(envelope, f"{name}: ")
        if name == "profiles":
            _profiles_envelope(plan, envelope, "profiles.", lambda sk: keys_for(sk, "profiles"))
        else:
            _episodes_envelope(plan, envelope, "episodes.", lambda sk: keys_for(sk, "episodes"))


def parse_langbot(path: Path, plan: Plan, target: Callable[[Any, str], ScopeKeys]) -> None:
    doc = _load_json(path, "langbot")
    if not isinstance(doc, dict):
        raise ImportFileError("not a LangBot export: the file must hold one JSON object (an envelope)")
    if doc.get("format") == FORMAT_MARKER:
        raise ImportFileError("this is a memconsole export (use the memconsole format)", field="format")
    if "episodes" not in doc and "profiles" not in doc:
        raise ImportFileError("not a LangBot export: no 'episodes' or 'profiles' list", field="episodes")
    _check_version(doc, "")
    if "profiles" in doc:
        _profiles_envelope(plan, doc, "", lambda sk: target(_session_of(sk), "profiles"))
    if "episodes" in doc:
        _episodes_envelope(plan, doc, "", lambda sk: target(_session_of(sk), "episodes"))


# --- SQLite formats -----------------------------------------------------------------------------


def _open_sqlite(path: Path, fmt: str, tables: dict[str, set[str]]) -> sqlite3.Connection:
    _check_size(path)
    with open(path, "rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise ImportFileError(f"not a {fmt} memory.db: the file is not a SQLite database")
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        connection.text_factory = bytes  # decode ourselves, so bad UTF-8 is an error with a place
        check = connection.execute("PRAGMA quick_check").fetchone()[0]
        if check != b"ok":
            raise ImportFileError(f"the database is damaged or truncated ({check.decode(errors='replace')[:200]})")
        for table, columns in tables.items():
            # Only an ordinary table: a view (or virtual table) in a hostile file runs SQL of the
            # file's choosing on every read, e.g. an endless recursive query (a CPU/memory bomb).
            kind = connection.execute(
                "SELECT type, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE", (table,)
            ).fetchone()
            if kind is not None and (
                kind[0] != b"table" or (kind[1] or b"").lstrip().upper().startswith(b"CREATE VIRTUAL")
            ):
                raise ImportFileError(f"not a {fmt} memory.db: '{table}' is not an ordinary table")
            found = {row[1].decode() for row in connection.execute(f"PRAGMA table_info({table})")}
            if not found:
                raise ImportFileError(f"not a {fmt} memory.db: there is no '{table}' table")
            missing = columns - found
            if missing:
                raise ImportFileError(f"not a {fmt} memory.db: table '{table}' lacks {', '.join(sorted(missing))}")
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(f"the database cannot be read (damaged or truncated?): {exc}") from None
    return connection


def _text_of(value: Any, where: str, name: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise _fail(where, name, "is not UTF-8 text") from None
    return str(value)


def _rows(connection: sqlite3.Connection, sql: str, params: tuple = ()) -> Iterator[tuple]:
    try:
        cursor = connection.execute(sql, params)
        while rows := cursor.fetchmany(1000):
            yield from rows
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(f"the database cannot be read (damaged or truncated?): {exc}") from None


def _jw_metadata(value: Any, where: str, key: str | None, encrypted: bool) -> dict[str, Any]:
    text = _text_of(value, where, "metadata")
    if not text or not text.strip():
        return {}
    if encrypted and text.startswith("gAAAA") and key:
        text = _decrypt(text, key, where, "metadata")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise _fail(where, "metadata", "is not valid JSON") from None
    if not isinstance(data, dict):
        raise _fail(where, "metadata", "must be a JSON object")
    return data


def _decrypt(token: Any, key: str, where: str, name: str) -> str:
    try:
        return crypto.decrypt_with_key(token, key)
    except ImproperlyConfigured as exc:
        raise ImportFileError(f"--fernet-key / JW_MEMORY_KEY: {exc}", field="fernet_key") from None
    except crypto.DecryptionError:
        raise _fail(where, name, "cannot be decrypted with the given Fernet key") from None


def parse_jw_agents(
    path: Path, plan: Plan, target: Callable[[Any, str], ScopeKeys], fernet_key: str | None, progress: Progress | None
) -> None:
    key = fernet_key or os.environ.get("JW_MEMORY_KEY") or None
    connection = _open_sqlite(
        path, "jw-agents", {"records": {"id", "session_id", "timestamp", "kind", "content", "metadata", "encrypted"}}
    )
    try:
        total = connection.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        if total > MAX_RECORDS:
            raise ImportFileError(f"the file holds {total} records; at most {MAX_RECORDS} per import")
        if not key:
            row = connection.execute("SELECT id FROM records WHERE encrypted = 1 ORDER BY id LIMIT 1").fetchone()
            if row is not None:
                raise ImportFileError(
                    f"records id={row[0]} is encrypted: give the Fernet key (--fernet-key or JW_MEMORY_KEY); nothing was imported",
                    field="fernet_key",
                )
        sql = "SELECT id, session_id, timestamp, kind, content, metadata, encrypted FROM records ORDER BY id"
        for done, (row_id, session_id, stamp, kind, content, metadata, encrypted) in enumerate(
            _rows(connection, sql), 1
        ):
            where = f"records id={row_id}"
            encrypted = bool(encrypted)
            session = _text_of(session_id, where, "session_id")
            keys = target(session, where)
            kind_text = (_text_of(kind, where, "kind") or "").strip()
            if encrypted:
                content_text = _decrypt(content, key or "", where, "content")
            else:
                content_text = _text_of(content, where, "content")
            meta = _jw_metadata(metadata, where, key, encrypted)
            tags = _tags([kind_text] if kind_text else [], where)
            for tag in _tags(meta.get("tags"), where + " metadata"):
                if tag not in tags:
                    tags.append(tag)
            if len(tags) > operations.MAX_TAGS:
                raise _fail(where, "tags", f"at most {operations.MAX_TAGS} tags")
            plan.add_episode(
                EpisodeIn(
                    keys=keys,
                    where=where,
                    old_id=str(row_id),
                    content=_str(content_text, where, "content", operations.max_content_chars(), required=True),
                    tags=tags,
                    importance=_importance(meta.get("importance"), where + " metadata"),
                    timestamp=_time(_text_of(stamp, where, "timestamp"), where),
                    sender_id=_str(
                        meta.get("sender_id", meta.get("user_id")),
                        where,
                        "metadata.sender_id",
                        operations.MAX_SENDER_CHARS,
                    ).strip(),
                    sender_name=_str(
                        meta.get("sender_name"), where, "metadata.sender_name", operations.MAX_SENDER_CHARS
                    ).strip(),
                    status=_status(meta.get("status")),
                    superseded_by="",
                )
            )
            if progress and done % 1000 == 0:
                progress("reading", done, total)
    finally:
        connection.close()


def parse_bot_memory(
    path: Path,
    plan: Plan,
    target: Callable[[Any, str], ScopeKeys],
    bot_uuid: str,
    session_name: str | None,
    include_messages: bool,
    progress: Progress | None,
) -> None:
    tables = {"facts": {"agent_id", "subject", "key", "value", "updated_at"}}
    if include_messages:
        tables["messages"] = {"agent_id", "room_id", "role", "content", "created_at"}
    connection = _open_sqlite(path, "bot-memory", tables)
    try:
        agent = bot_uuid
        facts = connection.execute("SELECT COUNT(*) FROM facts WHERE agent_id = ?", (agent,)).fetchone()[0]
        messages = 0
        if include_messages:
            messages = connection.execute("SELECT COUNT(*) FROM messages WHERE agent_id = ?", (agent,)).fetchone()[0]
        total = facts + messages
        if total > MAX_RECORDS:
            raise ImportFileError(f"the file holds {total} records for this agent; at most {MAX_RECORDS} per import")
        if total == 0:
            agents = sorted(
                row[0].decode("utf-8", "replace") if isinstance(row[0], bytes) else str(row[0])
                for row in connection.execute("SELECT DISTINCT agent_id FROM facts LIMIT 20")
            )
            raise ImportFileError(
                f"no facts{' or messages' if include_messages else ''} for agent {bot_uuid!r} in this file"
                f" (agents found: {', '.join(agents) or 'none'})",
                field="bot_uuid",
            )
        done = 0
        if facts:
            keys = target(session_name, "facts (the target session name)")
            sql = "SELECT rowid, subject, key, value, updated_at FROM facts WHERE agent_id = ? ORDER BY rowid"
            for rowid, subject, fact_key, value, updated_at in _rows(connection, sql, (agent,)):
                where = f"facts row {rowid}"
                key_text = _str(_text_of(fact_key, where, "key"), where, "key", 1000, required=True).strip()
                value_text = _text_of(value, where, "value") or ""
                # The key also becomes a tag: a tag may hold no comma and at most 64 characters.
                key_tag = re.sub(r"\s+", " ", key_text.replace(",", " ")).strip()[: operations.MAX_TAG_CHARS]
                plan.add_episode(
                    EpisodeIn(
                        keys=keys,
                        where=where,
                        old_id=f"fact:{rowid}",
                        content=_str(
                            f"{key_text}: {value_text}", where, "value", operations.max_content_chars(), required=True
                        ),
                        tags=_tags(["fact", key_tag], where),
                        importance=2,
                        timestamp=_time(_text_of(updated_at, where, "updated_at"), where, "updated_at"),
                        sender_id=_str(
                            _text_of(subject, where, "subject"), where, "subject", operations.MAX_SENDER_CHARS
                        ).strip(),
                        sender_name="",
                        status=STATUS_ACTIVE,
                        superseded_by="",
                    )
                )
                done += 1
                if progress and done % 1000 == 0:
                    progress("reading", done, total)
        if messages:
            sql = "SELECT rowid, room_id, role, content, created_at FROM messages WHERE agent_id = ? ORDER BY rowid"
            for rowid, room_id, role, content, created_at in _rows(connection, sql, (agent,)):
                where = f"messages row {rowid}"
                role_text = (_text_of(role, where, "role") or "").strip()
                plan.add_episode(
                    EpisodeIn(
                        keys=target(_text_of(room_id, where, "room_id"), where),
                        where=where,
                        old_id=f"message:{rowid}",
                        content=_str(
                            _text_of(content, where, "content"),
                            where,
                            "content",
                            operations.max_content_chars(),
                            required=True,
                        ),
                        tags=_tags([role_text] if role_text else [], where),
                        importance=2,
                        timestamp=_time(_text_of(created_at, where, "created_at"), where, "created_at"),
                        sender_id="",
                        sender_name="",
                        status=STATUS_ACTIVE,
                        superseded_by="",
                    )
                )
                done += 1
                if progress and done % 1000 == 0:
                    progress("reading", done, total)
    finally:
        connection.close()


# --- planning: conflicts and new ids -------------------------------------------------------------


def _resolve(plan: Plan, report: ImportReport) -> list[EpisodeIn]:
    """Drop conflicting episodes, give the rest new ids, map superseded_by; fill the report."""
    by_user_key: dict[str, list[EpisodeIn]] = {}
    for episode in plan.episodes:
        by_user_key.setdefault(episode.keys.user_key, []).append(episode)
    kept: list[EpisodeIn] = []
    for user_key, episodes in by_user_key.items():
        old_ids = sorted({e.old_id for e in episodes if e.old_id})
        existing: dict[str, str] = {}
        for start in range(0, len(old_ids), WRITE_BATCH):
            chunk = old_ids[start : start + WRITE_BATCH]
            for episode_id, imported in Episode.objects.filter(
                user_key=user_key, imported_episode_id__in=chunk
            ).values_list("episode_id", "imported_episode_id"):
                existing.setdefault(imported, episode_id)
            for episode_id in operations.episodes_by_ids(Q(user_key=user_key), chunk).values_list(
                "episode_id", flat=True
            ):
                existing.setdefault(episode_id, episode_id)
        new_ids: dict[str, str] = dict(existing)
        taken: set[str] = set()
        for episode in episodes:
            if episode.old_id and episode.old_id in existing:
                report._conflict(
                    episode.keys, "exists", episode.where, "already in the target scope; skipped", episode.old_id
                )
                continue
            if episode.old_id and episode.old_id in taken:
                report._conflict(
                    episode.keys,
                    "duplicate",
                    episode.where,
                    "the same id appears earlier in the file; skipped",
                    episode.old_id,
                )
                continue
            episode.new_id = operations.new_episode_id()
            if episode.old_id:
                taken.add(episode.old_id)
                new_ids[episode.old_id] = episode.new_id
            kept.append(episode)
        for episode in episodes:
            if episode.new_id and episode.superseded_by:
                episode.superseded_by = new_ids.get(episode.superseded_by, "")
    for episode in kept:
        scope = report._scope(episode.keys)
        scope["episodes"] += 1
        scope["statuses"][episode.status] = scope["statuses"].get(episode.status, 0) + 1
        report.statuses[episode.status] = report.statuses.get(episode.status, 0) + 1
    report.episodes = len(kept)
    for profile in plan.profiles:
        report._scope(profile.keys)["profiles"] += 1
        exists = Profile.objects.filter(
            scope_key=profile.keys.scope_key, type=profile.type, sender_id=profile.sender_id
        ).exists()
        if exists:
            report._conflict(
                profile.keys,
                "profile_exists",
                profile.where,
                "a profile already exists; the imported one becomes its newest version",
                f"{profile.type}:{profile.sender_id}" if profile.sender_id else profile.type,
            )
    report.profiles = len(plan.profiles)
    return kept


# --- writing ------------------------------------------------------------------------------------


def _write(plan: Plan, kept: list[EpisodeIn], report: ImportReport, actor: Actor, progress: Progress | None) -> None:
    now = timezone.now()
    with transaction.atomic():
        for keys in plan.scopes.values():
            register_scope(keys)
        for start in range(0, len(kept), WRITE_BATCH):
            rows = []
            for item in kept[start : start + WRITE_BATCH]:
                row = Episode(
                    episode_id=item.new_id,
                    user_key=item.keys.user_key,
                    scope_key=item.keys.scope_key,
                    tags=item.tags,
                    tags_text=operations.tags_text(item.tags),
                    importance=item.importance,
                    timestamp=item.timestamp,
                    sender_id=item.sender_id,
                    sender_name=item.sender_name,
                    bot_uuid=item.keys.bot_uuid,
                    source="import",
                    status=item.status,
                    superseded_by=item.superseded_by,
                    imported_episode_id=item.old_id,
                    created_at=now,
                    updated_at=now,
                    vector_current=False,
                )
                row.set_content(item.content)
                rows.append(row)
            Episode.objects.bulk_create(rows)
            if progress:
                progress("writing", min(start + WRITE_BATCH, len(kept)), len(kept))
        for profile in plan.profiles:
            operations.save_profile(
                profile.keys,
                actor,
                profile.type,
                profile.sender_id,
                profile.data,
                "import",
                f"{profile.type} profile imported ({report.format})",
                updated_at=profile.updated_at,
            )
        # The chain's head before the counters, in the order remember/archive/delete take them
        # (the other way round, an import and a remember deadlock on PostgreSQL).
        audit.lock_chain()
        for user_key in {keys.user_key for keys in plan.scopes.values()}:
            operations.recount(user_key)
        for keys in plan.scopes.values():
            scope = report._scope(keys)
            audit.append(
                "import",
                actor,
                scope_key=keys.scope_key,
                user_key=keys.user_key,
                target_type="scope",
                target_id=keys.scope_key,
                summary=f"imported {scope['episodes']} episodes and {scope['profiles']} profiles ({report.format})",
                metadata={
                    "format": report.format,
                    "file_name": report.file_name,
                    "episodes": scope["episodes"],
                    "profiles": scope["profiles"],
                    "statuses": scope["statuses"],
                    "conflicts": scope["conflicts"],
                },
            )


def _index(new_ids: list[str], report: ImportReport, progress: Progress | None) -> None:
    """Embed and index the new episodes in batches, after the commit."""
    done = 0
    for start in range(0, len(new_ids), INDEX_BATCH):
        batch = list(Episode.objects.filter(episode_id__in=new_ids[start : start + INDEX_BATCH]).order_by("pk"))
        try:
            done += operations.index_episodes(batch)
        except (vectors.VectorIndexError, embeddings.EmbeddingError):
            operations.log.exception("imported episodes saved but not all indexed; `manage.py reindex` will index them")
            break
        if progress:
            progress("indexing", done, len(new_ids))
    report.indexed = done
    report.not_indexed = len(new_ids) - done


# --- entry points -------------------------------------------------------------------------------


def import_file(
    path: Any,
    fmt: str,
    *,
    bot_uuid: str,
    session_name: str | None = None,
    isolation: str = "session",
    actor: Actor,
    dry_run: bool = False,
    fernet_key: str | None = None,
    include_messages: bool = False,
    progress: Progress | None = None,
    file_name: str | None = None,
) -> ImportReport:
    """Import one file atomically into the target scope(s); see the module docstring.

    Raises `ImportFileError` (a `ValidationError`) for a bad file or target, `PermissionDenied`
    when the actor may not use `bot_uuid`; in both cases nothing is written.
    """
    if fmt not in FORMATS:
        raise ValidationError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})", field="format")
    if not isinstance(bot_uuid, str):
        raise ValidationError("bot_uuid must be a string", field="bot_uuid")
    if session_name is not None and not str(session_name).strip():
        session_name = None
    path = Path(path)
    report = ImportReport(format=fmt, dry_run=dry_run, file_name=file_name if file_name is not None else path.name)
    plan = Plan()
    derive_scope(bot_uuid, session_name or "check", isolation)  # a bad bot_uuid/isolation fails first

    def target(file_session: Any, where: str) -> ScopeKeys:
        keys = plan.keys_for(bot_uuid, session_name or file_session, isolation, where)
        operations._allow(actor, keys)
        return keys

    def facts_target(file_session: Any, where: str) -> ScopeKeys:
        keys = plan.keys_for(bot_uuid, file_session, isolation, where)
        operations._allow(actor, keys)
        return keys

    if fmt == "memconsole":
        parse_memconsole(path, plan, target)
    elif fmt == "langbot":
        parse_langbot(path, plan, target)
    elif fmt == "jw-agents":
        parse_jw_agents(path, plan, facts_target, fernet_key, progress)
    else:
        if not session_name:
            raise ImportFileError(
                "bot-memory facts go into one session: give the target session name", field="session_name"
            )
        parse_bot_memory(path, plan, facts_target, bot_uuid, session_name, include_messages, progress)
    if progress:
        progress("reading", len(plan.episodes), len(plan.episodes))
    kept = _resolve(plan, report)
    if dry_run:
        return report
    _write(plan, kept, report, actor, progress)
    new_ids = [item.new_id for item in kept]
    del kept  # only the ids are needed from here on
    _index(new_ids, report, progress)
    return report


def import_upload(uploaded_file: Any, fmt: str, **kwargs: Any) -> ImportReport:
    """`import_file` for a Django UploadedFile.

    The upload is copied to a private temporary folder (mode 0700, a name of our own: the
    client-supplied name is never used as a path, only shown in the report and audit after
    cleaning) and removed afterwards. The size limit is checked before copying, and again while
    copying (the declared size may lie).
    """
    limit = max_import_bytes()
    declared = getattr(uploaded_file, "size", None)
    if isinstance(declared, int) and declared > limit:
        raise ImportFileError(f"the file is {declared:,} bytes; the limit is {limit:,} (MEMCONSOLE_IMPORT_MAX_BYTES)")
    shown = _clean_name(getattr(uploaded_file, "name", "") or "upload")
    # A private directory (0700), removed whole afterwards: SQLite may put -wal/-shm files beside
    # the database it opens.
    folder = tempfile.mkdtemp(prefix="memconsole-import-")
    temp_path = os.path.join(folder, "upload")
    try:
        written = 0
        with open(temp_path, "xb") as out:
            for chunk in uploaded_file.chunks():
                written += len(chunk)
                if written > limit:
                    raise ImportFileError(
                        f"the file is larger than the limit of {limit:,} bytes (MEMCONSOLE_IMPORT_MAX_BYTES)"
                    )
                out.write(chunk)
        kwargs.setdefault("file_name", shown)
        return import_file(temp_path, fmt, **kwargs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _clean_name(name: str) -> str:
    base = re.split(r"[\\/]", name)[-1]
    return re.sub(r"[^\w.\- ]+", "_", base)[:120] or "upload"
