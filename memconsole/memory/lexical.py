"""The lexical index: keyed hashes of each episode's character n-grams, searched beside the vectors.

What it indexes for an episode is its memory line as a bot sees it (sender name, tags, content),
cut into terms that need no word segmenter: padded character trigrams of each word for alphabetic
scripts ("#foo", "foo", "oo#": they match across inflections, "viajo"/"viaja"), and overlapping
character bigrams for Chinese, Japanese and Korean runs (the usual CJK indexing unit: "出差", "下周").

The index never holds readable text, encrypted install or not: each term is stored as a keyed
BLAKE2b hash of (scope's user_key, term), so a database reader sees opaque tokens, and the same
words in two scopes give different tokens (nothing links scopes; a scope's tokens only ever match
its own episodes). The key is MEMCONSOLE_LEXICAL_KEY, or derived from SECRET_KEY; changing it needs
`manage.py reindex` (the health check reports the drift).

Storage: SQLite FTS5 (one row per episode, rowid = episode pk, with an fts5vocab table for
document frequencies); PostgreSQL a `tsvector` of the tokens under the `simple` configuration with
a GIN index. Both are written in the transaction of the episode row: `Episode.save()` re-indexes
through a post_save receiver and ORM deletes remove the entry through a post_delete one (`connect`;
no foreign key, which would make Django's flush fail on PostgreSQL). Code that writes content
without `save()` (bulk_create, update()) calls `index_episodes`; `rebuild` repairs anything else,
and an entry left by a raw SQL delete is only an orphan: search reads episodes in SQL afterwards.

A query's lexical score for an episode is the share of the query's term weight (BM25's idf, within
the scope; a term made only by English or Spanish function words weighs at most ln 2 and looks no
candidate up, STOP_WORDS) that the episode contains: 0 (nothing shared) to 1 (every query term
present). A query's document frequencies, and its candidate lookups, are one statement each
(LOOKUP_CHUNK terms a statement), not one per term.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models.signals import post_delete, post_save

from .models import Episode

TABLE = "memory_episode_lexical"
EPISODE_TABLE = "memory_episode"
VOCAB = "memory_episode_lexical_vocab"
ALL_TERM = "\x01all"  # in every episode of a scope: its document frequency is the scope's size
SENDER_TERM = "\x01sender:"
REINDEX_FIELDS = frozenset({"content_stored", "sender_id", "sender_name", "tags"})
REBUILD_BATCH = 1000
POSTINGS_BUDGET = 2000  # candidate lookups read at most this many postings (bench/recall_quality.py)
LOOKUP_CHUNK = 200  # index lookups per statement (SQLite allows 500 terms in a compound SELECT)

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_RUNS = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
_IS_CJK = re.compile(rf"[{_CJK}]")
_ACCENTED = re.compile("[\u00c0-\u024f\u0300-\u036f]")


def _fold(text: str) -> str:
    """NFKC, case-folded, with the accents of Latin letters removed ("México" -> "mexico")."""
    if text.isascii():  # the common case, ~20x faster: nothing to normalise or fold but the case
        return text.lower()
    folded = unicodedata.normalize("NFKC", text).casefold()
    if not _ACCENTED.search(folded):  # e.g. Chinese or Japanese text: no accent to fold
        return folded
    out: list[str] = []
    for char in unicodedata.normalize("NFD", folded):
        if unicodedata.category(char) == "Mn" and out and ord(out[-1]) < 0x250:
            continue
        out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


def terms(text: str) -> set[str]:
    """The plaintext terms of `text`: padded trigrams of words, bigrams of CJK runs."""
    found: set[str] = set()
    for run in _RUNS.findall(_fold(text)):
        if _IS_CJK.match(run):
            if len(run) == 1:
                found.add(run)
            found.update(run[i : i + 2] for i in range(len(run) - 1))
        else:
            padded = f"#{run}#"
            found.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return found


# Function words of English and Spanish (folded: no accents), left out of a QUERY's terms: in a
# scope of mostly one language the other's function words are rare, so their idf is high, and a
# question sharing only "la", "es", "de" with an episode would look like a match. A query of nothing
# but function words has no lexical signal (the vector search still runs). Documents keep every word.
ENGLISH_FUNCTION_WORDS = frozenset(
    (  # noqa: SIM905 (a word list reads better as words)
        "a an and are as at be been but by can could did do does for from had has have he her him his how i "
        "if in is it its me my of on or our she so than that the their them there these they this those to "
        "us was we were what when where which who whom whose why will with would you your"
    ).split()
)
SPANISH_FUNCTION_WORDS = frozenset(
    (  # noqa: SIM905
        "a al como con cual cuales cuando de del donde e el ella en es esta estan este esto la las le les lo los "
        "me mi mis muy nos o para pero por que quien quienes se ser si son su sus te tu tus u un una unas unos "
        "y ya yo"
    ).split()
)
STOP_WORDS = ENGLISH_FUNCTION_WORDS | SPANISH_FUNCTION_WORDS
# The most a term made only by function words weighs: the idf of a term in half the scope (ln 2),
# however rare it is there. Spanish "la", "es", "de" in a mostly English scope would otherwise weigh
# like a rare name; English "my", "is" in an English scope weigh about this anyway.
FUNCTION_WORD_IDF = math.log(2)


def reads_as_spanish(text: str) -> bool:
    """Whether the text's function words are Spanish and none English-only (a cheap language guess
    for a Latin-script query: "¿Cuál es la capital…?" yes, "Where is la Sagrada Familia?" no)."""
    words = set(_RUNS.findall(_fold(text)))
    return not words.isdisjoint(SPANISH_FUNCTION_WORDS - ENGLISH_FUNCTION_WORDS) and words.isdisjoint(
        ENGLISH_FUNCTION_WORDS - SPANISH_FUNCTION_WORDS
    )


def _latin_content_word(run: str) -> bool:
    return run not in STOP_WORDS and not _IS_CJK.match(run)


def query_terms(text: str) -> set[str]:
    """`terms(text)` without its function words (STOP_WORDS): what a query is looked up by."""
    kept = [run for run in _RUNS.findall(_fold(text)) if run not in STOP_WORDS]
    return terms(" ".join(kept))


def document_text(episode: Episode, content: str | None = None) -> str:
    """What is indexed for an episode: its memory line's words (sender name, tags, content);
    `content` saves decrypting it again when the caller has it."""
    return " ".join([episode.sender_name, " ".join(episode.tags), episode.content if content is None else content])


@cache
@functools.lru_cache(maxsize=8)
def _key(secret: str) -> bytes:
    return hashlib.blake2b(secret.encode(), digest_size=32, person=b"mc-lexical-v1").digest()


@functools.lru_cache(maxsize=256)
def _scope_hasher(key: bytes, user_key: str) -> hashlib.blake2b:
    """The keyed hash with the scope's part already fed in (never updated: `token` copies it)."""
    return hashlib.blake2b(user_key.encode() + b"\x00", key=key, digest_size=8)


def lexical_key() -> bytes:
    return _key(settings.MEMCONSOLE_LEXICAL_KEY or settings.SECRET_KEY)


def key_fingerprint() -> str:
    """A short public fingerprint of the key (never the key), to tell an index made with another."""
    return hashlib.blake2b(lexical_key(), digest_size=4).hexdigest()


def token(user_key: str, term: str) -> str:
    """The stored token of `term` in `user_key`'s scope: 16 hex digits of a keyed BLAKE2b."""
    return _token(_scope_hasher(lexical_key(), user_key), term)


def _token(scope_hasher: hashlib.blake2b, term: str) -> str:
    hasher = scope_hasher.copy()
    hasher.update(term.encode())
    return "t" + hasher.hexdigest()


def episode_tokens(episode: Episode) -> list[str]:
    scope_hasher = _scope_hasher(lexical_key(), episode.user_key)
    tokens = {_token(scope_hasher, t) for t in terms(document_text(episode))}
    tokens.add(_token(scope_hasher, ALL_TERM))
    tokens.add(_token(scope_hasher, SENDER_TERM + episode.sender_id))
    return sorted(tokens)


def _postgres() -> bool:
    return connection.vendor == "postgresql"


# --- writing -------------------------------------------------------------------------------------


def index_episodes(episodes: Iterable[Episode]) -> int:
    """Write (or replace) the lexical entries of saved episodes. Call it inside the transaction that
    wrote them whenever they were written without `save()` (bulk_create, update()); returns how many."""
    rows = [(episode.pk, " ".join(episode_tokens(episode))) for episode in episodes if episode.pk]
    if not rows:
        return 0
    with connection.cursor() as cursor:
        if _postgres():
            cursor.executemany(
                f"INSERT INTO {TABLE} (episode_id, tokens) VALUES (%s, to_tsvector('simple', %s)) "
                "ON CONFLICT (episode_id) DO UPDATE SET tokens = EXCLUDED.tokens",
                rows,
            )
        else:
            cursor.executemany(f"DELETE FROM {TABLE} WHERE rowid = %s", [(pk,) for pk, _ in rows])
            cursor.executemany(f"INSERT INTO {TABLE} (rowid, tokens) VALUES (%s, %s)", rows)
    return len(rows)


def remove(pks: Iterable[int]) -> None:
    """Remove entries (ORM deletes need not call this: the post_delete receiver does)."""
    params = [(pk,) for pk in pks]
    column = "episode_id" if _postgres() else "rowid"
    with connection.cursor() as cursor:
        cursor.executemany(f"DELETE FROM {TABLE} WHERE {column} = %s", params)


def _reindex_on_save(sender: Any, instance: Episode, update_fields: Any = None, raw: bool = False, **_: Any) -> None:
    if raw:
        return
    if update_fields is None or not REINDEX_FIELDS.isdisjoint(update_fields):
        index_episodes([instance])


def _remove_on_delete(sender: Any, instance: Episode, **_: Any) -> None:
    remove([instance.pk])


def connect() -> None:
    """Keep the index with every `Episode.save()` and ORM delete (called once, from ready())."""
    post_save.connect(_reindex_on_save, sender=Episode, dispatch_uid="memconsole-lexical-index")
    post_delete.connect(_remove_on_delete, sender=Episode, dispatch_uid="memconsole-lexical-remove")


def rebuild(user_key: str | None = None) -> int:
    """Rebuild the entries of one scope (or of every scope) from the episode rows; returns the count."""
    episodes = Episode.objects.all() if user_key is None else Episode.objects.in_scope(user_key)
    # Only the indexed fields: a migration runs this before later migrations add their columns.
    episodes = episodes.only("pk", "user_key", "content_stored", "encrypted", "sender_id", "sender_name", "tags")
    with connection.cursor() as cursor:
        if user_key is None:
            cursor.execute(f"DELETE FROM {TABLE}")  # orphans too
        else:
            column = "episode_id" if _postgres() else "rowid"
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE {column} IN (SELECT id FROM {EPISODE_TABLE} WHERE user_key = %s)",
                [user_key],
            )
    done = 0
    batch: list[Episode] = []
    for episode in episodes.order_by("pk").iterator(chunk_size=REBUILD_BATCH):
        batch.append(episode)
        if len(batch) >= REBUILD_BATCH:
            done += index_episodes(batch)
            batch = []
    return done + index_episodes(batch)


def orphan_count() -> int:
    """Entries whose episode is gone (deleted by raw SQL): harmless, ids are never reused; pruned by
    `rebuild`."""
    column = "episode_id" if _postgres() else "rowid"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {TABLE} x WHERE NOT EXISTS (SELECT 1 FROM {EPISODE_TABLE} e WHERE e.id = x.{column})"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def missing_count() -> int:
    """Episodes with no lexical entry (drift: 0 unless something wrote rows around `save()`)."""
    column = "episode_id" if _postgres() else "rowid"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {EPISODE_TABLE} e WHERE NOT EXISTS (SELECT 1 FROM {TABLE} x WHERE x.{column} = e.id)"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def stale_scopes(sample: int = 50) -> list[str]:
    """Scopes (of a sample) whose entries were made with another key: their ALL token is absent."""
    user_keys = list(Episode.objects.values_list("user_key", flat=True).distinct()[:sample])
    return [
        user_key for user_key in user_keys if not _count([token(user_key, ALL_TERM)]).get(token(user_key, ALL_TERM))
    ]


# --- searching -----------------------------------------------------------------------------------


# Counting a term's documents reads its whole posting list (fts5vocab on SQLite, the GIN index on
# PostgreSQL): ~0.3 ms for a trigram in 15,000 episodes, most of a query's lexical cost in a large
# scope, and a common term's idf barely moves. So the counts of common terms (in at least COMMON_DF
# episodes) are kept for COMMON_DF_SECONDS, and used while the scope's size is within 1% of what it
# was when they were counted. A rarer term, the kind candidates are looked up by, is always counted
# afresh: a new episode's words are found at once (docs/benchmarks.md, recall quality round 13).
COMMON_DF = 1000
COMMON_DF_SECONDS = 60.0
COMMON_DF_ENTRIES = 100_000
common_counts: dict[str, tuple[int, int, float]] = {}  # token -> (document frequency, scope size, when counted)


def _frequencies(tokens: list[str], everything: str) -> dict[str, int]:
    """Document frequency of each token and of `everything` (the scope's size; tokens are
    scope-keyed, so these are within one scope), common terms' from the cache above. One statement,
    and a second only when the scope's size has moved since a kept count."""
    now = time.monotonic()
    kept = {
        tok: entry
        for tok in tokens
        if (entry := common_counts.get(tok)) is not None and now - entry[2] <= COMMON_DF_SECONDS
    }
    counted = _count([everything, *(tok for tok in tokens if tok not in kept)])
    n = counted[everything]
    moved = [tok for tok, (_, size, _) in kept.items() if abs(size - n) > n / 100]
    counted.update(_count(moved))
    if len(common_counts) > COMMON_DF_ENTRIES:
        common_counts.clear()
    for tok, df in counted.items():
        if df >= COMMON_DF and tok != everything:
            common_counts[tok] = (df, n, now)
    return {**{tok: entry[0] for tok, entry in kept.items()}, **counted}


def _count(tokens: list[str]) -> dict[str, int]:
    """Document frequency of each token, counted in the index."""
    if not tokens:
        return {}
    with connection.cursor() as cursor:
        if _postgres():
            cursor.execute(
                f"SELECT t, (SELECT count(*) FROM {TABLE} WHERE tokens @@ t::tsquery) FROM unnest(%s::text[]) AS t",
                [tokens],
            )
            return {term: int(doc) for term, doc in cursor.fetchall()}
        found = dict.fromkeys(tokens, 0)
        # One statement of equality lookups (fts5vocab scans its whole table for IN (...)): one round
        # trip instead of one per term (bench/recall_quality.py's latency).
        for start in range(0, len(tokens), LOOKUP_CHUNK):
            chunk = tokens[start : start + LOOKUP_CHUNK]
            union = " UNION ALL ".join([f"SELECT term, doc FROM {VOCAB} WHERE term = %s"] * len(chunk))
            cursor.execute(union, chunk)
            found.update({term: int(doc) for term, doc in cursor.fetchall()})
        return found


@dataclass
class LexicalQuery:
    """A query's terms within one scope, each weighted by its idf there."""

    user_key: str
    weights: dict[str, float]  # plaintext term -> idf
    tokens: dict[str, str]  # plaintext term -> stored token
    scope_size: int
    frequencies: dict[str, int] = field(default_factory=dict)  # plaintext term -> document frequency
    function_terms: frozenset[str] = frozenset()  # made by function words only: weight capped, not looked up
    words: tuple[frozenset[str], ...] = ()  # each Latin-script content word's trigrams

    @classmethod
    def build(cls, user_key: str, text: str) -> LexicalQuery:
        plain = sorted(terms(text))
        content = query_terms(text)
        tokens = {t: token(user_key, t) for t in plain}
        everything = token(user_key, ALL_TERM)
        counted = _frequencies(list(tokens.values()), everything)
        n = counted[everything]
        df = {tok: min(counted.get(tok, 0), n) for tok in tokens.values()}  # a cached count never exceeds n
        weights = {}
        for t, tok in tokens.items():
            idf = math.log(1 + (n - df[tok] + 0.5) / (df[tok] + 0.5))
            weights[t] = idf if t in content else min(idf, FUNCTION_WORD_IDF)
        frequencies = {t: df[tok] for t, tok in tokens.items()}
        words = tuple(frozenset(terms(run)) for run in _RUNS.findall(_fold(text)) if _latin_content_word(run))
        return cls(user_key, weights, tokens, n, frequencies, frozenset(plain) - content, words)

    def score(self, document: str) -> float:
        """Share of the query's term weight present in `document` (0..1).

        Each term is looked up as a substring of the document's runs joined by "#" (the padding of
        word trigrams), which finds exactly the terms `terms(document)` would make, without making
        them: ~20x faster, and recall scores every candidate."""
        total = self._total
        if total <= 0:
            return 0.0
        joined = "#" + "#".join(_RUNS.findall(_fold(document))) + "#"
        present = {t for t in self.weights if t in joined}
        # A Latin-script word counts only when the document holds at least half of its trigrams'
        # weight: "viajo" in "viajar" or "trips" in "trip", not "gracias" in "pharmacist" ("aci").
        weight = self.weights.__getitem__
        partial = [w for w in self.words if 2 * sum(map(weight, w & present)) < sum(map(weight, w))]
        if partial:
            whole = set().union(*(w for w in self.words if w not in partial))
            present -= set().union(*partial) - whole
        return sum(map(weight, present)) / total

    def __post_init__(self) -> None:
        # A query of function words only ("is the", "in my") matches nothing lexically: its share
        # would be 1.0 in any episode holding them, and lift an unrelated memory over the floor.
        only_function_words = set(self.weights) <= self.function_terms
        self._total = 0.0 if only_function_words else sum(self.weights.values())

    def candidates(self, limit: int, sender_id: str | None = None) -> list[int]:
        """Episode pks sharing the query's rarer terms, best first (summed idf of the terms each
        holds), at most `limit`; only `sender_id`'s when given.

        Only the rarer terms look candidates up: rarest first, while their document frequencies add
        up to at most POSTINGS_BUDGET (and always the rarest one), one index lookup each, summed in
        Python. A common term ("the", "#my") would have the index read and rank most of the scope
        (BM25 over every match took 0.6 s at 30,000 episodes); it still counts in `score`, and the
        vector search finds what shares only common words."""
        rarest = sorted((df, t) for t, df in self.frequencies.items() if df > 0 and t not in self.function_terms)
        if not rarest or self.scope_size == 0:
            return []
        chosen: list[str] = []
        postings = 0
        for df, term in rarest:
            if chosen and postings + df > POSTINGS_BUDGET:
                break
            chosen.append(term)
            postings += df
        sender = token(self.user_key, SENDER_TERM + sender_id) if sender_id is not None else None
        summed: dict[int, float] = {}
        # One statement for all the chosen terms, each posting tagged with its term's position.
        postgres = _postgres()
        queries = [
            (f"{sender} & " if postgres else f"{sender} AND ") + self.tokens[t] if sender else self.tokens[t]
            for t in chosen
        ]
        with connection.cursor() as cursor:
            for start in range(0, len(chosen), LOOKUP_CHUNK):
                chunk = queries[start : start + LOOKUP_CHUNK]
                if postgres:
                    cursor.execute(
                        f"SELECT q.i - 1 + %s, x.episode_id FROM unnest(%s::text[]) WITH ORDINALITY AS q(t, i) "
                        f"JOIN {TABLE} x ON x.tokens @@ q.t::tsquery",
                        [start, chunk],
                    )
                else:
                    union = " UNION ALL ".join(
                        [f"SELECT {start + i}, rowid FROM {TABLE} WHERE {TABLE} MATCH %s" for i in range(len(chunk))]
                    )
                    cursor.execute(union, chunk)
                for position, pk in cursor.fetchall():
                    weight = self.weights[chosen[int(position)]]
                    summed[int(pk)] = summed.get(int(pk), 0.0) + weight
        return sorted(summed, key=lambda pk: (summed[pk], pk), reverse=True)[:limit]
