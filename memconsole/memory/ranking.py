"""Recall ranking (docs/design.md §4). Pure functions: no database, no index.

final = relevance × recency × importance × speaker × update × exact, clamped to [0, 1], where
relevance = 0.7 × vector similarity + 0.3 × lexical score (hybrid retrieval, LangBot's 0.7 vector
weight; 0.3 × similarity + 0.7 × lexical for a Chinese, Japanese or Spanish query with an
English-only model, `vector_weight`; the lexical score alone when there is no embedding model), and recency =
exp(−ln2 × age_days / half_life_days) (0.5 when the timestamp is missing). A query that is exactly an
episode's id ranks that episode first (`is_exact_id_query`); a question naming a speaker is about
them (`named_speakers`), as a first-person one is about its asker (`is_first_person`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

IMPORTANCE_WEIGHTS = {1: 0.9, 2: 1.0, 3: 1.08, 4: 1.16, 5: 1.24}
SPEAKER_WEIGHT = 1.12
UPDATE_WEIGHT = 1.08
# Tags are compared case-insensitively (`casefold`); the Chinese ones are LangBot's own update tags.
UPDATE_TAGS = frozenset(
    {
        "correction",
        "clarification",
        "profile-update",
        "preference-change",
        "fact-update",
        "更正",
        "修正",
        "纠正",
        "偏好变化",
    }
)
SUPERSEDING_TAGS = frozenset({"correction", "fact-update", "clarification"})
SUPERSEDE_THRESHOLD = 0.85
SUPERSEDED_IMPORTANCE_FACTOR = 0.1
EXACT_ID, EXACT_SENDER_OR_TAG, EXACT_CONTENT = 2.0, 1.2, 0.6
MISSING_TIMESTAMP_RECENCY = 0.5
VECTOR_WEIGHT = 0.7
# First-person words: a question with one of them, asked by a known speaker, is about that speaker
# ("what food do I like", "我下周去哪里", "¿qué como yo?"): their own memories rank first.
FIRST_PERSON_WORDS = frozenset(
    {"i", "i'm", "i’m", "im", "i've", "i'd", "i'll", "me", "my", "mine", "myself"}
    | {"yo", "mi", "mis", "mí", "mío", "mía", "míos", "mías", "conmigo", "me"}
)
FIRST_PERSON_CJK = ("我", "俺", "僕", "私", "わたし", "あたし", "ぼく", "나는", "내가", "저는")
_WORDS = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
# Spanish drops the pronoun ("¿En qué trabajo?", "¿A dónde voy?"): the verb right after a question
# word, in the first person singular of the present (-o, or -oy: voy, soy, estoy, doy), says who.
_ES_QUESTION_VERB = re.compile(
    r"(?:^|[¿\s])(?:(?:a|en|de|con|para|por|desde|hasta)\s+)?"
    r"(?:qu[eé]|d[oó]nde|ad[oó]nde|cu[aá]ndo|cu[aá]l(?:es)?|c[oó]mo|qui[eé]n(?:es)?|cu[aá]nt[oa]s?)\s+([^\W\d_]+)",
    re.IGNORECASE,  # matched on the text as typed: casefold() can change lengths (ß -> ss), so offsets
)  # found in a folded copy would not point into the original
_NOT_VERBS = frozenset({"tanto", "mucho", "poco", "otro", "todo", "esto", "eso", "aquello", "tiempo", "año"})
# What may follow such a verb in a first-person question ("¿A dónde voy en verano?", "¿Qué como
# hoy?"). Any other word there is a verb or a subject of its own: "¿Qué trabajo tiene Mateo?" asks
# about Mateo ("trabajo" is a noun), and so does a question ending in a name ("... escucha Sam?").
_ES_AFTER_VERB = frozenset(
    {"a", "al", "en", "de", "del", "con", "para", "por", "desde", "hasta", "el", "la", "los", "las", "un", "una"}
    | {"hoy", "mañana", "ahora", "luego", "después", "esta", "este", "estos", "estas", "mejor", "más", "bien"}
)
_ES_NAME_AT_END = re.compile(r"\b[A-ZÁÉÍÓÚÑ][^\W\d_]*\s*[?？]?\s*$")


def is_first_person(query: str) -> bool:
    """Whether the query speaks in the first person (English, Spanish, Chinese, Japanese, Korean)."""
    lowered = query.casefold()
    if any(mark in lowered for mark in FIRST_PERSON_CJK):
        return True
    if any(word in FIRST_PERSON_WORDS for word in _WORDS.findall(lowered)):
        return True
    return any(_spanish_first_person_verb(match, query) for match in _ES_QUESTION_VERB.finditer(query))


def _spanish_first_person_verb(match: re.Match[str], query: str) -> bool:
    verb = match.group(1).casefold()
    if verb in _NOT_VERBS or len(verb) < 3 or not verb.endswith(("o", "oy")):
        return False
    rest = query[match.end() :]
    following = _WORDS.findall(rest.casefold())
    if not following:
        return True
    return following[0] in _ES_AFTER_VERB and not _ES_NAME_AT_END.search(rest)


# An English-only model rates any two Chinese (or Japanese) sentences 0.4-0.9 alike: for a query in
# those scripts its similarity is weak evidence, and the lexical score leads the fusion instead.
VECTOR_WEIGHT_UNREAD = 0.3
_CJK_TEXT = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def vector_weight(query: str, *, english_only: bool, spanish: bool = False) -> float:
    """The vector similarity's share of the fused relevance for `query` (the lexical score has the
    rest): 0.7 (LangBot's weight), or 0.3 with an English-only model for a Chinese or Japanese query
    or a `spanish` one (its function words are Spanish: `lexical.reads_as_spanish`): such a model
    rates any two Spanish sentences ~0.4-0.45 alike, as it does Chinese ones."""
    unread = bool(_CJK_TEXT.search(query)) or spanish
    return VECTOR_WEIGHT_UNREAD if english_only and unread else VECTOR_WEIGHT


_LATIN_WORD = re.compile(r"[^\W\d_\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def mostly_cjk(text: str) -> bool:
    """Whether the text is written mostly in Chinese or Japanese: more such characters than other
    words ("我喜欢 tennis" yes; "Met 徐强 for lunch" no: a name in an English sentence)."""
    cjk = len(_CJK_TEXT.findall(text))
    return cjk > 0 and cjk > len(_LATIN_WORD.findall(text))


def memory_vector_weight(query_weight: float, *, english_only: bool, unread: bool) -> float:
    """The vector weight for one memory: the query's (`vector_weight`), lowered the same way when an
    English-only model cannot read the memory either (`unread`: mostly Chinese or Japanese, or
    Spanish by its function words). Such a memory is rated 0.45-0.55 alike to any query ("👍",
    "Gracias", "hello"), which the query's own language does not show: without this an emoji or a
    Spanish greeting with no Spanish function word injected whatever Chinese or Spanish memory was
    nearest."""
    return VECTOR_WEIGHT_UNREAD if english_only and unread else query_weight


def relevance(similarity: float, lexical: float, *, vectors: bool = True, weight: float = VECTOR_WEIGHT) -> float:
    """The fused relevance the floor and the ranking start from (0..1): `weight` × similarity +
    (1 − `weight`) × lexical score; the lexical score alone without a model (`vectors=False`)."""
    similarity, lexical = max(0.0, min(1.0, similarity)), max(0.0, min(1.0, lexical))
    if not vectors:
        return lexical
    return weight * similarity + (1.0 - weight) * lexical


@dataclass(frozen=True)
class Breakdown:
    similarity: float
    recency: float
    importance: float
    speaker: float
    update: float
    exact: float
    lexical: float = 0.0
    # The fused relevance (`relevance()`); None: the vector similarity alone (no lexical signal).
    relevance: float | None = None

    @property
    def fused(self) -> float:
        return self.similarity if self.relevance is None else self.relevance

    @property
    def topical(self) -> float:
        """The score without recency: how well the episode answers the question, whatever its age
        (how the speaker's own episodes are ordered for a first-person question)."""
        return self.fused * self.importance * self.update * self.exact

    @property
    def score(self) -> float:
        product = self.fused * self.recency * self.importance * self.speaker * self.update * self.exact
        return min(1.0, max(0.0, product))

    def as_dict(self) -> dict[str, float]:
        return {
            "similarity": round(self.similarity, 6),
            "recency": round(self.recency, 6),
            "importance": self.importance,
            "speaker": self.speaker,
            "update": self.update,
            "exact": self.exact,
            "lexical": round(self.lexical, 6),
            "relevance": round(self.fused, 6),
        }


def _folded(tags: list[str]) -> set[str]:
    return {tag.casefold() for tag in tags}


def is_update(tags: list[str]) -> bool:
    """Whether the tags mark an update (weighted ×1.08), whatever their letter case."""
    return not UPDATE_TAGS.isdisjoint(_folded(tags))


def supersedes(tags: list[str]) -> bool:
    """Whether an episode with these tags supersedes similar active ones, whatever their letter case."""
    return not SUPERSEDING_TAGS.isdisjoint(_folded(tags))


def superseded_importance(importance: int) -> int:
    """What a superseded episode's importance drops to: max(1, int(old × 0.1)) (LangBot's rule)."""
    return max(1, int(importance * SUPERSEDED_IMPORTANCE_FACTOR))


def is_exact_id_query(query: str, episode_id: str) -> bool:
    """A query that is exactly this episode's id (an exact hit: it ranks first, whatever its score)."""
    return query.strip().lower() == episode_id


def recency(timestamp: datetime | None, now: datetime, half_life_days: float) -> float:
    if timestamp is None:
        return MISSING_TIMESTAMP_RECENCY
    age_days = max(0.0, (now - timestamp).total_seconds() / 86400.0)
    return math.exp(-math.log(2) * age_days / half_life_days)


_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def _contains_word(haystack: str, needle: str) -> bool:
    # The substring test first: it rejects almost every needle without compiling a regex (one per
    # sender, name and tag, which thrash re's cache and cost ~2 ms of a recall; bench/search.py).
    if not needle or needle.lower() not in haystack:
        return False
    if _CJK.search(needle):  # Chinese/Japanese/Korean write no spaces: "徐强下周" names 徐强
        return True
    return re.search(r"(?<!\w)" + re.escape(needle.lower()) + r"(?!\w)", haystack) is not None


MAX_NAMED_SPEAKERS = 3  # sender ids a question's names may bring into the speaker-first stage


def named_speakers(query: str, speakers: list[tuple[str, str]], *, exclude: str = "") -> list[str]:
    """The sender ids whose name (`sender_name`, whole, any case; a CJK name as written) the query
    contains: a third-person question naming a speaker ("Where does Alice work?", "李娜是做什么工作的?")
    is about them. Longer names first (the one that names), at most MAX_NAMED_SPEAKERS ids."""
    q = query.strip().lower()
    found = [
        (len(name), sender_id)
        for sender_id, name in speakers
        if sender_id != exclude and len(name) >= 2 and _contains_word(q, name)
    ]
    return [sender_id for _, sender_id in sorted(found, key=lambda f: (-f[0], f[1]))][:MAX_NAMED_SPEAKERS]


def exact_score(query: str, episode_id: str, sender_id: str, sender_name: str, tags: list[str], content: str) -> float:
    """Id match 2.0 + sender-or-tag match 1.2 + content substring 0.6 (the boost caps it at 2)."""
    q = query.strip().lower()
    if not q:
        return 0.0
    score = 0.0
    if _contains_word(q, episode_id):
        score += EXACT_ID
    if any(_contains_word(q, value) for value in (sender_id, sender_name, *tags) if value):
        score += EXACT_SENDER_OR_TAG
    if len(q) >= 2 and q in content.lower():
        score += EXACT_CONTENT
    return score


def exact_boost(exact: float) -> float:
    return 1.0 + min(exact, 2.0) * 0.25


def breakdown(
    *,
    similarity: float,
    timestamp: datetime | None,
    importance: int,
    episode_sender_id: str,
    current_speaker_id: str | None,
    tags: list[str],
    exact: float,
    now: datetime,
    half_life_days: float,
    lexical: float | None = None,
    vectors: bool = True,
    vector_weight: float = VECTOR_WEIGHT,
) -> Breakdown:
    """The breakdown of one candidate; `lexical=None` ranks by vector similarity alone."""
    return Breakdown(
        similarity=max(0.0, min(1.0, similarity)),
        recency=recency(timestamp, now, half_life_days),
        importance=IMPORTANCE_WEIGHTS.get(importance, 1.0),
        speaker=SPEAKER_WEIGHT if current_speaker_id and episode_sender_id == current_speaker_id else 1.0,
        update=UPDATE_WEIGHT if is_update(tags) else 1.0,
        exact=exact_boost(exact),
        lexical=max(0.0, min(1.0, lexical or 0.0)),
        relevance=None if lexical is None else relevance(similarity, lexical, vectors=vectors, weight=vector_weight),
    )
