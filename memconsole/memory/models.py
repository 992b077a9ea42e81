"""The memory data model (docs/design.md §3). The relational database is the source of truth.

Fields that can carry personal content are stored through `memconsole.lib.crypto` (plain JSON/text,
or a Fernet token when keys are configured); each such row records whether it is encrypted. Read
them through the accessors here, never the raw column.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .access_models import BotGrant as BotGrant  # tokens, grants, health runs (re-exported)
from .access_models import BotToken as BotToken
from .access_models import HealthRun as HealthRun
from .botmemory_models import BotMemorySettings, Fact, FactVersion, WindowMessage  # noqa: F401 (issue 20)
from .checkpoint_models import AuditCheckpoint as AuditCheckpoint  # audit checkpoints (memory/checkpoints.py)
from .checkpoint_models import CheckpointHead as CheckpointHead
from .embedding_state import EmbeddingState  # noqa: F401  the model switch (memory/reembed.py)
from .episode_extras import EpisodeExtras, EpisodeMetadata
from .erasure_journal import ErasureJournal  # noqa: F401  an erasure's unfinished index part (memory/erasure_index.py)
from .install import Sealed
from .job_models import Job, JobInput  # noqa: F401  background jobs (memory/jobs.py)
from .pending_models import PendingVector  # noqa: F401  write-behind vectors (memory/pending.py)
from .statuses import Status as Status  # the lifecycle values (re-exported)
from .usage_models import EpisodeUse  # noqa: F401  how often each memory is used (memory/usage.py)


class ScopeOwner(Protocol):
    """What a new row needs of `scopes.ScopeKeys` (named here: scopes imports this module)."""

    @property
    def user_key(self) -> str: ...

    @property
    def scope_key(self) -> str: ...

    @property
    def bot_uuid(self) -> str: ...


ISOLATION_SESSION = "session"
ISOLATION_BOT = "bot"
ISOLATION_CHOICES = [(ISOLATION_SESSION, "session"), (ISOLATION_BOT, "bot")]


STATUS_ACTIVE = Status.ACTIVE
STATUS_SUPERSEDED = Status.SUPERSEDED
STATUS_ARCHIVED = Status.ARCHIVED
STATUSES: tuple[str, ...] = tuple(Status.values)
STATUS_CHOICES = Status.choices

SOURCES = ("agent", "import", "console", "health_probe")


class Scope(models.Model):
    """A memory space seen at least once: one (scope_key, isolation) pair and its derived user_key."""

    scope_key = models.CharField(max_length=400)
    isolation = models.CharField(max_length=10, choices=ISOLATION_CHOICES)
    user_key = models.CharField(max_length=400, db_index=True)
    bot_uuid = models.CharField(max_length=128, blank=True, db_index=True)
    session_name = models.CharField(max_length=255)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope_key", "isolation"], name="scope_unique_key_isolation")]
        permissions = [
            ("operate_memory", "Archive, restore and edit profiles"),
            ("delete_memory", "Delete and erase memory"),
            ("export_memory", "Export memory and audit"),
            ("import_memory", "Import memory"),
            ("manage_tokens", "Manage bot API tokens"),
        ]

    def __str__(self) -> str:
        return f"{self.scope_key} ({self.isolation})"


class EpisodeCounts(models.Model):
    """Per-user_key counters kept in step by every operation, so that pages never COUNT(*) a scope."""

    user_key = models.CharField(max_length=400, unique=True)
    active = models.BigIntegerField(default=0)
    superseded = models.BigIntegerField(default=0)
    archived = models.BigIntegerField(default=0)
    last_activity = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user_key}: {self.total} episodes"

    @property
    def total(self) -> int:
        return self.active + self.superseded + self.archived


def new_episode_id() -> str:
    """A fresh episode id: 12 lowercase hex digits (`validation.EPISODE_ID`)."""
    return secrets.token_hex(6)


def tags_text(tags: list[str]) -> str:
    """Tags as ",tag1,tag2," (`Episode.tags_text`), so that a tag filter is a portable LIKE."""
    return "," + ",".join(tags) + "," if tags else ""


class EpisodeQuerySet(models.QuerySet["Episode"]):
    def in_scope(self, user_key: str) -> EpisodeQuerySet:
        """A scope's episodes: THE way to select them (scope isolation has this one name)."""
        return self.filter(user_key=user_key)

    def with_ids(self, episode_ids: Iterable[str]) -> EpisodeQuerySet:
        """These episodes among `episode_ids` (filter by scope first: `in_scope(...).with_ids(...)`).

        Written as `id IN (SELECT id ... WHERE episode_id IN (...))` on purpose: for
        `user_key = ? AND episode_id IN (...)` SQLite's planner, which has no statistics, picks a
        (user_key, ...) index and walks every row of the scope (36 ms at 20,000 episodes, linear in
        the scope; bench/ and docs/benchmarks.md). This form seeks the (user_key, [status|sender_id],
        id) indexes instead, at any scope size, and is planned well on PostgreSQL too.
        """
        ids = self.model.objects.filter(episode_id__in=list(episode_ids)).values("pk")
        return self.filter(pk__in=ids)


class Episode(EpisodeExtras, Sealed):
    episode_id = models.CharField(max_length=12, unique=True)
    user_key = models.CharField(max_length=400)
    scope_key = models.CharField(max_length=400)
    content_stored = models.TextField(db_column="content")
    encrypted = models.BooleanField(default=False)
    sealed_column = "content_stored"
    tags = models.JSONField(default=list)
    # ",tag1,tag2," so that a tag filter is a portable LIKE on every database.
    tags_text = models.CharField(max_length=1400, blank=True)
    importance = models.PositiveSmallIntegerField(default=2)
    timestamp = models.DateTimeField(null=True, blank=True)
    sender_id = models.CharField(max_length=255, blank=True)
    sender_name = models.CharField(max_length=255, blank=True)
    bot_uuid = models.CharField(max_length=128, blank=True)
    source = models.CharField(max_length=20, default="agent")
    status = models.CharField(max_length=12, choices=STATUS_CHOICES, default=STATUS_ACTIVE)
    superseded_by = models.CharField(max_length=12, blank=True)
    imported_episode_id = models.CharField(max_length=255, blank=True)
    # The bot message that produced this memory (`remember(query_id=...)`), to trace it to its source.
    query_id = models.CharField(max_length=255, blank=True, default="")
    # An imported episode's `source` in the system it came from (`source` itself says "import").
    original_source = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # Index bookkeeping (docs/design.md §5): the vector for this row is written and made by `vector_model`.
    vector_current = models.BooleanField(default=False)
    vector_model = models.CharField(max_length=80, blank=True)
    # Bumped by every console/API edit (`editing.edit_episode`): an edit sent with `if_version` conflicts.
    version = models.PositiveIntegerField(default=0)

    objects = EpisodeQuerySet.as_manager()

    class Meta:
        indexes = [
            # Keyset pagination, newest first (by id), within a scope and optionally a status.
            models.Index(fields=["user_key", "status", "-id"], name="episode_scope_status_id"),
            models.Index(fields=["user_key", "-id"], name="episode_scope_id"),
            models.Index(fields=["user_key", "sender_id", "-id"], name="episode_scope_sender_id"),
            models.Index(fields=["user_key", "kind", "-id"], name="episode_scope_kind_id"),
            # The console's other sort orders (event time, importance), keyset on (value, id): 0015.
            models.Index(fields=["user_key", "status", "-timestamp", "-id"], name="episode_scope_status_time"),
            models.Index(fields=["user_key", "-timestamp", "-id"], name="episode_scope_time"),
            models.Index(fields=["user_key", "sender_id", "-timestamp", "-id"], name="episode_scope_sender_time"),
            models.Index(fields=["user_key", "status", "-importance", "-id"], name="episode_scope_status_imp"),
            models.Index(fields=["user_key", "-importance", "-id"], name="episode_scope_imp"),
            # A speaker's count read from the index alone, a speaker's page by importance: 0018.
            models.Index(fields=["user_key", "sender_id", "status"], name="episode_scope_sender_status"),
            models.Index(fields=["user_key", "sender_id", "-importance", "-id"], name="episode_scope_sender_imp"),
            # The episodes an episode replaced (its detail page), and an import's duplicate check.
            models.Index(fields=["user_key", "superseded_by"], name="episode_scope_superseded_by"),
            models.Index(fields=["user_key", "imported_episode_id"], name="episode_scope_imported"),
            models.Index(fields=["sender_id"], name="episode_sender"),
            models.Index(fields=["vector_current"], name="episode_vector_current"),
        ]

    def __str__(self) -> str:
        return self.episode_id

    @classmethod
    def create(
        cls,
        keys: ScopeOwner,
        content: str,
        *,
        tags: list[str],
        importance: int,
        timestamp: datetime | None,
        sender_id: str,
        sender_name: str,
        source: str,
        episode_id: str | None = None,
        **extra: Any,
    ) -> Episode:
        """A new (unsaved) episode of `keys`' scope, with its tags, tag text and sealed content set
        together. Inputs must already be validated; `extra` sets further fields (status, times...)."""
        extra.setdefault("created_at", timezone.now())
        extra.setdefault("updated_at", extra["created_at"])
        episode = cls(
            episode_id=episode_id or new_episode_id(),
            user_key=keys.user_key,
            scope_key=keys.scope_key,
            bot_uuid=keys.bot_uuid,
            tags=tags,
            tags_text=tags_text(tags),
            importance=importance,
            timestamp=timestamp,
            sender_id=sender_id,
            sender_name=sender_name,
            source=source,
            **extra,
        )
        episode.set_content(content)
        return episode

    @property
    def content(self) -> str:  # RowBindingError when sealed for another row (`install.IDENTITY`)
        return self.opened()

    def set_content(self, text: str) -> None:  # set episode_id and user_key first: they are sealed in
        self.seal_column(text)

    @property
    def effective_status(self) -> str:
        return self.status if self.status in STATUSES else STATUS_ACTIVE


class SealedPayload(Sealed):
    """Abstract: a JSON payload stored plain or Fernet-encrypted."""

    payload_stored = models.TextField(db_column="payload", default="{}")
    encrypted = models.BooleanField(default=False)
    sealed_column = "payload_stored"

    class Meta:
        abstract = True

    @property
    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.opened())
        return data

    def set_payload(self, data: dict[str, Any]) -> None:  # the row's identity is sealed in (`install.IDENTITY`)
        self.seal_column(canonical_json(data))


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


PROFILE_SESSION = "session"
PROFILE_SPEAKER = "speaker"
PROFILE_TYPES = [(PROFILE_SESSION, "session"), (PROFILE_SPEAKER, "speaker")]


class Profile(SealedPayload):
    """L1 profile; payload = {name, traits[], preferences[], notes}. Every version is kept."""

    scope_key = models.CharField(max_length=400)
    type = models.CharField(max_length=10, choices=PROFILE_TYPES)
    sender_id = models.CharField(max_length=255, blank=True)
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["scope_key", "type", "sender_id"], name="profile_unique_owner")]
        indexes = [models.Index(fields=["sender_id"], name="profile_sender")]

    def __str__(self) -> str:
        return f"{self.type} profile {self.sender_id or ''} in {self.scope_key} (v{self.version})"


class ProfileVersion(SealedPayload):
    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    actor = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["profile", "version"], name="profile_version_unique")]
        ordering = ["-version"]

    def __str__(self) -> str:
        return f"v{self.version} of {self.profile_id}"


class AuditHead(models.Model):
    """The tip of one audit chain (`chain`: a space's scope_key, "" for the install-wide chain,
    which continues the single chain of installs before issue 22); locked for every append to it."""

    chain = models.CharField(max_length=400, unique=True, default="")
    seq = models.BigIntegerField(default=0)
    entry_hash = models.CharField(max_length=64, default="0" * 64)

    def __str__(self) -> str:
        return f"audit head #{self.seq} of {self.chain or '(install)'}"


class AuditEntry(SealedPayload):
    """One link of the audit hash chain (docs/design.md §6).

    Structural fields are covered by `entry_hash` (HMAC); the payload (summary, before, after,
    metadata, sender_name) is covered through `payload_digest`, so a payload can be redacted
    (`redacted=True`) while the chain stays verifiable.
    """

    # The chain this entry links into (its scope_key; "" for install-wide entries and for every entry
    # written before per-space chains) and its position there (1, 2, ... per chain).
    chain = models.CharField(max_length=400, default="")
    seq = models.BigIntegerField()
    audit_id = models.CharField(max_length=32, unique=True)
    timestamp = models.DateTimeField(default=timezone.now)
    operation = models.CharField(max_length=40)
    scope_key = models.CharField(max_length=400, blank=True)
    user_key = models.CharField(max_length=400, blank=True)
    actor_type = models.CharField(max_length=10)  # user | token | system
    actor = models.CharField(max_length=255)
    sender_id = models.CharField(max_length=255, blank=True)
    target_type = models.CharField(max_length=40, blank=True)
    target_id = models.CharField(max_length=255, blank=True)
    query_id = models.CharField(max_length=255, blank=True)
    payload_digest = models.CharField(max_length=64)
    redacted = models.BooleanField(default=False)
    prev_hash = models.CharField(max_length=64)
    entry_hash = models.CharField(max_length=64)
    # The bulk console action this entry belongs to (`audit.batch()`), also in the payload; "" outside one.
    batch_id = models.CharField(max_length=32, blank=True, default="")
    # {row ref: keyed digest of its after-state} of the episodes/profiles this entry changed (`tamper`).
    row_states = models.TextField(blank=True, default="")

    class Meta:
        verbose_name = _("audit entry")
        verbose_name_plural = _("audit entries")  # not Django's "audit entrys"
        constraints = [models.UniqueConstraint(fields=["chain", "seq"], name="audit_chain_seq")]
        indexes = [  # lists are ordered by id: one order across chains, the append order within one
            models.Index(fields=["scope_key", "-id"], name="audit_scope_id"),
            models.Index(fields=["user_key", "-id"], name="audit_userkey_id"),
            models.Index(fields=["target_id"], name="audit_target"),
            models.Index(fields=["sender_id"], name="audit_sender"),
            models.Index(fields=["batch_id", "id"], name="audit_batch_id"),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.operation} {self.target_type}:{self.target_id}"

    @property
    def summary(self) -> str:
        return str(self.payload.get("summary", ""))


class InjectionSnapshot(SealedPayload):
    """What memory went into one prompt. payload = {speaker, session_profile, speaker_profile,
    episodes[], system_blocks[]}."""

    snapshot_id = models.CharField(max_length=32, unique=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    query_id = models.CharField(max_length=255, blank=True)
    session_name = models.CharField(max_length=255)
    scope_key = models.CharField(max_length=400)
    user_key = models.CharField(max_length=400)
    isolation = models.CharField(max_length=10, choices=ISOLATION_CHOICES)
    speaker_id = models.CharField(max_length=255, blank=True)
    episode_count = models.PositiveIntegerField(default=0)
    block_count = models.PositiveIntegerField(default=0)
    injected = models.BooleanField(default=False)
    injection_chars = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["scope_key", "-id"], name="snapshot_scope_id"),
            models.Index(fields=["recorded_at"], name="snapshot_recorded"),
            models.Index(fields=["speaker_id"], name="snapshot_speaker"),
        ]

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id} in {self.scope_key}"


# Every table that holds memory (what a reset, a wipe or a cross-scope check goes through).
MEMORY_TABLES: tuple[type[models.Model], ...] = (
    Scope,
    Episode,
    EpisodeMetadata,
    EpisodeCounts,
    Fact,
    FactVersion,
    WindowMessage,
    Profile,
    ProfileVersion,
    AuditEntry,
    InjectionSnapshot,
)
