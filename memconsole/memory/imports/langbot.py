"""The `langbot` format: a LangBot LongTermMemory export, and the envelopes memconsole shares.

The episodes envelope is `{version: 1, exported_at, scope_key, user_key, collection_id, statuses,
episodes[], count}`, the profiles envelope `{version: 1, ..., profiles[{type, scope_key,
sender_id?, profile{...}}], count}`; a file holds one or both, or is a bare JSON list of episodes
(the target session name is then required). memconsole's own export embeds the same envelopes
(`memconsole_format`), so their readers live here.

An episode record has LangBot's read fields: `id`, `content` (or `text`), `tags`, `importance`,
`timestamp` ("YYYY-MM-DDTHH:MM:SSZ", "" when unset), `sender_id`, `sender_name`, `source`
(`agent`, `candidate`, `consolidation`, `import`, ...: kept as `original_source`), `status`
(`active`, `superseded`, `archived`, `deleted`) and `superseded_by`; memconsole adds
`imported_episode_id` (and `original_source`), so re-importing our export of an earlier import keeps
the ORIGINAL id while `superseded_by` still refers to the exported `id`s.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from django.utils.translation import gettext_noop

from .. import validation
from ..exports import FORMAT_MARKER
from ..models import PROFILE_SESSION, PROFILE_SPEAKER
from ..scopes import ScopeKeys
from ..wording import Said, said
from . import fields
from .plan import EpisodeIn, Plan, ProfileIn, Target
from .readers import load_json
from .report import ImportFileError

# keys_for(the envelope's or record's scope_key) -> the target keys
KeysFor = Callable[[Any], ScopeKeys]


def session_of(scope_key: Any) -> str | None:
    """The session name inside a LangBot/memconsole scope_key ('<bot_uuid>:<session>' or '<session>')."""
    if not isinstance(scope_key, str) or not scope_key.strip():
        return None
    return scope_key.split(":", 1)[1] if ":" in scope_key else scope_key


def check_version(envelope: dict[str, Any], where: str) -> None:
    version = envelope.get("version", 1)
    if version != 1 or isinstance(version, bool):  # true == 1 in Python, not in the file
        raise ImportFileError(
            said(
                gettext_noop("%(where)s'version' is %(version)s; only version 1 is understood"),
                where=where,
                version=f"{version!r:.20}",
            ),
            field="version",
        )


def _list_field(envelope: dict[str, Any], name: str, where: str) -> list[Any]:
    value = envelope.get(name)
    if not isinstance(value, list):
        place = f"{where.rstrip('.')}: " if where else ""
        raise ImportFileError(said(fields.NOT_A_LIST, place=place, name=name), field=name)
    return value


def _episode(record: Any, where: str, keys: ScopeKeys, imported_at: datetime) -> EpisodeIn:
    if not isinstance(record, dict):
        raise ImportFileError(said(gettext_noop("%(where)s: an episode must be an object"), where=where))
    content = record.get("content")
    if content is None:
        content = record.get("text")
    superseded_by = record.get("superseded_by")
    file_id = fields.old_id(record.get("id", record.get("episode_id")), where)
    original_id = fields.old_id(record.get("imported_episode_id"), where, "imported_episode_id")
    notes: list[fields.Note] = []
    return EpisodeIn(
        keys=keys,
        where=where,
        old_id=original_id or file_id,
        file_id=file_id,
        content=fields.content(content, where),
        tags=fields.tags(record.get("tags"), where),
        importance=fields.importance(record.get("importance"), where, notes),
        timestamp=fields.episode_time(record.get("timestamp"), where, notes, imported_at),
        sender_id=fields.text(record.get("sender_id"), where, "sender_id", validation.MAX_SENDER_CHARS, trim=True),
        sender_name=fields.text(
            record.get("sender_name"), where, "sender_name", validation.MAX_SENDER_CHARS, trim=True
        ),
        status=fields.status(record.get("status"), where, notes),
        superseded_by=fields.old_id(superseded_by, where) if superseded_by else "",
        original_source=fields.source(record.get("original_source") or record.get("source"), where),
        notes=notes,
        kind=fields.kind(record.get("kind"), where, notes),
        metadata=fields.metadata(record.get("metadata"), where),
        query_id=fields.text(record.get("query_id"), where, "query_id", validation.MAX_QUERY_ID_CHARS, trim=True),
    )


def _profile(record: Any, where: str, keys: ScopeKeys) -> ProfileIn:
    if not isinstance(record, dict):
        raise ImportFileError(said(gettext_noop("%(where)s: a profile must be an object"), where=where))
    profile_type = record.get("type")
    if profile_type not in (PROFILE_SESSION, PROFILE_SPEAKER):
        raise fields.fail(where, "type", gettext_noop("must be 'session' or 'speaker'"))
    sender_id = ""
    if profile_type == PROFILE_SPEAKER:
        sender_id = fields.text(
            record.get("sender_id"), where, "sender_id", validation.MAX_SENDER_CHARS, required=True
        ).strip()
    profile = record.get("profile")
    updated_at = (
        fields.time(profile.get("updated_at"), where, "profile.updated_at") if isinstance(profile, dict) else None
    )
    notes: list[fields.Note] = []
    data = fields.profile_data(profile, where, notes)
    return ProfileIn(keys, where, profile_type, sender_id, data, updated_at, notes)


def _not_an_object(where: str) -> Said:
    if not where.rstrip("."):
        return said(gettext_noop("the file: must be an object"))
    return said(gettext_noop("%(where)s: must be an object"), where=where.rstrip("."))


def episodes_envelope(plan: Plan, envelope: Any, where: str, keys_for: KeysFor) -> None:
    """Add the episodes of an episodes envelope (`where` prefixes each record's place)."""
    if not isinstance(envelope, dict):
        raise ImportFileError(_not_an_object(where))
    keys = keys_for(envelope.get("scope_key"))
    for index, record in enumerate(_list_field(envelope, "episodes", where)):
        plan.add_episode(_episode(record, f"{where}episodes[{index}]", keys, plan.imported_at))


def profiles_envelope(plan: Plan, envelope: Any, where: str, keys_for: KeysFor) -> None:
    """Add the profiles of a profiles envelope (a record's own scope_key before the envelope's)."""
    if not isinstance(envelope, dict):
        raise ImportFileError(_not_an_object(where))
    for index, record in enumerate(_list_field(envelope, "profiles", where)):
        record_where = f"{where}profiles[{index}]"
        scope_key = record.get("scope_key") if isinstance(record, dict) else None
        keys = keys_for(scope_key or envelope.get("scope_key"))
        plan.profiles.append(_profile(record, record_where, keys))


def parse(path: Path, plan: Plan, target: Target, *, session_name: str | None = None, **_options: Any) -> None:
    """Read a LangBot export; `session_name` (if given) replaces the file's own session."""
    doc = load_json(path, "langbot")
    if isinstance(doc, list):  # a bare list of episodes
        doc = {"version": 1, "episodes": doc}
    if not isinstance(doc, dict):
        raise ImportFileError(
            said(
                gettext_noop(
                    "not a LangBot export: the file must hold one JSON object (an envelope) or a list of episodes"
                )
            )
        )
    if doc.get("format") == FORMAT_MARKER:
        raise ImportFileError(
            said(gettext_noop("this is a memconsole export (use the memconsole format)")), field="format"
        )
    if "episodes" not in doc and "profiles" not in doc:
        raise ImportFileError(
            said(gettext_noop("not a LangBot export: no 'episodes' or 'profiles' list")), field="episodes"
        )
    check_version(doc, "")
    if "profiles" in doc:
        profiles_envelope(plan, doc, "", lambda sk: target(session_name or session_of(sk), "profiles"))
    if "episodes" in doc:
        episodes_envelope(plan, doc, "", lambda sk: target(session_name or session_of(sk), "episodes"))
