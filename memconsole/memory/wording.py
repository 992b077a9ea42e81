"""Words the domain writes in English, kept with what makes them translatable (docs/design.md §6).

The domain speaks English: audit summaries, error messages, job notes, in the API and in exports.
A face that speaks the reader's language (the console) needs more than the English text, so a
`Said` keeps the message it was made from (a msgid marked with `gettext_noop` where it is written,
placeholders `%(name)s`) and the values that filled it. A value may itself be a `Said` (a field's
reason inside a file's error); values named in `statuses` are episode statuses, said by their label.

`stored()` is the JSON form (an audit payload's "said", a job's error), `in_language()` reads it
back in the active language, or answers the English text when there is nothing to translate or
the stored values no longer fill the message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext

from .statuses import Status


@dataclass(frozen=True)
class Said:
    message: str
    values: dict[str, Any] = field(default_factory=dict)
    statuses: tuple[str, ...] = ()

    def english(self) -> str:
        if not self.values:
            return self.message  # formatted only with values, as gettext's messages are
        return self.message % {name: _english(value) for name, value in self.values.items()}

    def __str__(self) -> str:
        return self.english()

    def stored(self) -> dict[str, Any]:
        kept: dict[str, Any] = {"message": self.message, "values": {n: _stored(v) for n, v in self.values.items()}}
        if self.statuses:
            kept["statuses"] = list(self.statuses)
        return kept

    def cut(self, max_chars: int) -> Said:
        """The same words with every text value cut to `max_chars`."""
        values = {name: value[:max_chars] if isinstance(value, str) else value for name, value in self.values.items()}
        return Said(self.message, values, self.statuses)


def said(message: str, *, statuses: tuple[str, ...] = (), **values: Any) -> Said:
    """`message` must be marked with gettext_noop where it is written, so the catalogs hold it. A
    value may be a `Said`, or a list of them (said one after another: "content, tags")."""
    return Said(message, values, statuses)


def counted(n: int, one: str, many: str) -> Said:
    """ "%(n)s thing" or "%(n)s things" by `n` (both marked with gettext_noop where written), to say
    inside another message: "1 profile", never "1 profiles"."""
    return said(one if n == 1 else many, n=n)


def in_language(kept: Any, english: str) -> str:
    """`kept` (a `Said.stored()`) in the active language; `english` when it cannot be."""
    if not isinstance(kept, dict):
        return english  # nothing kept: written before words were kept, or plain English
    try:
        return _translated(kept)
    except (KeyError, TypeError, ValueError, AttributeError):
        return english  # stored values that no longer fill the message (an older message's placeholders)


def _english(value: Any) -> Any:
    if isinstance(value, list):
        return ", ".join(str(_english(item)) for item in value)
    return str(value) if isinstance(value, Said) else value


def _stored(value: Any) -> Any:
    if isinstance(value, list):
        return [_stored(item) for item in value]
    return value.stored() if isinstance(value, Said) else value


def _translated(kept: dict[str, Any]) -> str:
    values = {name: _translated_value(value) for name, value in kept["values"].items()}
    for name in kept.get("statuses", []):
        if values.get(name) in Status.values:
            values[name] = str(Status(values[name]).label).lower()
    message = gettext(str(kept["message"]))
    return message % values if values else message


def _translated_value(value: Any) -> Any:
    if isinstance(value, list):
        return ", ".join(str(_translated_value(item)) for item in value)
    return _translated(value) if isinstance(value, dict) else value
