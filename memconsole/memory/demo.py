"""A believable demo workspace: 3 bots, group and private chats in both isolation modes, people
with profiles who speak English, Chinese or Spanish, ~2,000 episodes, supersede chains and
injection snapshots. What they say is in `demo_data` (each person has one persona).

Deterministic (seeded), written through the same audit chain and vector index as real data.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from . import audit, lexical
from .audit import Actor
from .counters import recount
from .demo_data import (
    ANSWERS_IN,
    BOTS,
    CHAT_NAMES,
    CORRECTIONS,
    EVENT_WORDS,
    EVENTS,
    NAMES,
    PERSONA_WORDS,
    QUERIES,
    SHORT_ANSWERS,
    STABLE,
    STYLE_PREFERENCES,
    TRAITS,
)
from .episodes import REMEMBERED
from .injection import record_injection
from .models import STATUS_ACTIVE, STATUS_ARCHIVED, STATUS_SUPERSEDED, Episode
from .paging import chunks
from .profiles import update_profile
from .scopes import ScopeKeys, derive_scope, register_scope
from .sync import index_episodes
from .wording import said

EPISODES_PER_SCOPE = 200  # a group chat's; a private chat has a quarter (one person says them all)
CORRECTIONS_PER_SCOPE = 6
INDEX_BATCH = 256


@dataclass
class Person:
    sender_id: str
    name: str
    language: str
    persona: dict[str, str]
    short_answers: bool
    traits: list[str] = field(default_factory=list)
    preferences: list[str] = field(default_factory=list)


@dataclass
class Line:
    """One thing a person says: its template, tags and words (kept for its correction)."""

    template: str
    tags: list[str]
    words: dict[str, str]

    @property
    def text(self) -> str:
        return self.template.format(**self.words)


def people(rng: random.Random) -> list[Person]:
    """Everyone in the demo, each with one persona for every chat they are in."""
    out: list[Person] = []
    for language, names in NAMES.items():
        for name in names:
            persona = {key: rng.choice(values) for key, values in PERSONA_WORDS[language].items()}
            person = Person(f"u{1000 + len(out)}", name, language, persona, short_answers=rng.random() < 0.4)
            person.traits = rng.sample(TRAITS[language], 2)
            person.preferences = [ANSWERS_IN[language], *rng.sample(STYLE_PREFERENCES, 1)]
            if person.short_answers:
                person.preferences.append("short answers")
            out.append(person)
    return out


def _events(person: Person, rng: random.Random) -> list[Line]:
    """Every distinct event a person can tell (each template with every choice of its words), shuffled."""
    words = EVENT_WORDS[person.language]
    out: list[Line] = []
    for template, tags in EVENTS[person.language]:
        keys = [key for key in words if "{" + key + "}" in template]
        out.extend(
            Line(template, tags, dict(zip(keys, values, strict=True)))
            for values in itertools.product(*(words[key] for key in keys))
        )
    rng.shuffle(out)
    return out


def _statements(person: Person) -> list[Line]:
    """What a person says about themselves (once per chat)."""
    stable = [Line(template, tags, dict(person.persona)) for template, tags in STABLE[person.language]]
    if person.short_answers:
        template, tags = SHORT_ANSWERS[person.language]
        stable.append(Line(template, tags, {}))
    return stable


def script(
    members: list[Person], size: int, rng: random.Random, before: set[tuple[str, str]]
) -> list[tuple[Person, Line]]:
    """What is said in one chat, oldest first: each member's statements about themselves (some of
    them, in a small chat) and events, no person saying the same words twice in one memory (`before`:
    the (sender id, text) said in the memory's other chats so far, updated)."""

    def new(person: Person, line: Line) -> bool:
        return (person.sender_id, line.text) not in before

    stable = [(person, line) for person in members for line in _statements(person) if new(person, line)]
    rng.shuffle(stable)
    lines = stable[: max(1, size // 2)]
    events = {person.sender_id: [line for line in _events(person, rng) if new(person, line)] for person in members}
    while len(lines) < size:
        speaking = [person for person in members if events[person.sender_id]]
        if not speaking:
            break
        person = rng.choice(speaking)
        lines.append((person, events[person.sender_id].pop()))
    rng.shuffle(lines)
    before.update((person.sender_id, line.text) for person, line in lines)
    return lines


def _corrected_words(line: Line, person: Person, changed: str | None, rng: random.Random) -> dict[str, str]:
    """The statement's own words, with `changed` (if any) replaced by another value and its old one as `was`."""
    if changed is None:
        return line.words
    table = PERSONA_WORDS if changed in PERSONA_WORDS[person.language] else EVENT_WORDS
    others = [value for value in table[person.language][changed] if value != line.words[changed]]
    return {**line.words, changed: rng.choice(others), "was": line.words[changed]}


class DemoNotEmpty(Exception):
    pass


def load_demo(force: bool = False, progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Create the demo workspace. Refuses a database that already holds episodes unless `force`."""
    if Episode.objects.exists() and not force:
        raise DemoNotEmpty("the database already holds memory; use --force to add the demo data anyway")
    say = progress or (lambda _: None)
    rng = random.Random(20261129)
    actor = Actor.system("load_demo")
    now = timezone.now()
    everyone = people(rng)
    totals = {"scopes": 0, "episodes": 0, "profiles": 0, "snapshots": 0}
    chats: list[tuple[ScopeKeys, list[Person]]] = []
    for bot_uuid, isolation, sessions in BOTS:
        for session_name in sessions:
            keys = derive_scope(bot_uuid, session_name, isolation)
            members = rng.sample(everyone, 6) if session_name.startswith("group_") else [rng.choice(everyone)]
            chats.append((keys, members))

    said_in: dict[str, set[tuple[str, str]]] = {}  # per memory (user_key): who said what
    for number, (keys, members) in enumerate(chats, start=1):
        say(f"scope {number}/{len(chats)}: {keys.scope_key} ({keys.isolation})")
        group = len(members) > 1
        size = EPISODES_PER_SCOPE if group else max(1, EPISODES_PER_SCOPE // 4)
        totals["episodes"] += _demo_episodes(
            keys, script(members, size, rng, said_in.setdefault(keys.user_key, set())), rng, actor, now
        )
        totals["scopes"] += 1
        update_profile(
            keys,
            actor,
            "session",
            name=CHAT_NAMES.get(keys.session_name) or f"{members[0].name} (private chat)",
            notes="Demo conversation. Members: " + ", ".join(person.name for person in members),
        )
        totals["profiles"] += 1
        for person in members:
            update_profile(keys, actor, "speaker", person.sender_id, name=person.name, add_traits=person.traits)
            if rng.random() < 0.5:  # a second version, so history and rollback have something to show
                update_profile(keys, actor, "speaker", person.sender_id, add_preferences=person.preferences)
            totals["profiles"] += 1
        for _ in range(4):
            person = rng.choice(members)
            record_injection(
                keys,
                actor,
                rng.choice(QUERIES[person.language]),
                query_id=f"demo-{rng.getrandbits(32):08x}",
                sender_id=person.sender_id,
                sender_name=person.name,
                top_k=3,
            )
            totals["snapshots"] += 1
    return totals


def _demo_episodes(
    keys: ScopeKeys, lines: list[tuple[Person, Line]], rng: random.Random, actor: Actor, now: datetime
) -> int:
    rows: list[Episode] = []
    with transaction.atomic():
        register_scope(keys)
        for position, (person, line) in enumerate(lines):
            age = timedelta(days=(len(lines) - position) * rng.uniform(0.5, 2.0), minutes=rng.randint(0, 1440))
            rows.append(
                Episode.create(
                    keys,
                    line.text,
                    tags=list(line.tags),
                    importance=rng.choices([1, 2, 3, 4, 5], [2, 5, 3, 2, 1])[0],
                    timestamp=now - age,
                    sender_id=person.sender_id,
                    sender_name=person.name,
                    source="agent",
                    created_at=now - age,
                    updated_at=now - age,
                )
            )
        # A few supersede chains: a later correction replaces what it corrects.
        correctable = [n for n, (_person, line) in enumerate(lines) if line.template in CORRECTIONS]
        for n in rng.sample(correctable, min(CORRECTIONS_PER_SCOPE, len(correctable))):
            old, (person, line) = rows[n], lines[n]
            correction_template, tags, changed = CORRECTIONS[line.template]
            first_said = old.timestamp or now
            timestamp = first_said + (now - first_said) * rng.uniform(0.3, 0.95)  # after the statement
            correction = Episode.create(
                keys,
                correction_template.format(**_corrected_words(line, person, changed, rng)),
                tags=list(tags),
                importance=3,
                timestamp=timestamp,
                sender_id=old.sender_id,
                sender_name=old.sender_name,
                source="agent",
                created_at=now,
                updated_at=now,
            )
            old.status, old.superseded_by, old.importance = (
                STATUS_SUPERSEDED,
                correction.episode_id,
                max(1, old.importance - 1),
            )
            rows.append(correction)
        for episode in rng.sample(rows, len(rows) // 12):
            if episode.status == STATUS_ACTIVE:
                episode.status = STATUS_ARCHIVED
        Episode.objects.bulk_create(rows, batch_size=500)
        lexical.index_episodes(rows)  # bulk_create sends no post_save, which indexes a saved row
        for episode in rows:
            audit.append(
                "remember",
                actor,
                scope_key=keys.scope_key,
                user_key=keys.user_key,
                sender_id=episode.sender_id,
                sender_name=episode.sender_name,
                target_type="episode",
                target_id=episode.episode_id,
                summary=said(REMEMBERED, content=episode.content),
                metadata={"source": "demo"},
            )
        recount(keys.user_key)
    stored = list(Episode.objects.in_scope(keys.user_key).with_ids([e.episode_id for e in rows]))
    for batch in chunks(stored, INDEX_BATCH):
        index_episodes(list(batch))
    return len(rows)
