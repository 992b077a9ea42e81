"""The value types of the bot API's request and response fields (schemas.py builds its shapes from them).

Each type carries its JSON Schema (limits from memory/validation.py, so the document says what the
domain checks) and refuses a wrong type as `invalid_type` (400) and a broken rule as `invalid`
(422), in errors.py's words.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BeforeValidator, Field, PlainValidator, Strict, WithJsonSchema
from pydantic_core import PydanticCustomError

from memconsole.memory import validation
from memconsole.memory.models import ISOLATION_BOT, ISOLATION_SESSION, PROFILE_SESSION, PROFILE_SPEAKER, STATUSES

_ISO_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([Zz]|[+-]\d{2}:?\d{2}(:\d{2})?)?", re.ASCII
)
DATETIME_SCHEMA = {
    "type": "string",
    "format": "date-time",
    "description": "ISO-8601 with a time zone ('Z' or an offset); in a request, a time without one is read as UTC",
}
EPISODE_ID_PATTERN = f"^{validation.EPISODE_ID_CHARS}$"
NON_BLANK: dict[str, Any] = {"minLength": 1, "pattern": r"\S"}  # what `not_blank` keeps, in JSON Schema words
StatusName = Literal[STATUSES]  # type: ignore[valid-type]  # Literal["active", "archived", "superseded"]

# --- value types ----------------------------------------------------------------------------------


def _string(value: Any) -> Any:
    if not isinstance(value, str):
        raise PydanticCustomError("invalid_type", "must be a string")
    return value


def whole_number(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("invalid_type", "must be a whole number")
    return value


def not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("invalid", "must not be empty")
    return value


def _no_comma(value: str) -> str:
    if "," in value:
        raise PydanticCustomError("invalid", "a tag may not contain a comma")
    return value


def within_content_limit(value: str) -> str:
    """Content within the limit once trimmed, as the domain stores it."""
    limit = validation.max_content_chars()
    if len(value.strip()) > limit:
        raise PydanticCustomError("string_too_long", "is longer than {limit} characters", {"limit": limit})
    return value


def content_schema(schema: dict[str, Any]) -> None:
    schema.update(NON_BLANK, maxLength=validation.max_content_chars())  # a setting: read for each document


def _datetime(value: Any) -> datetime:
    """An ISO-8601 date-time, in UTC: a wrong shape is a wrong type; one without a zone is read as UTC."""
    if not isinstance(value, str):
        raise PydanticCustomError("invalid_type", "must be an ISO-8601 date-time string")
    if not _ISO_DATETIME.fullmatch(value):
        raise PydanticCustomError("invalid_type", "must be an ISO-8601 date-time, e.g. 2025-01-31T09:30:00Z")
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError as exc:
        # Python's own words ("month must be in 1..12"), but not its timedelta reprs for an offset.
        reason = "its UTC offset must be less than 24 hours" if "offset" in str(exc) else str(exc)
        raise PydanticCustomError("invalid_type", "is not a valid date-time: {reason}", {"reason": reason}) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        parsed = parsed.replace(tzinfo=UTC)  # LangBot's rule
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise PydanticCustomError("invalid", "is out of range") from None


Text = Annotated[str, Strict()]


def _trimmed(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value  # a wrong type is refused by `Text`


# Put last in an `Annotated`, it runs first: a length limit is measured on the text the domain keeps.
Trimmed = BeforeValidator(_trimmed)
Query = Annotated[
    Text,
    Field(max_length=validation.MAX_QUERY_CHARS, json_schema_extra=NON_BLANK),
    AfterValidator(not_blank),
    Trimmed,
]
Sender = Annotated[Text, Field(max_length=validation.MAX_SENDER_CHARS), Trimmed]

# A sender to filter by, passed as sent: the domain reads "" as every speaker's and refuses " " or
# "\u200b" (`filters.EpisodeFilter`), which trimming here would turn into "".
SenderFilter = Annotated[Text, Field(max_length=validation.MAX_SENDER_CHARS)]
Tag = Annotated[Text, Field(max_length=validation.MAX_TAG_CHARS, pattern="^[^,]*$"), AfterValidator(_no_comma)]
Tags = Annotated[list[Tag], Field(max_length=validation.MAX_TAGS)]
Item = Annotated[
    Text, Field(max_length=validation.MAX_ITEM_CHARS, json_schema_extra=NON_BLANK), AfterValidator(not_blank), Trimmed
]
# The bounds go before the validator, on the integer itself, so that the JSON Schema carries them.
Importance = Annotated[
    int, Field(ge=validation.MIN_IMPORTANCE, le=validation.MAX_IMPORTANCE), BeforeValidator(whole_number)
]
# An importance to store: any whole number, clamped to 1-5 by the domain (and named in `adjusted`).
StoredImportance = Annotated[
    int,
    Field(description="1-5; a whole number outside is stored clamped (7 -> 5, 0 -> 1) and named in `adjusted`"),
    BeforeValidator(whole_number),
]
TopK = Annotated[int, Field(ge=1, le=validation.TOP_K_MAX), BeforeValidator(whole_number)]
DateTime = Annotated[datetime, PlainValidator(_datetime), WithJsonSchema(DATETIME_SCHEMA)]
# models.ISOLATION_SESSION, ISOLATION_BOT ("" reads as session) and models.PROFILE_SESSION, PROFILE_SPEAKER:
IsolationName = Literal["session", "bot", ""]
ProfileTypeName = Literal["session", "speaker"]
Isolation = Annotated[IsolationName, BeforeValidator(_string)]
ProfileType = Annotated[ProfileTypeName, BeforeValidator(_string)]
Statuses = list[Annotated[StatusName, BeforeValidator(_string)]]
QueryId = Annotated[Text, Field(max_length=validation.MAX_QUERY_ID_CHARS)]
# An episode's kind and metadata (issue 20; validation.validate_kind / validate_metadata).
Kind = Annotated[
    Text,
    Field(
        pattern=validation.KIND_OR_NONE.pattern,
        description="a short label, e.g. question or fact_recalled; '' for none, as answers give it",
    ),
]
Metadata = Annotated[
    dict[str, Any],
    Field(
        description=f"a free-form JSON object, at most {validation.MAX_METADATA_BYTES} bytes as compact JSON and "
        f"{validation.MAX_METADATA_DEPTH} levels deep; stored sealed like content"
    ),
]

assert get_args(IsolationName)[:2] == (ISOLATION_SESSION, ISOLATION_BOT)
assert get_args(ProfileTypeName) == (PROFILE_SESSION, PROFILE_SPEAKER)
