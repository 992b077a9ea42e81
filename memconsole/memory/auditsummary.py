"""An audit entry's summary, readable in the reader's language (docs/design.md §6).

A summary is written once, in English, into the entry's payload (covered by the chain, and what
exports carry). Beside it the payload keeps what it was made from under "said": the message (a
msgid marked with `gettext_noop`, placeholders `%(name)s`), the values it was filled with and
which of them are episode statuses, so the console says it again in the reader's language. An
entry with a plain-text summary (every entry written before this) reads as stored. Erasure's
redaction replaces the whole payload, the values with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext

from .models import Status

SUMMARY_MAX = 240


@dataclass(frozen=True)
class Summary:
    message: str
    values: dict[str, Any] = field(default_factory=dict)
    statuses: tuple[str, ...] = ()  # the values that are episode statuses, shown by their label

    def english(self) -> str:
        return (self.message % self.values)[:SUMMARY_MAX]

    def stored(self) -> dict[str, Any]:
        kept: dict[str, Any] = {"message": self.message, "values": self.values}
        if self.statuses:
            kept["statuses"] = list(self.statuses)
        return kept


def said(message: str, *, statuses: tuple[str, ...] = (), **values: Any) -> Summary:
    """`message` must be marked with gettext_noop where it is written, so the catalogs hold it;
    a text value longer than a whole summary is cut to one."""
    cut = {name: value[:SUMMARY_MAX] if isinstance(value, str) else value for name, value in values.items()}
    return Summary(message, cut, statuses)


def in_language(payload: dict[str, Any]) -> str:
    """The entry's summary in the active language; as stored when the payload keeps no message,
    or when the stored values no longer fill it (an entry older than a message's placeholders)."""
    kept = payload.get("said")
    stored = str(payload.get("summary", ""))
    if not isinstance(kept, dict) or not isinstance(kept.get("values"), dict):
        return stored
    values = dict(kept["values"])
    for name in kept.get("statuses", []):
        if values.get(name) in Status.values:
            values[name] = str(Status(values[name]).label).lower()
    try:
        return (gettext(str(kept.get("message", ""))) % values)[:SUMMARY_MAX]
    except (KeyError, TypeError, ValueError):
        return stored
