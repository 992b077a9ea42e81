"""Value coercion for imported records: each reads one field and fails with the record's place.

Shared by every format: statuses missing or unknown read as active; importance may be an int or
a string "1"-"5" (missing: 2); tags a list or a comma-joined string; times ISO 8601 or epoch
seconds/milliseconds (naive times read as UTC).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from .. import profiles, validation
from ..errors import ValidationError
from ..models import STATUS_ACTIVE, STATUSES
from .report import ImportFileError

MAX_OLD_ID_CHARS = 255
DEFAULT_IMPORTANCE = 2


def fail(where: str, name: str, message: str) -> ImportFileError:
    return ImportFileError(f"{where}, field '{name}': {message}", field=name)


def text(value: Any, where: str, name: str, max_chars: int, required: bool = False) -> str:
    """A string (an int is taken as its digits) of at most `max_chars`, without NUL or lone surrogates."""
    if value is None:
        value = ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail(where, name, "must be a string")
    out = str(value)
    if "\x00" in out:
        raise fail(where, name, "contains a NUL character")
    if not validation.is_utf8(out):
        raise fail(where, name, "is not valid text (it holds a lone surrogate)")
    if required and not out.strip():
        raise fail(where, name, "is missing or empty")
    if len(out) > max_chars:
        raise fail(where, name, f"is longer than {max_chars} characters")
    return out


def importance(value: Any, where: str) -> int:
    if value is None or value == "":
        return DEFAULT_IMPORTANCE
    if isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) <= 10:
        # isdecimal, not isdigit: int() refuses superscripts such as "²"; the length cap keeps
        # int() away from thousands of digits.
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise fail(where, "importance", f"must be a whole number from 1 to 5, not {value!r:.40}")
    return value


def tags(value: Any, where: str) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list):
        items = value
        for item in items:
            if not isinstance(item, str):
                raise fail(where, "tags", "must be strings")
            if "," in item:
                raise fail(where, "tags", f"a tag may not contain a comma ({item!r:.40})")
    else:
        raise fail(where, "tags", "must be a list of strings or a comma-joined string")
    out: list[str] = []
    for item in items:
        tag = item.strip()
        if "\x00" in tag:
            raise fail(where, "tags", "contains a NUL character")
        if not validation.is_utf8(tag):
            raise fail(where, "tags", "is not valid text (it holds a lone surrogate)")
        if len(tag) > validation.MAX_TAG_CHARS:
            raise fail(where, "tags", f"a tag is longer than {validation.MAX_TAG_CHARS} characters")
        if tag and tag not in out:
            out.append(tag)
    check_tag_count(out, where)
    return out


def check_tag_count(values: list[str], where: str) -> None:
    if len(values) > validation.MAX_TAGS:
        raise fail(where, "tags", f"at most {validation.MAX_TAGS} tags")


def status(value: Any) -> str:
    return value if isinstance(value, str) and value in STATUSES else STATUS_ACTIVE.value


def time(value: Any, where: str, name: str = "timestamp") -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise fail(where, name, "must be an ISO-8601 date and time")
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 1e11 else value  # epoch milliseconds or seconds
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise fail(where, name, f"{value!r:.40} is not a valid time") from None
    if not isinstance(value, str) or len(value) > 64:
        raise fail(where, name, "must be an ISO-8601 date and time")
    stripped = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", stripped):
        return time(float(stripped), where, name)
    try:
        parsed = datetime.fromisoformat(stripped.replace(" ", "T", 1) if "T" not in stripped else stripped)
    except ValueError:
        raise fail(where, name, f"{value!r:.40} is not an ISO-8601 date and time") from None
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    try:
        parsed.astimezone(UTC)  # the database stores UTC: 9999-12-31T23:00-05:00 has no UTC time
    except (OverflowError, ValueError):
        raise fail(where, name, f"{value!r:.40} is out of range") from None
    return parsed


def old_id(value: Any, where: str) -> str:
    """The id a record had in its source (kept as `imported_episode_id`)."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail(where, "id", "must be a string")
    out = str(value).strip()
    if "\x00" in out:
        raise fail(where, "id", "contains a NUL character")
    if len(out) > MAX_OLD_ID_CHARS:
        raise fail(where, "id", f"is longer than {MAX_OLD_ID_CHARS} characters")
    if not validation.is_utf8(out):
        raise fail(where, "id", "is not valid text (it holds a lone surrogate)")
    return out


def profile_data(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail(where, "profile", "must be an object")
    try:
        return profiles.validate_profile_data(value)
    except ValidationError as exc:
        raise fail(where, f"profile.{exc.field or 'profile'}", exc.message) from None
