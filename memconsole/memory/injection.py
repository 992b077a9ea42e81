"""Memory injection: the system blocks a bot receives for a prompt, stored as an InjectionSnapshot.

`memory_lines` is the one rendering of the "[Relevant memories]" block: fresh injections use it,
and erasure uses it when it rewrites a stored snapshot without a person's episodes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from memconsole.lib import metrics

from . import audit, facts, people, usage, validation, window
from .audit import Actor
from .models import PROFILE_SESSION, PROFILE_SPEAKER, Episode, InjectionSnapshot
from .profiles import EMPTY_PROFILE, get_profile
from .retrieval import BELOW_FLOOR, KEPT, RecallHit, Retrieval, retrieve
from .scopes import ScopeKeys, register_scope
from .validation import MAX_QUERY_ID_CHARS, text, validate_speaker
from .wording import said

SESSION_PROFILE_BLOCK = "[Session profile]"
MEMORIES_BLOCK = "[Relevant memories]"
PRUNE_BATCH = 500
SNAPSHOT_CANDIDATES = 20  # the best-scored candidates a snapshot keeps (injected ones and near misses)
INJECTED = "injected"
NO_CANDIDATES = "no_candidates"


def one_line(value: Any) -> str:
    """A stored value as it is injected: on one line (`validation.one_line`), so what a chat
    participant wrote can never start a block or a line of its own."""
    return validation.one_line(str(value))


def _dated(data: dict[str, Any], row: Any = None) -> dict[str, Any]:
    """A profile as the context gives it: its fields and when it last changed ("" never), as LangBot's plugin."""
    return {**data, "updated_at": row.updated_at.isoformat() if row is not None else ""}


def profile_lines(data: dict[str, Any]) -> list[str]:
    lines = []
    if data.get("name"):
        lines.append(f"Name: {one_line(data['name'])}")
    if data.get("traits"):
        lines.append("Traits: " + "; ".join(one_line(item) for item in data["traits"]))
    if data.get("preferences"):
        lines.append("Preferences: " + "; ".join(one_line(item) for item in data["preferences"]))
    if data.get("notes"):
        lines.append(f"Notes: {one_line(data['notes'])}")
    if data.get("facts"):  # a speaker's keyed facts (issue 20: facts.py), injected with their profile
        facts = data["facts"].items()
        lines.append("Facts: " + "; ".join(f"{one_line(key)}: {one_line(value)}" for key, value in facts))
    return lines


def _day(stamp: Any) -> str:
    if not stamp:
        return "undated"
    try:
        return datetime.fromisoformat(stamp).strftime("%Y-%m-%d")
    except (TypeError, ValueError):
        return str(stamp)[:10]


def memory_lines(episodes: list[dict[str, Any]]) -> list[str]:
    """One line per episode, as injected: "- (2024-05-01) Alice: content".

    `episodes` are the episode records of an injection (`RecallHit.as_dict()`, as a snapshot stores them).
    """
    rows = []
    for episode in episodes:
        by = one_line(episode.get("sender_name") or episode.get("sender_id") or "unknown")
        rows.append(f"- ({_day(episode.get('timestamp'))}) {by}: {one_line(episode.get('content', ''))}")
    return rows


def memory_block(episodes: list[dict[str, Any]]) -> str:
    """The "[Relevant memories]" block for these episode records."""
    return MEMORIES_BLOCK + "\n" + "\n".join(memory_lines(episodes))


def render_blocks(
    session_profile: dict[str, Any],
    speaker: dict[str, Any],
    speaker_profile: dict[str, Any],
    episodes: list[dict[str, Any]],
) -> list[str]:
    """The system blocks a bot receives, in order: session profile, speaker profile, memories."""
    blocks = []
    lines = profile_lines(session_profile)
    if lines:
        blocks.append(SESSION_PROFILE_BLOCK + "\n" + "\n".join(lines))
    lines = profile_lines(speaker_profile)
    if lines:
        who = one_line(speaker.get("name") or speaker.get("id"))
        blocks.append(f"[Speaker profile: {who}]\n" + "\n".join(lines))
    if episodes:
        blocks.append(memory_block(episodes))
    return blocks


@dataclass
class Injection:
    context: dict[str, Any]
    system_blocks: list[str]
    snapshot: InjectionSnapshot
    hits: list[RecallHit] = field(default_factory=list)


@metrics.timed("inject")
def record_injection(
    keys: ScopeKeys,
    actor: Actor,
    query: Any,
    *,
    query_id: Any = "",
    sender_id: Any = "",
    sender_name: Any = "",
    top_k: Any = 3,
    include_window: bool = False,
) -> Injection:
    """Build the memory injection for a prompt and store it as an InjectionSnapshot. Audited.

    The speaker's keyed facts come with their profile (`speaker_profile.facts`); `include_window`
    adds the chat's conversation window as `context["history"]` (oldest first, issue 20).

    Raises `Unavailable` when the index, the model or a key fails.
    """
    actor.require_bot(keys)
    query_id = text(query_id, "query_id", MAX_QUERY_ID_CHARS)
    sender_id = validate_speaker(sender_id)
    sender_name = validate_speaker(sender_name, "sender_name")
    found = retrieve(keys, query, top_k=top_k, speaker_id=sender_id or None, distinct=True)
    hits = found.hits
    session_profile = _dated(*get_profile(keys, PROFILE_SESSION))
    speaker_profile = _dated(*get_profile(keys, PROFILE_SPEAKER, sender_id)) if sender_id else _dated(EMPTY_PROFILE)
    known = {fact.key: fact.value for fact in facts.speaker_facts(keys.user_key, sender_id)}
    if known:
        speaker_profile = {**speaker_profile, "facts": known}
    speaker = {"id": sender_id, "name": sender_name or speaker_profile.get("name", "")}
    episodes = [hit.as_dict() for hit in hits]
    blocks = render_blocks(session_profile, speaker, speaker_profile, episodes)
    context = {
        "speaker": speaker,
        "session_profile": session_profile,
        "speaker_profile": speaker_profile,
        "episodes": episodes,
    }
    if include_window:
        context["history"] = [message.as_dict() for message in window.recent_messages(keys)]
    chars = sum(len(block) for block in blocks)
    with transaction.atomic():
        register_scope(keys)
        snapshot = InjectionSnapshot(
            snapshot_id=secrets.token_hex(16),
            query_id=query_id,
            session_name=keys.session_name,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            isolation=keys.isolation,
            speaker_id=sender_id,
            episode_count=len(episodes),
            block_count=len(blocks),
            injected=bool(blocks),
            injection_chars=chars,
        )
        snapshot.set_payload(
            {**context, "query": found.query, "system_blocks": blocks, "retrieval": explanation(found, speaker)}
        )
        snapshot.save(force_insert=True)
        usage.record(snapshot, [episode["episode_id"] for episode in episodes])  # issue 18: one INSERT
        audit.append(
            "inject",
            actor,
            scope_key=keys.scope_key,
            user_key=keys.user_key,
            sender_id=sender_id,
            sender_name=sender_name,
            target_type="snapshot",
            target_id=snapshot.snapshot_id,
            query_id=query_id,
            summary=said(
                gettext_noop("injected %(episodes)s episodes in %(blocks)s blocks (%(chars)s chars)"),
                episodes=len(episodes),
                blocks=len(blocks),
                chars=chars,
            ),
            metadata={"episode_ids": [e["episode_id"] for e in episodes]},
        )
    prune_snapshots()
    return Injection(context, blocks, snapshot, hits)


def explanation(found: Retrieval, speaker: dict[str, Any]) -> dict[str, Any]:
    """The whole decision, as the snapshot keeps it: the query, the speaker, the floor, and the best
    SNAPSHOT_CANDIDATES candidates, each injected or dropped with its reason (below_floor,
    cut_by_top_k, duplicate) and its score breakdown (vector similarity, lexical score, weights)."""
    record = found.explanation()
    candidates = record["candidates"]
    for candidate in candidates:
        if candidate["outcome"] == KEPT:
            candidate["outcome"] = INJECTED
    record["candidates"] = candidates[:SNAPSHOT_CANDIDATES]
    record["candidates_total"] = len(candidates)
    record["speaker_name"] = speaker.get("name", "")
    if not found.hits:
        record["no_memory_reason"] = BELOW_FLOOR if candidates else NO_CANDIDATES
    return record


def prune_snapshots() -> int:
    """Delete snapshots older than MEMCONSOLE_SNAPSHOT_RETENTION_DAYS (0 keeps them all)."""
    days = settings.MEMCONSOLE_SNAPSHOT_RETENTION_DAYS
    if not days:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    old = list(InjectionSnapshot.objects.filter(recorded_at__lt=cutoff).values_list("pk", flat=True)[:PRUNE_BATCH])
    if not old:
        return 0
    return InjectionSnapshot.objects.filter(pk__in=old).delete()[0]


NEAR_MISSES = 10


def explain_snapshot(keys: ScopeKeys, snapshot: InjectionSnapshot) -> dict[str, Any] | None:
    """The snapshot's decision for the console: the injected memories beside the near misses (the
    best dropped candidates, with why: below_floor, cut_by_top_k or duplicate). Near misses are read from the
    scope's episodes as they are now (a snapshot keeps no content of what it did not inject); one
    deleted since is shown as gone. None for a snapshot recorded before candidates were kept."""
    payload = snapshot.payload
    decision = payload.get("retrieval")
    if not isinstance(decision, dict):
        return None
    candidates = [c for c in decision.get("candidates") or [] if isinstance(c, dict)]
    misses = [c for c in candidates if c.get("outcome") != INJECTED][:NEAR_MISSES]
    ids = [str(c.get("episode_id", "")) for c in misses]
    rows = {e.episode_id: e for e in Episode.objects.in_scope(keys.user_key).with_ids(ids)}
    near = []
    for candidate in misses:
        row = rows.get(str(candidate.get("episode_id", "")))
        near.append({**candidate, "content": row.content if row else "", "gone": row is None})
    named = [s for s in decision.get("named_speakers") or [] if isinstance(s, str) and s][:NEAR_MISSES]
    names = people.names_of(keys, named)
    return {
        "floor": decision.get("floor"),
        "top_k": decision.get("top_k"),
        "first_person": bool(decision.get("first_person")),
        # the speakers the question names, whose memories were searched first too (retrieval.NAMED_STAGE)
        "named_speakers": ", ".join(names.get(s) or s for s in named),
        "no_memory_reason": decision.get("no_memory_reason", ""),
        "candidates_total": decision.get("candidates_total", len(candidates)),
        "injected": payload.get("episodes") or [],
        "near_misses": near,
    }
