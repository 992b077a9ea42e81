"""An episode's `kind` and its free-form `metadata` (issue 20; docs/design.md §3).

`kind` is a short label on the episode row (a jw-agents record's kind: question, answer, ...),
filterable like a status. `metadata` is a JSON object sealed like content (the same `seal`), kept
in its own row, `EpisodeMetadata`, only for episodes that have one: key rotation re-encrypts it as
one more sealed table, and deleting an episode deletes it (cascade). Both are validated in
`validation.py` (`validate_kind`, `validate_metadata`).

Named here and imported by models.py (which this module cannot import): `EpisodeExtras` is the
abstract base `Episode` inherits the field and the accessor from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.db.models import prefetch_related_objects

from .install import Sealed

MAX_KIND_CHARS = 40


class EpisodeExtras(models.Model):
    """Abstract: what `Episode` gains for issue 20 (its `kind` column and its `metadata` accessor)."""

    kind = models.CharField(max_length=MAX_KIND_CHARS, blank=True, default="")

    class Meta:
        abstract = True

    @property
    def metadata(self) -> dict[str, Any]:
        """The episode's metadata ({} when it has none); `prefetch_metadata` reads many at once."""
        try:
            row: EpisodeMetadata = getattr(self, "metadata_row")  # noqa: B009 (the reverse accessor)
        except ObjectDoesNotExist:
            return {}
        return row.payload

    @property
    def metadata_json(self) -> str:
        """The metadata as indented JSON for the console ("" when there is none)."""
        data = self.metadata
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) if data else ""


class EpisodeMetadata(Sealed):
    """One episode's metadata, a JSON object stored plain or Fernet-encrypted (like `SealedPayload`)."""

    episode = models.OneToOneField("memory.Episode", on_delete=models.CASCADE, related_name="metadata_row")
    payload_stored = models.TextField(db_column="payload", default="{}")
    encrypted = models.BooleanField(default=False)
    sealed_column = "payload_stored"

    def __str__(self) -> str:
        return f"metadata of episode #{self.episode_id}"

    @property
    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.opened())
        return data

    def set_payload(self, data: dict[str, Any]) -> None:  # set `episode` first: its id is sealed in
        self.seal_column(json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")))


def metadata_row(episode: Any, data: dict[str, Any]) -> EpisodeMetadata:
    """A new (unsaved) sealed metadata row for a saved episode (`data` already validated, not empty)."""
    row = EpisodeMetadata(episode=episode)
    row.set_payload(data)
    return row


def save_metadata(episode: Any, data: dict[str, Any]) -> None:
    """Store a saved episode's metadata (nothing for {}), and cache it on the instance."""
    if not data:
        return
    row = metadata_row(episode, data)
    row.save(force_insert=True)
    episode.metadata_row = row  # the reverse one-to-one cache


def prefetch_metadata(episodes: Iterable[models.Model]) -> None:
    """Read the metadata of many episodes in one query (before reading `.metadata` of each)."""
    prefetch_related_objects(list(episodes), "metadata_row")
