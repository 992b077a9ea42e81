"""Value coercion for imported records: each reads one field and fails with the record's place.

Shared by every format (issue 14: a detail is adjusted and reported, a wrong type rejects the file):
- content is a string (not a number), trimmed;
- statuses are read case- and space-insensitively; missing reads as active, `deleted` is LangBot's
  forgotten memory (the plan skips it), any other name is imported as active with a warning;
- importance is a whole number or its digits (missing: 2), clamped to 1-5 like a live write
  (`validation.clamp_importance`) with a warning;
- tags a list of strings or a comma-joined string;
- times ISO 8601 or epoch seconds/milliseconds (naive times read as UTC); an episode's empty
  timestamp ("", LangBot's "no time") becomes the import time with a warning, a missing one stays
  unknown;
- profiles over the trait/preference limits lose their oldest items (`profiles.apply_items`) and
  over-long notes are cut, with a warning.

Warnings are `Note`s `(kind, message)` that the reader collects on the record; `plan.resolve` puts
those of the records it keeps into the report.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_noop

from .. import profiles, validation
from ..errors import ValidationError
from ..models import STATUS_ACTIVE, STATUSES
from ..wording import Said, said
from .report import ImportFileError

MAX_OLD_ID_CHARS = 255
MAX_SOURCE_CHARS = 64  # Episode.original_source
MAX_LISTED_ITEMS = 200  # characters of evicted profile items named in a warning
DEFAULT_IMPORTANCE = 2
# LangBot's status of a memory the user asked the bot to forget; memconsole deletes such rows, so
# an import never writes one (it would come back as active: docs/design.md §7).
DELETED = "deleted"

# The reasons a field is refused that more than one reader gives (`fail`).
MUST_BE_STRING = gettext_noop("must be a string")
MUST_BE_OBJECT = gettext_noop("must be an object")
HAS_NUL = gettext_noop("contains a NUL character")
HAS_SURROGATE = gettext_noop("is not valid text (it holds a lone surrogate)")
TOO_LONG = gettext_noop("is longer than %(max)s characters")
NOT_A_TIME = gettext_noop("must be an ISO-8601 date and time")
OUT_OF_RANGE = gettext_noop("%(value)s is out of range")
NOT_A_LIST = gettext_noop("%(place)s'%(name)s' must be a list")
LINES_JOINED = gettext_noop("the profile's %(name)s held line breaks; joined on one line")

# (kind, message): a value adjusted on the way in, reported as a warning.
Note = tuple[str, str | Said]


def fail(where: str, name: str, reason: str | Said, **values: Any) -> ImportFileError:
    """The file's error at one field; `reason` (marked with gettext_noop) is filled with `values`."""
    why = reason if isinstance(reason, Said) else said(reason, **values)
    return ImportFileError(
        said(gettext_noop("%(where)s, field '%(name)s': %(reason)s"), where=where, name=name, reason=why), field=name
    )


def text(value: Any, where: str, name: str, max_chars: int, required: bool = False, trim: bool = False) -> str:
    """A string (an int is taken as its digits) of at most `max_chars`, without NUL or lone surrogates;
    with `trim`, its outer whitespace removed first, so the limit is the text that is kept."""
    if value is None:
        value = ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail(where, name, MUST_BE_STRING)
    out = str(value).strip() if trim else str(value)
    if "\x00" in out:
        raise fail(where, name, HAS_NUL)
    if not validation.is_utf8(out):
        raise fail(where, name, HAS_SURROGATE)
    if required and not out.strip():
        raise fail(where, name, gettext_noop("is missing or empty"))
    if len(out) > max_chars:
        raise fail(where, name, TOO_LONG, max=max_chars)
    return out


def kind(value: Any, where: str, notes: list[Note]) -> str:
    """An episode's kind (issue 20): a short label, or "" with a note when it cannot be one."""
    if value is None or value == "":
        return ""
    try:
        return validation.validate_kind(text(value, where, "kind", 1000))
    except ValidationError:
        dropped = gettext_noop("%(where)s: kind %(kind)s is not a short label; not kept")
        notes.append(("kind_dropped", said(dropped, where=where, kind=repr(str(value)[:60]))))
        return ""


def identifier(value: Any, where: str, name: str, max_chars: int, *, required: bool = False) -> str:
    """An id kept as a live write keeps it: a fact's subject or key (`required`,
    `validation.validate_identifier`) or a speaker's id (`validation.validate_speaker`)."""
    kept = text(value, where, name, max_chars, required=required, trim=True)
    try:
        if required:
            return validation.validate_identifier(kept, name, max_chars)
        return validation.validate_speaker(kept, name)
    except ValidationError as exc:
        raise fail(where, name, exc.said or exc.message.removeprefix(f"{name} ")) from None


def metadata(value: Any, where: str) -> dict[str, Any]:
    """An episode's metadata (issue 20): a JSON object within the limits of a live write, else fails."""
    try:
        return validation.validate_metadata(value)
    except ValidationError as exc:
        raise fail(where, "metadata", exc.said or exc.message.removeprefix("metadata ")) from None


def content(value: Any, where: str, name: str = "content") -> str:
    """An episode's text: a string (a number is a wrong type here), trimmed, not empty, within the limit."""
    if value is not None and not isinstance(value, str):
        raise fail(where, name, MUST_BE_STRING)
    return text(value or "", where, name, validation.max_content_chars(), required=True, trim=True)


def importance(value: Any, where: str, notes: list[Note]) -> int:
    """A whole number (or its digits), clamped to 1-5 with a note; anything else fails."""
    if value is None or value == "":
        return DEFAULT_IMPORTANCE
    number = value
    if isinstance(value, str):
        stripped = value.strip()
        digits = stripped.removeprefix("-")
        # isdecimal, not isdigit: int() refuses superscripts such as "²"; the length cap keeps
        # int() away from thousands of digits.
        if digits.isdecimal() and len(digits) <= 10:
            number = int(stripped)
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int):
        raise fail(
            where,
            "importance",
            gettext_noop("must be a whole number from 1 to 5, not %(value)s"),
            value=f"{value!r:.40}",
        )
    clamped, adjusted = validation.clamp_importance(number)
    if adjusted:
        shown = str(number) if abs(number) < 10**12 else f"{number:.3g}"
        clamp = gettext_noop("importance %(given)s is outside 1-5; stored as %(stored)s")
        notes.append(("importance_clamped", said(clamp, given=shown, stored=clamped)))
    return clamped


def tags(value: Any, where: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list):
        items = value
        for item in items:
            if not isinstance(item, str):
                raise fail(where, "tags", gettext_noop("must be strings"))
            if "," in item:
                raise fail(where, "tags", gettext_noop("a tag may not contain a comma (%(tag)s)"), tag=f"{item!r:.40}")
    else:
        raise fail(where, "tags", gettext_noop("must be a list of strings or a comma-joined string"))
    out: list[str] = []
    for item in items:
        tag = item.strip()
        if "\x00" in tag:
            raise fail(where, "tags", HAS_NUL)
        if not validation.is_utf8(tag):
            raise fail(where, "tags", HAS_SURROGATE)
        if len(tag) > validation.MAX_TAG_CHARS:
            raise fail(
                where, "tags", gettext_noop("a tag is longer than %(max)s characters"), max=validation.MAX_TAG_CHARS
            )
        if tag and tag not in out:
            out.append(tag)
    check_tag_count(out, where)
    return out


def check_tag_count(values: list[str], where: str) -> None:
    if len(values) > validation.MAX_TAGS:
        raise fail(where, "tags", gettext_noop("at most %(max)s tags"), max=validation.MAX_TAGS)


def status(value: Any, where: str, notes: list[Note]) -> str:
    """A status name read as LangBot does ("Archived " is archived); `DELETED` passes through for
    the plan to skip; an unknown name is active, with a note."""
    if value is None:
        return STATUS_ACTIVE.value
    if not isinstance(value, str):
        raise fail(where, "status", MUST_BE_STRING)
    name = value.strip().lower()
    if not name:
        return STATUS_ACTIVE.value
    if name in STATUSES or name == DELETED:
        return name
    unknown = gettext_noop("unknown status %(status)s; imported as active")
    notes.append(("unknown_status", said(unknown, status=f"{value.strip()!r:.60}")))
    return STATUS_ACTIVE.value


def source(value: Any, where: str) -> str:
    """The record's `source` in the system it came from (kept as `original_source`)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise fail(where, "source", MUST_BE_STRING)
    return text(value, where, "source", MAX_OLD_ID_CHARS, trim=True)[:MAX_SOURCE_CHARS]


def time(value: Any, where: str, name: str = "timestamp") -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise fail(where, name, NOT_A_TIME)
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value  # epoch milliseconds or seconds
        try:
            stamp = datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise fail(where, name, gettext_noop("%(value)s is not a valid time"), value=f"{value!r:.40}") from None
        if not validation.in_time_range(stamp):
            raise fail(where, name, OUT_OF_RANGE, value=f"{value!r:.40}")
        return stamp
    if not isinstance(value, str) or len(value) > 64:
        raise fail(where, name, NOT_A_TIME)
    stripped = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", stripped):
        return time(float(stripped), where, name)
    try:
        parsed = datetime.fromisoformat(stripped.replace(" ", "T", 1) if "T" not in stripped else stripped)
    except ValueError:
        raise fail(
            where, name, gettext_noop("%(value)s is not an ISO-8601 date and time"), value=f"{value!r:.40}"
        ) from None
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    if not validation.in_time_range(parsed):
        raise fail(where, name, OUT_OF_RANGE, value=f"{value!r:.40}")
    return parsed


def episode_time(
    value: Any, where: str, notes: list[Note], imported_at: datetime, name: str = "timestamp"
) -> datetime | None:
    """An episode's time; an empty one ("" or blanks, LangBot's "no time") is the import time, with a
    note, and so is one in the future (a live write refuses it: it would rank as brand new until it
    came). A missing one (None, NULL) stays unknown."""
    if isinstance(value, str) and not value.strip():
        notes.append(
            ("timestamp_missing", said(gettext_noop("the %(name)s is empty; the import time is used"), name=name))
        )
        return imported_at
    when = time(value, where, name)
    if when is not None and when > imported_at + validation.CLOCK_SKEW:
        notes.append(
            (
                "timestamp_future",
                said(gettext_noop("the %(name)s is in the future; the import time is used"), name=name),
            )
        )
        return imported_at
    return when


def old_id(value: Any, where: str, name: str = "id") -> str:
    """The id a record had in its source (kept as `imported_episode_id`)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail(where, name, MUST_BE_STRING)
    out = str(value).strip()
    if "\x00" in out:
        raise fail(where, name, HAS_NUL)
    if len(out) > MAX_OLD_ID_CHARS:
        raise fail(where, name, TOO_LONG, max=MAX_OLD_ID_CHARS)
    if not validation.is_utf8(out):
        raise fail(where, name, HAS_SURROGATE)
    return out


def _breaks(value: str) -> bool:
    return any(unicodedata.category(char) in validation.LINE_BREAKING for char in value.strip())


def profile_data(value: Any, where: str, notes: list[Note]) -> dict[str, Any]:
    """A whole profile, checked like a live write; over its limits it keeps the newest traits and
    preferences (the last in the file: the oldest go first, `profiles.apply_items`) and cuts the notes,
    with a note for each. Items of the wrong type fail."""
    if not isinstance(value, dict):
        raise fail(where, "profile", MUST_BE_OBJECT)
    data = dict(value)
    # A name, trait or preference is one line (a live write refuses a line break): joined, and said.
    if isinstance(data.get("name"), str) and _breaks(data["name"]):
        data["name"] = validation.one_line(data["name"])
        notes.append(("name_lines_joined", said(LINES_JOINED, name="name")))
    for name, limit in (("traits", validation.MAX_TRAITS), ("preferences", validation.MAX_PREFERENCES)):
        items = data.get(name)
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            continue  # validate_profile_data names the wrong type
        if any(_breaks(item) for item in items):
            notes.append((f"{name}_lines_joined", said(LINES_JOINED, name=name)))
            items = [validation.one_line(item) for item in items]
        kept, evicted = profiles.apply_items([], [item.strip() for item in items], [], limit)
        if evicted:
            listed = ", ".join(evicted)
            if len(listed) > MAX_LISTED_ITEMS:
                listed = listed[:MAX_LISTED_ITEMS] + "…"
            message = said(
                gettext_noop(
                    "%(count)s %(name)s (a profile holds at most %(limit)s): the %(left)s oldest were left out: %(listed)s"
                ),
                count=len(kept) + len(evicted),
                name=name,
                limit=limit,
                left=len(evicted),
                listed=listed,
            )
            notes.append((f"{name}_evicted", message))
        data[name] = kept
    if isinstance(data.get("notes"), str) and len(data["notes"]) > validation.MAX_NOTES:
        cut = gettext_noop("the notes were cut at %(max)s characters")
        notes.append(("notes_cut", said(cut, max=validation.MAX_NOTES)))
        data["notes"] = data["notes"][: validation.MAX_NOTES]
    try:
        return profiles.validate_profile_data(data)
    except ValidationError as exc:
        raise fail(where, f"profile.{exc.field or 'profile'}", exc.said or exc.message) from None
