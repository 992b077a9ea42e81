"""Input validation and limits: the one place for every limit a memory operation enforces.

Each `validate_*` returns the clean value or raises `errors.ValidationError` naming the field.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_noop

from .episode_extras import MAX_KIND_CHARS
from .errors import ValidationError
from .models import SOURCES, STATUS_ACTIVE, STATUSES
from .wording import said

MAX_TAGS = 20
MAX_TAG_CHARS = 64
MAX_SENDER_CHARS = 255
MAX_TRAITS = 20
MAX_PREFERENCES = 10
MAX_ITEM_CHARS = 200
MAX_NOTES = 2000
MAX_PROFILE_NAME = 100
MAX_QUERY_CHARS = 2000
MAX_QUERY_ID_CHARS = 255
TOP_K_MAX = 50
PAGE_SIZES = (10, 25, 50)
MAX_LIST_LIMIT = 200
MIN_IMPORTANCE, MAX_IMPORTANCE = 1, 5

# An episode's kind (issue 20): a short label, letters, digits and _ . : - (e.g. jw-agents' "fact_recalled").
KIND = re.compile(rf"^[\w.:-]{{1,{MAX_KIND_CHARS}}}$")
MAX_VERSION = 2**31 - 1  # a stored version (profiles, facts, episodes): a PositiveIntegerField
KIND_OR_NONE = re.compile(rf"^[\w.:-]{{0,{MAX_KIND_CHARS}}}$")  # the faces' form: "" is no kind
# An episode's metadata: a JSON object of at most this many bytes (UTF-8, compact) and this depth.
MAX_METADATA_BYTES = 8192
MAX_METADATA_DEPTH = 8

EPISODE_ID_CHARS = "[0-9a-f]{12}"  # what `models.new_episode_id` makes
EPISODE_ID = re.compile(f"^{EPISODE_ID_CHARS}$")
EPISODE_ID_IN_TEXT = re.compile(rf"\b{EPISODE_ID_CHARS}\b")


def max_content_chars() -> int:
    return settings.MEMCONSOLE_MAX_CONTENT_CHARS


def is_utf8(value: str) -> bool:
    """False for strings no database or tokenizer can take (lone surrogates, e.g. from JSON "\\ud800")."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_episode_id(value: Any) -> bool:
    return isinstance(value, str) and EPISODE_ID.fullmatch(value) is not None


def validate_speaker(value: Any, name: str = "sender_id") -> str:
    """A speaker's id or name: text of at most MAX_SENDER_CHARS, trimmed of spaces and invisible
    format characters (" u7 " and "\ufeffu7" are u7, as in profiles, facts and the window, so erasure
    and speaker matching see one person), on one line: a name is written into the headers of an
    injected prompt, so no line breaks or other control characters. An id (a platform's identifier)
    holds no invisible character at all; a name may (the joiner inside an emoji)."""
    return _one_person(trimmed(text(value, name, MAX_SENDER_CHARS)), name, identifier=name == "sender_id")


def validate_identifier(value: Any, name: str, max_chars: int) -> str:
    """A fact's subject or key, required: trimmed and refused as a sender_id is (`validate_speaker`),
    so the fact about " u7" or "\ufeffu7" is u7's, on their profile and in their erasure."""
    cleaned = _one_person(trimmed(text(value, name, max_chars, required=True, trim=True)), name, identifier=True)
    if not cleaned:
        raise ValidationError(f"{name} is required", field=name)
    return cleaned


def _one_person(cleaned: str, name: str, *, identifier: bool) -> str:
    refused = LINE_BREAKING | ({"Cf"} if identifier else set())
    if any(unicodedata.category(char) in refused for char in cleaned):
        raise ValidationError(
            f"{name} may not contain line breaks or other control or invisible characters", field=name
        )
    return cleaned


# Control characters and the line and paragraph separators: what may break a line of a prompt.
LINE_BREAKING = {"Cc", "Zl", "Zp"}


def single_line(value: str, name: str) -> str:
    """`value`, refused when it holds a line break or another control character (a profile's name,
    a trait, a preference: each is one line of what is injected and listed)."""
    if any(unicodedata.category(char) in LINE_BREAKING for char in value):
        raise ValidationError(f"{name} may not contain line breaks or other control characters", field=name)
    return value


def one_line(value: str) -> str:
    """`value` on one line: each run of whitespace and control characters one space (an import
    adjusts a profile's text with this, where a live write is refused by `single_line`; the
    injection writes every stored value in a prompt with it)."""
    spaced = "".join(" " if unicodedata.category(char) in LINE_BREAKING else char for char in value)
    return " ".join(spaced.split())


def trimmed(value: str) -> str:
    """`value` without whitespace or invisible format characters (zero-width space, BOM, marks) at its ends."""
    start, end = 0, len(value)
    while start < end and (value[start].isspace() or unicodedata.category(value[start]) == "Cf"):
        start += 1
    while end > start and (value[end - 1].isspace() or unicodedata.category(value[end - 1]) == "Cf"):
        end -= 1
    return value[start:end]


def text(value: Any, name: str, max_chars: int, required: bool = False, trim: bool = False) -> str:
    """A string of at most `max_chars` characters, without NUL or lone surrogates (None reads as "");
    with `trim`, its outer whitespace removed first, so the limit is the text that is kept."""
    if value is None:
        value = ""
    if trim and isinstance(value, str):
        value = value.strip()
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string", field=name)
    if "\x00" in value:
        raise ValidationError(f"{name} contains a NUL character", field=name)
    if not is_utf8(value):
        raise ValidationError(f"{name} is not valid text (it holds a lone surrogate)", field=name)
    if required and not trimmed(value):  # spaces or invisible characters only ("\u200b") are empty too
        raise ValidationError(f"{name} must not be empty", field=name)
    if len(value) > max_chars:
        raise ValidationError(f"{name} is longer than {max_chars} characters", field=name)
    return value


def validate_tags(tags: Any) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise ValidationError("tags must be a list of strings", field="tags")
    out: list[str] = []
    for tag in tags:
        tag = trimmed(text(tag, "tags", MAX_TAG_CHARS, trim=True))  # "\u200b" is no tag, as "  " is none
        if "," in tag:
            raise ValidationError("a tag may not contain a comma", field="tags")
        if tag and tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise ValidationError(f"at most {MAX_TAGS} tags", field="tags")
    return out


def clipped_text(value: Any, name: str, max_chars: int) -> tuple[str, bool]:
    """`text` without the length limit, then cut at `max_chars`: (the text, whether it was cut)."""
    whole = text(value, name, sys.maxsize)
    return whole[:max_chars], len(whole) > max_chars


def _whole_number(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{name} must be a whole number from {MIN_IMPORTANCE} to {MAX_IMPORTANCE}", field=name)
    return value


def validate_importance(value: Any, name: str = "importance") -> int:
    """An importance given as a filter (importance_min): a whole number from 1 to 5, else refused."""
    number = _whole_number(value, name)
    if not MIN_IMPORTANCE <= number <= MAX_IMPORTANCE:
        raise ValidationError(f"{name} must be from {MIN_IMPORTANCE} to {MAX_IMPORTANCE}", field=name)
    return number


def clamp_importance(value: Any, name: str = "importance") -> tuple[int, bool]:
    """An importance to store: any whole number, clamped to 1-5 (7 -> 5, 0 or less -> 1), and whether it
    was adjusted. A model choosing 7 must not lose the memory; a non-integer is still refused."""
    number = _whole_number(value, name)
    clamped = min(MAX_IMPORTANCE, max(MIN_IMPORTANCE, number))
    return clamped, clamped != number


def validate_statuses(statuses: Any) -> list[str]:
    """The statuses named (de-duplicated, in order); None or an empty list means active only."""
    if statuses is None:
        return [STATUS_ACTIVE]
    if isinstance(statuses, str) or not isinstance(statuses, (list, tuple, set, frozenset)):
        raise ValidationError("statuses must be a list", field="statuses")
    out = []
    for status in statuses:
        if status not in STATUSES:
            raise ValidationError(f"unknown status {status!r} (use {', '.join(STATUSES)})", field="statuses")
        if status not in out:
            out.append(status)
    return out or [STATUS_ACTIVE]


def validate_datetime(value: Any, name: str) -> datetime | None:
    """An aware date-time; one without a time zone is read as UTC (LangBot's rule)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a date and time", field=name)
    aware: datetime = value.replace(tzinfo=UTC) if timezone.is_naive(value) else value
    if not in_time_range(aware):
        raise ValidationError(f"{name} is out of range", field=name)
    return aware


CLOCK_SKEW = timedelta(minutes=5)  # how far ahead of this server a bot's clock may be


def validate_event_time(value: Any, name: str = "timestamp") -> datetime | None:
    """An episode's time, when it happened or was said: `validate_datetime`, and not more than
    CLOCK_SKEW ahead of now (a future time would rank as brand new until it came)."""
    aware = validate_datetime(value, name)
    if aware is not None and aware > timezone.now() + CLOCK_SKEW:
        message = gettext_noop("%(name)s is in the future: an episode's time is when it happened or was said")
        raise ValidationError(said(message, name=name), field=name)
    return aware


# The times memconsole stores: a day inside the calendar's ends, so that every time zone can show them.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def in_time_range(aware: datetime) -> bool:
    """Whether an aware time lies within EARLIEST..LATEST (9999-12-31T23:00-05:00 has no UTC time at all)."""
    try:
        return EARLIEST <= aware.astimezone(UTC) <= LATEST
    except (OverflowError, ValueError):
        return False


def validate_top_k(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= TOP_K_MAX:
        raise ValidationError(f"top_k must be a whole number from 1 to {TOP_K_MAX}", field="top_k")
    return value


def validate_list_limit(value: Any) -> int:
    """A page size for listing episodes: 1 to MAX_LIST_LIMIT."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIST_LIMIT:
        raise ValidationError("page size out of range", field="limit")
    return value


def validate_episode_ids(value: Any) -> list[str]:
    """A list of episode ids as given, or ValidationError (anything else, e.g. an object, is refused)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ValidationError("episode_ids must be a list of episode ids", field="episode_ids")
    if not all(isinstance(episode_id, str) for episode_id in value):
        raise ValidationError("episode ids must be strings", field="episode_ids")
    if not value:
        raise ValidationError("no episodes selected", field="episode_ids")
    return list(value)


def validate_kind(value: Any, name: str = "kind") -> str:
    """An episode's kind ("" for none): a short label of letters, digits and _ . : -."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or KIND.fullmatch(value.strip()) is None:
        raise ValidationError(
            f"{name} must be at most {MAX_KIND_CHARS} letters, digits or _ . : - (e.g. fact_recalled)", field=name
        )
    return value.strip()


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    return 0


def validate_metadata(value: Any, name: str = "metadata") -> dict[str, Any]:
    """An episode's metadata ({} for none): a JSON object of plain JSON values, at most
    MAX_METADATA_BYTES as compact UTF-8 JSON and MAX_METADATA_DEPTH levels deep."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(f"{name} must be a JSON object", field=name)
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        raise ValidationError(f"{name} must hold only JSON values (no NaN or Infinity)", field=name) from None
    if "\\u0000" in encoded or not is_utf8(encoded):
        raise ValidationError(f"{name} contains a NUL character or a lone surrogate", field=name)
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise ValidationError(f"{name} is larger than {MAX_METADATA_BYTES} bytes as JSON", field=name)
    if _depth(value) > MAX_METADATA_DEPTH:
        raise ValidationError(f"{name} is nested more than {MAX_METADATA_DEPTH} levels deep", field=name)
    result: dict[str, Any] = json.loads(encoded)  # a plain copy: tuples become lists, keys strings
    return result


# --- an episode to remember --------------------------------------------------------------------


@dataclass(frozen=True)
class NewEpisode:
    """An episode to store, validated (`validate_new_episode`): what `remember` and
    `batch_remember.remember_many` store, with the inputs that were adjusted to fit a limit."""

    content: str
    tags: list[str]
    importance: int
    sender_id: str
    sender_name: str
    timestamp: datetime
    source: str
    query_id: str
    kind: str
    metadata: dict[str, Any]
    adjusted: list[str]


def validate_new_episode(
    content: Any,
    *,
    tags: Any = None,
    importance: Any = 2,
    sender_id: Any = "",
    sender_name: Any = "",
    timestamp: Any = None,
    source: str = "agent",
    query_id: Any = "",
    kind: Any = "",
    metadata: Any = None,
) -> NewEpisode:
    """remember's inputs checked (`ValidationError` naming the field) and cleaned: content trimmed,
    importance clamped to 1-5 (then named in `adjusted`), timestamp now when absent, never ahead."""
    content = text(
        content.strip() if isinstance(content, str) else content, "content", max_content_chars(), required=True
    )
    tags = validate_tags(tags)
    importance, importance_adjusted = clamp_importance(importance)
    sender_id = validate_speaker(sender_id)
    sender_name = validate_speaker(sender_name, "sender_name")
    timestamp = validate_event_time(timestamp) or timezone.now()
    query_id = text(query_id, "query_id", MAX_QUERY_ID_CHARS)
    kind = validate_kind(kind)
    metadata = validate_metadata(metadata)
    if source not in SOURCES:
        raise ValidationError(f"unknown source {source!r}", field="source")
    adjusted = ["importance"] if importance_adjusted else []
    return NewEpisode(
        content, tags, importance, sender_id, sender_name, timestamp, source, query_id, kind, metadata, adjusted
    )
