"""Finding people by name: a speaker typed as a name or an id, resolved to the sender ids it names.

A speaker's name lives on its episodes (`sender_name`, plain) and in its speaker profile (`name`, in
the sealed payload, so read row by row). Every lookup is bounded: a scope's newest episodes and
profiles, or the first matches across the spaces an actor may see (the erasure form).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q, QuerySet

from .botmemory_models import Fact
from .errors import Unavailable, unavailable_on_failure
from .models import PROFILE_SPEAKER, Episode, Profile
from .scopes import ScopeKeys

MAX_MATCHES = 20
PROFILE_SAMPLE = 500
# The known speakers are read from the newest episodes only, so a scope of millions costs the same.
SPEAKER_SAMPLE = 500


def known_speakers(keys: ScopeKeys) -> list[tuple[str, str]]:
    """(sender_id, sender_name) of those with a speaker profile and those behind the latest
    episodes, by sender_id. Bounded on purpose (the newest SPEAKER_SAMPLE of each)."""
    speakers: dict[str, str] = {}
    recent = (
        Episode.objects.in_scope(keys.user_key).order_by("-id").values_list("sender_id", "sender_name")[:SPEAKER_SAMPLE]
    )
    for sender_id, sender_name in recent:
        if sender_id and not speakers.get(sender_id):  # the newest name they gave (a later nameless episode keeps it)
            speakers[sender_id] = sender_name
    profiled = Profile.objects.filter(scope_key=keys.scope_key, type=PROFILE_SPEAKER).values_list(
        "sender_id", flat=True
    )
    for sender_id in profiled[:SPEAKER_SAMPLE]:
        speakers.setdefault(sender_id, "")
    return sorted(speakers.items())


@dataclass(frozen=True)
class Person:
    sender_id: str
    name: str = ""

    @property
    def label(self) -> str:
        """`name (id)`, or the id alone for a speaker without a known name."""
        return f"{self.name} ({self.sender_id})" if self.name and self.name != self.sender_id else self.sender_id


@dataclass
class Lookup:
    """What a typed speaker names: `person` when it is one id (typed, or a name only one id has),
    else `choices` (a name several ids share, or no match: empty)."""

    typed: str
    person: Person | None = None
    choices: list[Person] = field(default_factory=list)

    @property
    def ambiguous(self) -> bool:
        return self.person is None and len(self.choices) > 1


def _profile_names(scope_key: str, sender_ids: list[str] | None = None) -> dict[str, str]:
    """{sender_id: profile name} of the scope's speaker profiles (the newest PROFILE_SAMPLE)."""
    rows = Profile.objects.filter(scope_key=scope_key, type=PROFILE_SPEAKER)
    if sender_ids is not None:
        rows = rows.filter(sender_id__in=sender_ids)
    names: dict[str, str] = {}
    for row in rows.order_by("-id")[:PROFILE_SAMPLE]:
        try:
            with unavailable_on_failure():
                name = str(row.payload.get("name") or "").strip()
        except Unavailable:  # a profile no key opens shows its id alone
            name = ""
        if name:
            names[row.sender_id] = name
    return names


def scope_people(keys: ScopeKeys) -> list[Person]:
    """The scope's known speakers (`known_speakers`) with their names, a profile's name
    filling in for speakers whose episodes carry none; sorted by name, then id."""
    speakers = known_speakers(keys)
    missing = [sender_id for sender_id, name in speakers if not name]
    names = _profile_names(keys.scope_key, missing) if missing else {}
    people = [Person(sender_id, name or names.get(sender_id, "")) for sender_id, name in speakers]
    return sorted(people, key=lambda p: (p.name.casefold() or "\uffff", p.sender_id))


def names_of(keys: ScopeKeys, sender_ids: list[str]) -> dict[str, str]:
    """{sender_id: name} of these speakers of one scope: the newest name their episodes carry, else
    their profile's (one index seek a speaker; ids without a known name are left out)."""
    episodes = Episode.objects.in_scope(keys.user_key).exclude(sender_name="").order_by("-id")
    names = {}
    for sender_id in dict.fromkeys(sender_ids):
        name = episodes.filter(sender_id=sender_id).values_list("sender_name", flat=True).first()
        if name:
            names[sender_id] = name
    missing = [sender_id for sender_id in sender_ids if sender_id not in names]
    return {**(_profile_names(keys.scope_key, missing) if missing else {}), **names}


def find_in_scope(keys: ScopeKeys, typed: str) -> Lookup:
    """Resolve a typed speaker within one scope: an id the scope knows (from an episode, a profile or
    a fact) wins; else the ids whose name is the typed text (any case; "alice" finds Alice)."""
    typed = typed.strip()
    lookup = Lookup(typed)
    if not typed:
        return lookup
    episodes = Episode.objects.in_scope(keys.user_key)
    profiles = Profile.objects.filter(scope_key=keys.scope_key, type=PROFILE_SPEAKER)
    facts = Fact.objects.filter(user_key=keys.user_key, subject=typed)
    if episodes.filter(sender_id=typed).exists() or profiles.filter(sender_id=typed).exists() or facts.exists():
        name = episodes.filter(sender_id=typed).exclude(sender_name="").values_list("sender_name", flat=True).first()
        lookup.person = Person(typed, name or _profile_names(keys.scope_key, [typed]).get(typed, ""))
        return lookup
    lookup.choices = _name_matches(episodes, keys.scope_key, typed)
    if len(lookup.choices) == 1:
        lookup.person = lookup.choices[0]
    return lookup


def _name_matches(episodes: QuerySet[Episode], scope_key: str, typed: str) -> list[Person]:
    """The people whose name is `typed`, compared case-insensitively, from episodes and profiles."""
    folded = typed.casefold()
    rows = episodes.filter(sender_name__iexact=typed).exclude(sender_id="")
    found = dict(rows.values_list("sender_id", "sender_name").distinct()[:MAX_MATCHES])
    for sender_id, name in _profile_names(scope_key).items():
        if name.casefold() == folded:
            found.setdefault(sender_id, name)
    return sorted((Person(i, n) for i, n in found.items()), key=lambda p: (p.name.casefold(), p.sender_id))


def find_everywhere(typed: str, *, bots: frozenset[str] | None = None, bot_uuid: str = "") -> Lookup:
    """Resolve a typed speaker across every space (those of `bots` when set; one bot's with
    `bot_uuid`), for the erasure form: an id stored as typed wins, else the ids whose episodes carry
    that name (any case)."""
    lookup = Lookup(typed)
    if not typed.strip():
        return lookup
    episodes = Episode.objects.all()
    if bot_uuid:  # one bot's spaces, and none when it is outside `bots` (its people are not to be named)
        bots = frozenset({bot_uuid}) & bots if bots is not None else frozenset({bot_uuid})
    if bots is not None:
        spaces = Q(bot_uuid__in=sorted(bots))
        episodes = episodes.filter(spaces)
    if episodes.filter(sender_id=typed).exists():
        lookup.person = Person(typed, _first_name(episodes, typed))
        return lookup
    rows = episodes.filter(sender_name__iexact=typed.strip()).exclude(sender_id="")
    found = dict(rows.values_list("sender_id", "sender_name").distinct()[:MAX_MATCHES])
    lookup.choices = sorted((Person(i, n) for i, n in found.items()), key=lambda p: p.sender_id)
    if len(lookup.choices) == 1:
        lookup.person = lookup.choices[0]
    return lookup


def _first_name(episodes: QuerySet[Episode], sender_id: str) -> str:
    rows = episodes.filter(sender_id=sender_id).exclude(sender_name="")
    return str(rows.values_list("sender_name", flat=True).first() or "")
