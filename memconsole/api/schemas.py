"""Request and response shapes of the bot API; the OpenAPI document is generated from them.

Limits come from the domain's one place for limits (memory/validation.py), so the document, the
API and the domain say the same. A request schema refuses, in errors.py's words, a wrong type or an
unknown field (400) and a value breaking a rule (422); the domain then checks its own rules again.
A null reads as absent, so that the operation's default applies. The field types are fields.py's.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    WithJsonSchema,
    model_validator,
)

from memconsole.memory import validation
from memconsole.memory.models import ISOLATION_SESSION, STATUSES
from memconsole.memory.scopes import MAX_BOT_UUID, MAX_SESSION_NAME

from .fields import (
    DATETIME_SCHEMA,
    EPISODE_ID_PATTERN,
    DateTime,
    Importance,
    Isolation,
    Item,
    Kind,
    Metadata,
    ProfileType,
    ProfileTypeName,
    Query,
    QueryId,
    Sender,
    SenderFilter,
    Statuses,
    StatusName,
    StoredImportance,
    Tags,
    Text,
    TopK,
    Trimmed,
    content_schema,
    not_blank,
    whole_number,
    within_content_limit,
)

# --- requests -------------------------------------------------------------------------------------


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _null_reads_as_absent(cls, data: Any) -> Any:
        return {key: value for key, value in data.items() if value is not None} if isinstance(data, dict) else data


class ScopedRequest(Request):
    bot_uuid: Annotated[Text, Field(min_length=1, max_length=MAX_BOT_UUID, description="must be a bot the token holds")]
    session_name: Annotated[
        Text,
        Field(
            min_length=1,
            max_length=MAX_SESSION_NAME,
            description="{launcher_type}_{launcher_id}, e.g. group_123 or person_42",
        ),
    ]
    isolation: Isolation | None = Field(
        "session",
        description="session: this chat's memory; bot: shared by every chat of the bot ('' = session)",
    )

    def scope(self) -> tuple[str, str, str]:
        return self.bot_uuid, self.session_name, self.isolation or ISOLATION_SESSION

    def operation_fields(self, *, exclude: set[str] | None = None) -> dict[str, Any]:
        """The fields an operation takes as keywords: what the request gave, scope and `exclude` left out."""
        left_out = {"bot_uuid", "session_name", "isolation", *(exclude or ())}
        return self.model_dump(exclude=left_out, exclude_none=True)


class RememberItem(Request):
    """One episode to remember: `/remember`'s fields but the scope (a batch names its scope once)"""

    content: Annotated[
        Text,
        Field(json_schema_extra=content_schema),
        AfterValidator(not_blank),
        AfterValidator(within_content_limit),
    ]
    tags: Tags | None = Field(
        None,
        description=f"at most {validation.MAX_TAGS} items, repeats included; correction, fact-update or "
        "clarification supersede similar active episodes",
    )
    importance: StoredImportance | None = 2
    sender_id: Sender | None = None
    sender_name: Sender | None = None
    timestamp: DateTime | None = Field(None, description="event time; now when absent")
    query_id: QueryId | None = Field(
        None, description="the message that produced this memory, kept on the episode and its audit entry"
    )
    kind: Kind | None = None
    metadata: Metadata | None = None


class RememberRequest(RememberItem, ScopedRequest):
    """One episode, in the scope the request names"""


class RecallRequest(ScopedRequest):
    query: Query
    top_k: TopK | None = 5
    sender_id: SenderFilter | None = Field(None, description='a filter: only this sender\'s episodes ("" for all)')
    speaker_id: Sender | None = Field(None, description="the current speaker: own episodes first (not a filter)")
    importance_min: Importance | None = None
    time_after: DateTime | None = None
    time_before: DateTime | None = None
    tags: Tags | None = Field(None, description="keep episodes carrying any of these tags")
    statuses: Statuses | None = Field([STATUSES[0]], description="the statuses to search; active when absent or empty")
    kind: Kind | None = Field(None, description="keep episodes of this kind")


class ProfileQuery(ScopedRequest):
    type: ProfileType | None = "session"
    sender_id: Sender | None = Field(None, description="required for a speaker profile")


class ProfileChanges(Request):
    name: Annotated[Text, Field(max_length=validation.MAX_PROFILE_NAME), Trimmed] | None = None
    notes: Text | None = Field(
        None, description=f"cut at {validation.MAX_NOTES} characters (then `adjusted` names notes)"
    )


class ProfileUpdateRequest(ProfileQuery):
    changes: ProfileChanges | None = Field(None, alias="set")
    add_traits: Annotated[list[Item], Field(max_length=validation.MAX_TRAITS)] | None = Field(
        None,
        description=f"a profile holds at most {validation.MAX_TRAITS} traits: a full one evicts its oldest "
        "(named in `evicted`)",
    )
    remove_traits: Annotated[list[Item], Field(max_length=validation.MAX_TRAITS)] | None = None
    add_preferences: Annotated[list[Item], Field(max_length=validation.MAX_PREFERENCES)] | None = Field(
        None,
        description=f"a profile holds at most {validation.MAX_PREFERENCES} preferences: a full one evicts its "
        "oldest (named in `evicted`)",
    )
    remove_preferences: Annotated[list[Item], Field(max_length=validation.MAX_PREFERENCES)] | None = None
    append_notes: Text | None = Field(
        None,
        description="a line added to the notes (after `set.notes`, on a new line), without read-modify-write; "
        f"the notes are cut at {validation.MAX_NOTES} characters",
    )
    if_version: Annotated[int, Field(ge=0, le=validation.MAX_VERSION), BeforeValidator(whole_number)] | None = Field(
        None,
        description="the version the writer read (0: no profile yet); when the stored version differs, "
        "409 conflict and nothing is changed",
    )


class ForgetRequest(ScopedRequest):
    """One episode (`episode_id`), or every episode written in the session (`"all": true`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {"required": ["episode_id"], "not": {"required": ["all"], "properties": {"all": {"const": True}}}},
                {"required": ["all"], "properties": {"all": {"const": True}}, "not": {"required": ["episode_id"]}},
            ]
        }
    )

    episode_id: (
        Annotated[
            Text,
            Field(
                description="an id that /remember or /recall returned (12 hex digits); any other value names no "
                "episode of this scope and is answered 404, like an id of another scope"
            ),
        ]
        | None
    ) = None
    all: Annotated[bool, Strict()] | None = Field(
        None,
        description="true: delete every episode written in this session (under bot isolation, this chat's "
        "share of the bot's memory), audited as one batch; without episode_id",
    )


class InjectRequest(ScopedRequest):
    query: Query
    query_id: QueryId | None = None
    sender_id: Sender | None = None
    sender_name: Sender | None = None
    top_k: TopK | None = 3
    include_window: Annotated[bool, Strict()] | None = Field(
        None, description="true: the chat's conversation window comes back as `context.history` (issue 20)"
    )


# --- responses ------------------------------------------------------------------------------------

EpisodeId = Annotated[str, Field(pattern=EPISODE_ID_PATTERN)]
Timestamp = Annotated[str, WithJsonSchema(DATETIME_SCHEMA)]
NonNegative = Annotated[float, Field(ge=0)]


class ErrorDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(
        description="malformed_json, invalid_body, invalid_type, unknown_field, bad_request (400); "
        "unauthorized (401); forbidden (403); not_found (404); method_not_allowed (405); "
        "conflict (409); payload_too_large (413); invalid (422); rate_limited (429); internal_error (500); "
        "unavailable, row_integrity, encryption_key_missing (503)"
    )
    message: str
    field: str = Field("", description="the offending input, where there is one")


class Error(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


class ConflictDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: Literal["conflict"]
    message: str
    field: Literal["if_version"]
    current_version: int = Field(ge=0, description="the version stored now: read it again and re-apply")


class ConflictError(BaseModel):
    """409: `if_version` is not the stored version; nothing was changed"""

    model_config = ConfigDict(extra="forbid")

    error: ConflictDetail


class Breakdown(BaseModel):
    """score = relevance × recency × importance × speaker × update × exact, clamped to [0, 1] (docs/design.md §4)"""

    similarity: float
    recency: NonNegative
    importance: NonNegative
    speaker: NonNegative
    update: NonNegative
    exact: NonNegative
    lexical: float = Field(ge=0, le=1, description="share of the query's term weight the episode contains")
    relevance: float = Field(
        ge=0,
        le=1,
        description="0.7 × similarity + 0.3 × lexical (0.3 × similarity + 0.7 × lexical for a Chinese or Japanese "
        "query with an English-only model; the lexical score alone without a model); the floor applies to it",
    )


class Episode(BaseModel):
    episode_id: EpisodeId
    content: str
    score: Annotated[float, Field(ge=0, le=1)]
    breakdown: Breakdown
    tags: list[str]
    importance: Annotated[int, Field(ge=1, le=5)]
    timestamp: Timestamp | None
    sender_id: str
    sender_name: str
    status: StatusName
    kind: str = Field(description="'' for none")
    metadata: dict[str, Any]


Adjusted = Field(description="the inputs stored changed to fit a limit (e.g. importance 7 stored as 5)")


class RememberResponse(BaseModel):
    episode_id: EpisodeId
    status: StatusName
    superseded: list[EpisodeId]
    indexed: bool = Field(
        description="false: stored, but not searchable until the index takes it (`manage.py reindex`)"
    )
    importance: Annotated[int, Field(ge=1, le=5)] = Field(description="as stored")
    adjusted: list[Literal["importance"]] = Adjusted


class RecallResponse(BaseModel):
    episodes: list[Episode]


class ProfileData(BaseModel):
    name: str
    traits: Annotated[list[str], Field(max_length=validation.MAX_TRAITS)]
    preferences: Annotated[list[str], Field(max_length=validation.MAX_PREFERENCES)]
    notes: Annotated[str, Field(max_length=validation.MAX_NOTES)]
    facts: dict[str, str] | None = Field(None, description="a speaker's keyed facts, {key: value} (issue 20)")
    updated_at: str | None = Field(None, description="in inject's context: when the profile last changed, '' never")


class Profile(BaseModel):
    type: ProfileTypeName
    sender_id: str = Field(description="'' for the session profile")
    name: str
    traits: Annotated[list[str], Field(max_length=validation.MAX_TRAITS)]
    preferences: Annotated[list[str], Field(max_length=validation.MAX_PREFERENCES)]
    notes: Annotated[str, Field(max_length=validation.MAX_NOTES)]
    version: int = Field(ge=0, description="0 until the first change")
    updated_at: Timestamp | None


class Evicted(BaseModel):
    traits: list[str]
    preferences: list[str]


class ProfileUpdateResponse(Profile):
    evicted: Evicted = Field(description="the oldest items a full profile dropped to take the new ones")
    adjusted: list[Literal["notes"]] = Field(description="notes: cut at the limit")


class ForgetResponse(BaseModel):
    deleted: Literal[True]
    count: int = Field(ge=0, description="how many episodes were deleted (1 for one episode_id)")


class Speaker(BaseModel):
    id: str
    name: str


class HistoryMessage(BaseModel):
    """One message of the conversation window (issue 20)"""

    role: Literal["user", "assistant", "system", "tool"]
    content: str
    created_at: Timestamp
    sender_id: str
    sender_name: str


class InjectContext(BaseModel):
    """LangBot's _ltm_context shape"""

    speaker: Speaker
    session_profile: ProfileData
    speaker_profile: ProfileData
    episodes: list[Episode]
    history: list[HistoryMessage] | None = Field(None, description="with include_window: the chat's last messages")


class InjectResponse(BaseModel):
    context: InjectContext
    system_blocks: list[str]
    snapshot_id: Annotated[str, Field(pattern="^[0-9a-f]{32}$")]
