"""Fixing memory from the answer that used it (issue 18): from an injection snapshot, an operator
marks an injected memory as wrong and archives it or lowers its importance. The reason, and the
snapshot it came from, go into the change's own audit entry (`archive` or `episode_edit`), so the
audit log says why. Editing the text is the edit screen's job (`editing.edit_episode`)."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_noop

from . import editing, episodes
from .audit import Actor
from .errors import Conflict, ValidationError
from .models import Episode, InjectionSnapshot
from .scopes import ScopeKeys
from .statuses import Status
from .validation import MIN_IMPORTANCE, text
from .wording import said

ARCHIVE, LOWER = "archive", "lower_importance"
ACTIONS = (ARCHIVE, LOWER)
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class Fix:
    episode: Episode
    action: str
    reason: str


def injected_ids(snapshot: InjectionSnapshot) -> list[str]:
    """The ids of the episodes this snapshot put into the prompt, in their order."""
    return [
        str(e["episode_id"])
        for e in snapshot.payload.get("episodes") or []
        if isinstance(e, dict) and "episode_id" in e
    ]


@dataclass(frozen=True)
class Now:
    """A memory a snapshot injected, as it is now: what its fix form offers and sends back (the
    version, so that a fix is made once, on the memory the operator saw)."""

    version: int
    status: str
    importance: int

    @property
    def can_archive(self) -> bool:
        return self.status != Status.ARCHIVED

    @property
    def can_lower(self) -> bool:
        return self.importance > MIN_IMPORTANCE


def current_states(keys: ScopeKeys, snapshot: InjectionSnapshot) -> dict[str, Now]:
    """{episode_id: how it is now} of the memories `snapshot` injected still in its scope."""
    rows = Episode.objects.in_scope(keys.user_key).with_ids(injected_ids(snapshot))
    fields = rows.values_list("episode_id", "version", "status", "importance")
    return {episode_id: Now(version, status, importance) for episode_id, version, status, importance in fields}


def fix_from_snapshot(
    keys: ScopeKeys,
    actor: Actor,
    snapshot: InjectionSnapshot,
    episode_id: str,
    action: str,
    reason: object,
    if_version: int | None = None,
) -> Fix:
    """Archive one memory `snapshot` injected, or lower its importance by one, recording `reason`.

    `ValidationError` for another snapshot's memory, an unknown action, an empty reason or an
    importance already at its lowest; `NotFound` when the memory is gone; `Conflict` when
    `if_version` (the version the operator saw) is not the memory's now: the same form sent twice
    lowers it once.
    """
    actor.require_bot(keys)
    if snapshot.user_key != keys.user_key:
        raise ValidationError("this snapshot belongs to another memory space")
    if action not in ACTIONS:
        raise ValidationError(f"unknown fix {action!r} (use {', '.join(ACTIONS)})", field="action")
    why = text(reason, "reason", MAX_REASON_CHARS, trim=True)
    if not why:
        raise ValidationError(
            said(gettext_noop("say why the memory is wrong: the reason goes into the audit log")), field="reason"
        )
    if episode_id not in injected_ids(snapshot):
        raise ValidationError(said(gettext_noop("that memory was not injected by this snapshot")), field="episode_id")
    note = {"reason": why, "from_snapshot": snapshot.snapshot_id}
    episode = episodes.get_episode(keys, episode_id)  # NotFound when deleted since
    if if_version is not None and episode.version != if_version:
        raise Conflict(episode.version)
    if action == ARCHIVE:
        if episode.effective_status == Status.ARCHIVED:  # nothing would change, nor be audited with the reason
            raise ValidationError(
                said(gettext_noop("this memory is already archived: the bot no longer uses it")), field="action"
            )
        changed = episodes.archive(keys, actor, [episode_id], note=note)
        return Fix(changed[0] if changed else episode, action, why)
    if episode.importance <= MIN_IMPORTANCE:
        raise ValidationError(
            said(gettext_noop("this memory already has the lowest importance; archive it instead")), field="action"
        )
    lowered = episode.importance - 1
    edit = editing.edit_episode(keys, actor, episode_id, importance=lowered, if_version=if_version, note=note)
    return Fix(edit.episode, action, why)
