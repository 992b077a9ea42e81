"""The shapes of the API's answers (docs/api.md), as TypedDicts: plain dicts, typed for the editor."""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = [
    "Breakdown",
    "Episode",
    "Evicted",
    "Injection",
    "InjectionContext",
    "Isolation",
    "Profile",
    "ProfileData",
    "ProfileType",
    "ProfileUpdate",
    "RememberResult",
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


class Breakdown(TypedDict):
    similarity: float
    recency: float
    importance: float
    speaker: float
    update: float
    exact: float


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


class ProfileData(TypedDict):
    name: str
    traits: list[str]
    preferences: list[str]
    notes: str


class Speaker(TypedDict):
    id: str
    name: str


class InjectionContext(TypedDict):
    speaker: Speaker
    session_profile: ProfileData
    speaker_profile: ProfileData
    episodes: list[Episode]


class Injection(TypedDict):
    context: InjectionContext
    system_blocks: list[str]  # ready to join into a system prompt
    snapshot_id: str  # the recorded snapshot the console shows
