"""The shapes of the API's answers (docs/api.md), as TypedDicts: plain dicts, typed for the editor."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = [
    "Breakdown",
    "Episode",
    "EpisodeList",
    "Evicted",
    "Fact",
    "Injection",
    "InjectionContext",
    "Isolation",
    "ListedEpisode",
    "Message",
    "MessageWindow",
    "Profile",
    "ProfileData",
    "ProfileType",
    "ProfileUpdate",
    "RememberBatchResult",
    "RememberResult",
    "SessionSummary",
    "Speaker",
    "Status",
]

Isolation = Literal["session", "bot"]
ProfileType = Literal["session", "speaker"]
Status = Literal["active", "archived", "superseded"]


class RememberResult(TypedDict):
    episode_id: str
    status: Status
    superseded: list[str]  # ids of the episodes this one corrected
    indexed: bool  # False when the vector index was down; `manage.py reindex` catches up
    importance: int  # as stored: 1-5
    adjusted: list[Literal["importance"]]  # ["importance"] when the importance sent was clamped to 1-5


class RememberBatchResult(TypedDict):
    episodes: list[RememberResult]  # one per episode sent, in order; status as stored after the batch
    batch_id: str  # the batch id of the episodes' audit entries
    indexed: bool  # False when the vector index was down; `manage.py reindex` catches up


class Breakdown(TypedDict):
    similarity: float
    recency: float
    importance: float
    speaker: float
    update: float
    exact: float
    lexical: float
    relevance: float


class Episode(TypedDict):
    """One recalled episode with its score and why it ranked there."""

    episode_id: str
    content: str
    score: float
    breakdown: Breakdown
    tags: list[str]
    importance: int
    timestamp: str | None
    sender_id: str
    sender_name: str
    status: Status
    kind: str  # "" for none
    metadata: dict[str, Any]


class ListedEpisode(TypedDict):
    """One episode of `list_episodes`: as stored, without a score."""

    episode_id: str
    content: str
    tags: list[str]
    importance: int
    timestamp: str | None
    sender_id: str
    sender_name: str
    source: str
    status: Status
    superseded_by: str
    kind: str  # "" for none
    metadata: dict[str, Any]


class Fact(TypedDict):
    """One keyed fact: the current value of (subject, key) in a space."""

    subject: str
    key: str
    value: str
    version: int  # 1 when new; each new value adds one
    updated_at: str


class Message(TypedDict):
    """One message of a chat's conversation window."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str
    created_at: str
    sender_id: str
    sender_name: str


class MessageWindow(TypedDict):
    messages: list[Message]  # oldest first
    window_size: int  # how many messages the bot's chats keep


class SessionSummary(TypedDict):
    """One session of `list_sessions`: a space of the bot and the episodes written in it."""

    session_name: str
    isolation: Isolation
    episodes: int
    last_seen: str


class EpisodeList(TypedDict):
    episodes: list[ListedEpisode]
    next_cursor: str | None  # pass as `cursor` for the next (older) page; None on the last


class Profile(TypedDict):
    type: ProfileType
    sender_id: str
    name: str
    traits: list[str]
    preferences: list[str]
    notes: str
    version: int  # 0 while the profile is still empty
    updated_at: str | None


class Evicted(TypedDict):
    traits: list[str]
    preferences: list[str]


class ProfileUpdate(Profile):
    """The profile after an update, with what the update had to drop or cut to fit the limits."""

    evicted: Evicted  # the oldest items a full profile dropped to take the new ones
    adjusted: list[Literal["notes"]]  # ["notes"] when the notes were cut at the limit


class _ProfileData(TypedDict):
    name: str
    traits: list[str]
    preferences: list[str]
    notes: str


class ProfileData(_ProfileData, total=False):
    facts: dict[str, str] | None  # a speaker's keyed facts
    updated_at: str | None  # in inject's context: when the profile last changed, "" never


class Speaker(TypedDict):
    id: str
    name: str


class _InjectionContext(TypedDict):
    speaker: Speaker
    session_profile: ProfileData
    speaker_profile: ProfileData
    episodes: list[Episode]


class InjectionContext(_InjectionContext, total=False):
    history: list[Message] | None  # with inject(include_window=True): the window, oldest first


class Injection(TypedDict):
    context: InjectionContext
    system_blocks: list[str]  # ready to join into a system prompt
    snapshot_id: str  # the recorded snapshot the console shows
