"""Imports (issue 5): bring memory from a file into target scopes, all or nothing.

Formats (`FORMATS`, one module each, every one read by a `parse(path, plan, target, **options)`):
`memconsole` (our own scope export), `langbot` (a LangBot LongTermMemory export), `jw-agents`
(a jw-agents `memory.db`), `bot-memory` (an agent-memory `memory.db`), `mem0` (an OpenMemory backup
zip or mem0's `get_all` JSON) and `letta` (a Letta agent file or archival export); see each module.

Rules shared by every format: keys are re-derived for the target (`bot_uuid`, the session and
`isolation`), whatever the file says; the old id is kept as `imported_episode_id` and new ids are
made; values are coerced alike (`fields`); conflicts are skipped, so re-running an import adds
nothing twice (`plan`). Memory comes across faithfully (issue 14, docs/design.md §7): an episode
the source deleted is skipped and counted (`skipped_deleted`), never revived; a detail is adjusted
as a live write would adjust it (importance clamped, profile items evicted, an unknown status read
as active, an empty time made the import time) and listed as a warning; the original `source` is
kept as `original_source`.

The whole file is read and checked (`readers`, `fields`) before anything is written; a bad file is
rejected with an `ImportFileError` saying what and where (line and column for JSON syntax, the
record's index or row id and the field otherwise), and nothing is written; a value of the wrong
type (a number as content, tags neither a list nor a comma-joined string) is such an error. Then
the rows are written and the vectors follow (`writer`): in one transaction, or, for a background
job (`checkpoint`), in batches that each commit and record how far the import has got, so that
SQLite's write lock is free between them and an interrupted job resumes after its last committed
batch (until then its import is partial). A dry run writes nothing. The `ImportReport` says what
happened per scope.
"""

from __future__ import annotations

import re
import secrets
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from django.utils.translation import gettext_noop

from ..audit import Actor
from ..errors import ValidationError
from ..scopes import ScopeKeys, derive_scope
from ..wording import Said, said
from . import bot_memory, jw_agents, langbot, letta, mem0, memconsole_format, readers, writer
from .botmemory_items import tally
from .forgotten import drop_forgotten
from .plan import Plan, Progress, Target, resolve
from .readers import max_import_bytes
from .report import ImportFileError, ImportReport, ScopeTally

__all__ = [
    "FORMATS",
    "PARSERS",
    "ImportFileError",
    "ImportReport",
    "ScopeTally",
    "import_file",
    "import_upload",
    "max_import_bytes",
    "people_in",
    "read_upload",
]

MAX_SHOWN_NAME = 120


class Parser(Protocol):
    def __call__(self, path: Path, plan: Plan, target: Target, **options: Any) -> None: ...


PARSERS: dict[str, Parser] = {
    "memconsole": memconsole_format.parse,
    "langbot": langbot.parse,
    "jw-agents": jw_agents.parse,
    "bot-memory": bot_memory.parse,
    "mem0": mem0.parse,
    "letta": letta.parse,
}
FORMATS = tuple(PARSERS)


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
    checkpoint: writer.Checkpoint | None = None,
) -> ImportReport:
    """Import one file into the target scope(s): atomically, or in resumable batches recorded in
    `checkpoint` (a job's); see the package docstring.

    Raises `ImportFileError` (a `ValidationError`) for a bad file or target, `PermissionDenied`
    when the actor may not use `bot_uuid`; in both cases nothing is written.
    """
    if fmt not in PARSERS:
        raise ValidationError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})", field="format")
    if not isinstance(bot_uuid, str):
        raise ValidationError("bot_uuid must be a string", field="bot_uuid")
    if session_name is not None and not str(session_name).strip():
        session_name = None
    path = Path(path)
    report = ImportReport(format=fmt, dry_run=dry_run, file_name=file_name if file_name is not None else path.name)
    plan = _plan(checkpoint if not dry_run else None)
    derive_scope(bot_uuid, session_name or "check", isolation)  # a bad bot_uuid/isolation fails first

    def target(file_session: Any, where: str) -> ScopeKeys:
        keys = plan.keys_for(bot_uuid, file_session, isolation, where)
        actor.require_bot(keys)
        return keys

    PARSERS[fmt](
        path,
        plan,
        target,
        bot_uuid=bot_uuid,
        session_name=session_name,
        fernet_key=fernet_key,
        include_messages=include_messages,
        progress=progress,
    )
    if progress:
        progress("reading", len(plan.episodes), len(plan.episodes))
    drop_forgotten(plan, report, bot_uuid)  # what was deleted or erased here never comes back
    kept = resolve(plan, report)
    tally(plan.facts, plan.messages, report)
    if dry_run:
        return report
    if checkpoint is not None and checkpoint.state.get("written"):  # resumed after the write: index what it wrote
        report = ImportReport.from_dict(checkpoint.state["report"])
    else:
        writer.write(plan, kept, report, actor, progress, checkpoint)
    new_ids = [item.new_id for item in kept]
    del kept  # only the ids are needed from here on
    writer.index(new_ids, report, progress)
    return report


def people_in(
    path: Any, fmt: str, *, bot_uuid: str, session_name: str | None = None, isolation: str = "session"
) -> set[str]:
    """The sender ids a file's records name (episodes, also those the source deleted, speaker
    profiles, facts' subjects, window messages), read by the import's own parser and checks;
    `ImportFileError` for a file it cannot read. Writes nothing (erasure reads kept import files)."""
    if fmt not in PARSERS:
        raise ValidationError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})", field="format")
    plan = Plan()

    def target(file_session: Any, where: str) -> ScopeKeys:
        return plan.keys_for(bot_uuid, file_session, isolation, where)

    PARSERS[fmt](Path(path), plan, target, bot_uuid=bot_uuid, session_name=session_name, include_messages=True)
    return plan.people()


def _plan(checkpoint: writer.Checkpoint | None) -> Plan:
    """An empty plan; a batched import's has the seed and time of its first attempt (or new ones)."""
    if checkpoint is None:
        return Plan()
    state = checkpoint.state
    plan = Plan(id_seed=state.get("seed") or secrets.token_hex(8))
    if state.get("imported_at"):
        plan.imported_at = datetime.fromisoformat(state["imported_at"])
    return plan


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
        raise ImportFileError(readers.too_large(declared, limit))
    shown = _clean_name(getattr(uploaded_file, "name", "") or "upload")
    # A private directory (0700), removed whole afterwards: SQLite may put -wal/-shm files beside
    # the database it opens.
    folder = tempfile.mkdtemp(prefix="memconsole-import-")
    temp_path = Path(folder) / "upload"
    try:
        written = 0
        with temp_path.open("xb") as out:
            for chunk in uploaded_file.chunks():
                written += len(chunk)
                if written > limit:
                    raise ImportFileError(_over_limit(limit))
                out.write(chunk)
        kwargs.setdefault("file_name", shown)
        return import_file(temp_path, fmt, **kwargs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def read_upload(uploaded_file: Any) -> tuple[str, bytes]:
    """(the cleaned name to show, the bytes) of a Django UploadedFile, for a background job to
    import later (`import_file`); `ImportFileError` over MEMCONSOLE_IMPORT_MAX_BYTES, checked before
    and while reading (the declared size may lie)."""
    limit = max_import_bytes()
    declared = getattr(uploaded_file, "size", None)
    if isinstance(declared, int) and declared > limit:
        raise ImportFileError(readers.too_large(declared, limit))
    parts, size = [], 0
    for chunk in uploaded_file.chunks():
        size += len(chunk)
        if size > limit:
            raise ImportFileError(_over_limit(limit))
        parts.append(chunk)
    return _clean_name(getattr(uploaded_file, "name", "") or "upload"), b"".join(parts)


def _clean_name(name: str) -> str:
    base = re.split(r"[\\/]", name)[-1]
    return re.sub(r"[^\w.\- ]+", "_", base)[:MAX_SHOWN_NAME] or "upload"


def _over_limit(limit: int) -> Said:
    return said(
        gettext_noop("the file is larger than the limit of %(limit)s bytes (MEMCONSOLE_IMPORT_MAX_BYTES)"),
        limit=f"{limit:,}",
    )
