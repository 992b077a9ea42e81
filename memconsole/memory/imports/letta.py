"""The `letta` format: a Letta agent file (`.af`) and Letta's archival-memory export (issue 20).

- **An agent file** (Letta's AgentFile schema: `{agents: [{name, block_ids, ...}], blocks: [{id,
  label, value, ...}], ...}`; older files hold one agent with its `core_memory` / `memory.blocks`;
  some are written as a JSON string holding the JSON). Its core memory blocks become the session
  profile's notes, one "label: value" section per block: `human` first, the agent's `persona` last,
  cut at the notes limit with a warning. Letta's blocks are free text, so they are not split into
  traits or preferences.
- **Archival passages**, as Letta's export script writes them (`client.agents.passages.list`: a
  list of `{id, text, created_at, tags?, metadata?}`, or `{passages: [...]}`), and any `passages`
  an agent file carries. Each becomes an episode with its time and tags (`original_source` is
  `letta`).

A Letta agent talks to one person, so a target session name is required.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from django.utils.translation import gettext_noop

from .. import validation
from ..models import PROFILE_SESSION
from ..wording import said
from . import fields
from .plan import EpisodeIn, Plan, ProfileIn, Target
from .readers import load_json, reject_constant
from .report import ImportFileError

FIRST, LAST = "human", "persona"


def parse(path: Path, plan: Plan, target: Target, *, session_name: str | None = None, **_options: Any) -> None:
    doc = load_json(path, "letta")
    if isinstance(doc, str):  # an agent file serialised twice: a JSON string holding the JSON
        try:
            doc = json.loads(doc, parse_constant=reject_constant)
        except (ValueError, RecursionError):
            raise ImportFileError(
                said(gettext_noop("not a Letta file: the JSON string it holds is not JSON"))
            ) from None
    passages, blocks = _contents(doc)
    if not passages and not blocks:
        raise ImportFileError(
            said(gettext_noop("not a Letta file: no agents, memory blocks or archival passages")), field="agents"
        )
    keys = target(session_name, "the file")
    for index, record in enumerate(passages):
        plan.add_episode(_passage(record, f"passages[{index}]", keys, plan.imported_at))
    if blocks:
        notes: list[fields.Note] = []
        text = "\n\n".join(f"{label}: {value.strip()}" for label, value in _ordered(blocks))
        data = fields.profile_data({"name": "", "traits": [], "preferences": [], "notes": text}, "blocks", notes)
        plan.profiles.append(ProfileIn(keys, "blocks", PROFILE_SESSION, "", data, None, notes))


def _contents(doc: Any) -> tuple[list[Any], list[tuple[str, str]]]:
    """(archival passages, core memory blocks as (label, value)) of a Letta document."""
    if isinstance(doc, list):
        return doc, []
    if not isinstance(doc, dict):
        raise ImportFileError(
            said(gettext_noop("not a Letta file: the file must hold a JSON object or a list of passages"))
        )
    passages = list(_list(doc, "passages"))
    blocks: list[tuple[str, str]] = []
    agents = _list(doc, "agents") if "agents" in doc else [doc] if ("core_memory" in doc or "memory" in doc) else []
    by_id = {b.get("id"): b for b in _list(doc, "blocks") if isinstance(b, dict)}
    for number, agent in enumerate(agents):
        if not isinstance(agent, dict):
            raise ImportFileError(said(gettext_noop("agents[%(number)s]: an agent must be an object"), number=number))
        passages.extend(_list(agent, "passages"))
        for block in _agent_blocks(agent, by_id):
            label, value = block.get("label"), block.get("value")
            if isinstance(label, str) and isinstance(value, str) and value.strip():
                blocks.append((label.strip() or "block", value))
    if not agents:  # a file of blocks only
        blocks.extend(
            (str(b.get("label") or "block"), b["value"]) for b in by_id.values() if isinstance(b.get("value"), str)
        )
    return passages, blocks


def _agent_blocks(agent: dict[str, Any], by_id: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    own = [b for b in _list(agent, "memory_blocks") if isinstance(b, dict)]
    core = agent.get("core_memory")
    if isinstance(core, list):
        own += [b for b in core if isinstance(b, dict)]
    memory = agent.get("memory")
    if isinstance(memory, dict):
        own += [b for b in _list(memory, "blocks") if isinstance(b, dict)]
    ids = agent.get("block_ids")
    if isinstance(ids, list):
        own += [by_id[i] for i in ids if i in by_id]
    return own


def _list(container: dict[str, Any], name: str) -> list[Any]:
    value = container.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ImportFileError(said(fields.NOT_A_LIST, place="", name=name), field=name)
    return value


def _ordered(blocks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each block once (agents may share one), `human` first and `persona` last."""
    unique = list(dict.fromkeys(blocks))
    return sorted(unique, key=lambda block: (block[0] != FIRST, block[0] == LAST))


def _passage(record: Any, where: str, keys: Any, imported_at: datetime) -> EpisodeIn:
    if not isinstance(record, dict):
        raise ImportFileError(said(gettext_noop("%(where)s: a passage must be an object"), where=where))
    notes: list[fields.Note] = []
    meta = record.get("metadata") or record.get("metadata_") or {}
    if not isinstance(meta, dict):
        raise fields.fail(where, "metadata", fields.MUST_BE_OBJECT)
    return EpisodeIn(
        keys=keys,
        where=where,
        old_id=fields.old_id(record.get("id"), where),
        content=fields.content(record.get("text", record.get("content")), where, "text"),
        tags=fields.tags(record.get("tags"), where),
        importance=fields.importance(meta.get("importance"), where + " metadata", notes),
        timestamp=fields.episode_time(record.get("created_at"), where, notes, imported_at, "created_at"),
        sender_id=fields.text(
            meta.get("sender_id"), where, "metadata.sender_id", validation.MAX_SENDER_CHARS, trim=True
        ),
        sender_name="",
        status="active",
        superseded_by="",
        original_source="letta",
        notes=notes,
        metadata=fields.metadata({k: v for k, v in meta.items() if k not in ("importance", "sender_id")}, where),
    )
