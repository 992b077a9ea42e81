"""The isolation probe (LangBot's semantics, extended to every read and delete path).

`write` puts two canary episodes into two synthetic user_keys, then `search`, `list`, `get`,
`recall`, `inject`, `export` and `delete` must each keep the two apart, and `cleanup` always
removes them. The probe runs against the real database and the configured vector index, through
the same operations the bot API and the console use. Its canaries live in scopes of the reserved
bot `memconsole-health-probe`, carry `source=health_probe`, are never registered as scopes (so no
console list shows them), and are removed in a `finally` whatever happens (`cleanup.py`).
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from django.utils.translation import gettext_noop

from memconsole.lib import embeddings, vectors

from .. import episodes, exports, indexer, injection, retrieval
from ..audit import Actor
from ..errors import NotFound, Unavailable
from ..filters import EpisodeFilter
from ..models import STATUSES, Episode, InjectionSnapshot
from ..pending_models import PendingVector
from ..scopes import HEALTH_PROBE_BOT_UUID, ScopeKeys, derive_scope, unregistered_scopes
from ..wording import Said, said
from .checks import index_named
from .result import ERROR, OK, REINDEX_FIX, WARN, Check, safely

PROBE_CHECKS = ("search", "list", "get", "recall", "inject", "export", "delete")
PROBE_BOT_UUID = HEALTH_PROBE_BOT_UUID  # reserved: derive_scope refuses it outside unregistered_scopes()
PROBE_SOURCE = "health_probe"
# A system actor that may only touch the probe's own bot: the probe cannot reach real data.
PROBE_ACTOR = Actor("system", "health-probe", frozenset({PROBE_BOT_UUID}))
SEARCH_TOP_K = 5


@dataclass
class Canaries:
    """The probe's two synthetic scopes and what was written into them."""

    run_id: str
    a: ScopeKeys
    b: ScopeKeys
    content_a: str
    content_b: str
    query: str
    id_a: str = ""
    id_b: str = ""

    @property
    def user_keys(self) -> list[str]:
        return [self.a.user_key, self.b.user_key]

    @property
    def scope_keys(self) -> list[str]:
        return [self.a.scope_key, self.b.scope_key]

    def sides(self) -> list[tuple[str, ScopeKeys, str, str]]:
        """(label, own keys, own canary id, the other canary's id) for both directions."""
        return [("a", self.a, self.id_a, self.id_b), ("b", self.b, self.id_b, self.id_a)]


def new_canaries() -> Canaries:
    run_id = secrets.token_hex(4)
    with unregistered_scopes():  # the probe's bot is reserved everywhere else
        a = derive_scope(PROBE_BOT_UUID, f"probe_{run_id}a", "session")
        b = derive_scope(PROBE_BOT_UUID, f"probe_{run_id}b", "session")
    theme = f"memconsole health probe canary {run_id}: the lighthouse keeper paints the door"
    return Canaries(
        run_id=run_id,
        a=a,
        b=b,
        content_a=f"{theme} blue (scope a)",
        content_b=f"{theme} green (scope b)",
        # Close to both canaries, so that a leak of b into a's results would show.
        query=f"memconsole health probe canary {run_id} lighthouse keeper door",
    )


def run_probe_checks(probe: Canaries, on_canaries: Callable[[Canaries], None] | None) -> dict[str, Check]:
    """`write`, then (once both canaries are written) every read and delete check."""
    out = {"write": safely("write", check_write, probe)}
    if not (probe.id_a and probe.id_b):
        for check_id in PROBE_CHECKS:
            out[check_id] = Check(check_id, WARN, "not run: the canary episodes could not be written")
        return out
    if on_canaries is not None:
        on_canaries(probe)
    for check_id, fn in (
        ("search", check_search),
        ("list", check_list),
        ("get", check_get),
        ("recall", check_recall),
        ("inject", check_inject),
        ("export", check_export),
        ("delete", check_delete),
    ):
        out[check_id] = safely(check_id, fn, probe)
    return out


def check_write(probe: Canaries) -> Check:
    written = []
    for label, keys, content in (("a", probe.a, probe.content_a), ("b", probe.b, probe.content_b)):
        result = episodes.remember(
            keys,
            PROBE_ACTOR,
            content,
            tags=["health-probe"],
            sender_id="health-probe",
            sender_name="health probe",
            source=PROBE_SOURCE,
            query_id=f"health-probe-{probe.run_id}",
        )
        if label == "a":
            probe.id_a = result.episode.episode_id
        else:
            probe.id_b = result.episode.episode_id
        written.append(result)
    # The checks below search the index itself: the canaries' vectors are written now, not later.
    pks = [r.episode.pk for r in written]
    with contextlib.suppress(Unavailable):  # still pending then: reported just below
        indexer.drain(only=pks)
    if not all(r.indexed for r in written) or PendingVector.objects.filter(episode_id__in=pks).exists():
        return Check(
            "write",
            ERROR,
            "the canary episodes were saved in the database but the vector index refused them: new memories are "
            "not searchable",
            f"Check that {vectors.describe()} is reachable and writable. {REINDEX_FIX}",
        )
    written_to = gettext_noop("2 canary episodes written to the database and to %(index)s")
    return Check("write", OK, said(written_to, index=index_named()))


def _leak(what: str, details: list[str]) -> Check:
    return Check(
        what,
        ERROR,
        "ISOLATION BREACH: " + "; ".join(details),
        "Stop the bots' access (revoke their tokens) until this is understood. If the vector index was changed "
        f"outside memconsole: {REINDEX_FIX} Then run the health check again.",
    )


def _judge(check_id: str, leaks: list[str], missing: list[str], ok_detail: str | Said, fix: str = REINDEX_FIX) -> Check:
    if leaks:
        return _leak(check_id, leaks)
    if missing:
        return Check(check_id, WARN, "no leak, but " + "; ".join(missing), fix)
    return Check(check_id, OK, ok_detail)


def check_search(probe: Canaries) -> Check:
    model_id = embeddings.current_model_id()
    vector = embeddings.embed_query([probe.query])[0]
    leaks, missing = [], []
    for label, keys, own_id, other_id in probe.sides():
        hits = vectors.query(keys.user_key, model_id, vector, SEARCH_TOP_K, include_metadata=True)
        found = False
        for hit in hits:
            owner = hit.metadata.get("user_key")
            if hit.episode_id == other_id:
                leaks.append(f"searching canary scope {label} returned the other canary's vector {hit.episode_id}")
            elif owner != keys.user_key:
                whose = "the other canary scope" if owner in probe.user_keys else f"user_key {owner!r}"
                leaks.append(f"searching canary scope {label} returned vector {hit.episode_id} labelled for {whose}")
            elif hit.episode_id == own_id:
                found = True
        if not found:
            missing.append(f"searching canary scope {label} did not find its own canary")
    return _judge(
        "search",
        leaks,
        missing,
        said(gettext_noop("each canary scope's search (top %(top_k)s) found its own canary only"), top_k=SEARCH_TOP_K),
    )


def check_list(probe: Canaries) -> Check:
    leaks, missing = [], []
    for label, keys, own_id, other_id in probe.sides():
        page = episodes.list_episodes(keys, statuses=None, limit=50)
        ids = {e.episode_id for e in page.episodes}
        strangers = [e.episode_id for e in page.episodes if e.user_key != keys.user_key or e.episode_id == other_id]
        if strangers:
            leaks.append(f"listing canary scope {label} showed episodes of another scope: {', '.join(strangers)}")
        if own_id not in ids:
            missing.append(f"listing canary scope {label} did not show its own canary")
    return _judge("list", leaks, missing, gettext_noop("each canary scope's list shows its own canary only"), "")


def check_get(probe: Canaries) -> Check:
    leaks, missing = [], []
    for label, keys, own_id, other_id in probe.sides():
        try:
            episodes.get_episode(keys, other_id)
        except NotFound:
            pass
        else:
            leaks.append(f"the other canary's id resolved through canary scope {label}")
        try:
            episodes.get_episode(keys, own_id)
        except NotFound:
            missing.append(f"canary scope {label} could not open its own canary")
    return _judge("get", leaks, missing, gettext_noop("an id resolves only through its own scope"), "")


def check_recall(probe: Canaries) -> Check:
    leaks, missing = [], []
    for label, keys, own_id, other_id in probe.sides():
        hits = retrieval.recall(
            keys, probe.query, top_k=SEARCH_TOP_K, actor=PROBE_ACTOR, current_speaker_id="health-probe"
        )
        ids = [hit.episode.episode_id for hit in hits]
        strangers = [hit.episode.episode_id for hit in hits if hit.episode.user_key != keys.user_key]
        if other_id in ids or strangers:
            leaks.append(f"recall in canary scope {label} returned the other scope's episodes")
        if own_id not in ids:
            missing.append(f"recall in canary scope {label} did not return its own canary")
    return _judge(
        "recall",
        leaks,
        missing,
        said(
            gettext_noop("recall (top %(top_k)s, as the bot API runs it) returns each scope's own canary only"),
            top_k=SEARCH_TOP_K,
        ),
    )


def check_inject(probe: Canaries) -> Check:
    made = injection.record_injection(
        probe.a,
        PROBE_ACTOR,
        probe.query,
        query_id=f"health-probe-{probe.run_id}",
        sender_id="health-probe",
        sender_name="health probe",
        top_k=SEARCH_TOP_K,
    )
    ids = [episode["episode_id"] for episode in made.context["episodes"]]
    blocks = "\n".join(made.system_blocks)
    snapshot = InjectionSnapshot.objects.get(pk=made.snapshot.pk)
    stored = json.dumps(snapshot.payload, ensure_ascii=False)
    leaks, missing = [], []
    if probe.id_b in ids or probe.content_b in blocks:
        leaks.append("the injection built for canary scope a carried canary b")
    if probe.id_b in stored or probe.content_b in stored or snapshot.user_key != probe.a.user_key:
        leaks.append("the stored injection snapshot of canary scope a holds canary b")
    if probe.id_a not in ids or probe.content_a not in blocks:
        missing.append("the injection for canary scope a did not carry its own canary")
    return _judge(
        "inject",
        leaks,
        missing,
        gettext_noop("the injection (and its stored snapshot) carries the scope's own canary only"),
    )


def check_export(probe: Canaries) -> Check:
    text = "".join(exports.stream_scope_export(probe.a, PROBE_ACTOR, statuses=list(STATUSES), include_audit=True))
    if probe.id_b in text or probe.content_b in text:
        return _leak("export", ["the export of canary scope a contains canary b"])
    if probe.id_a not in text:
        return Check("export", WARN, "no leak, but the export of canary scope a did not contain its own canary", "")
    try:
        json.loads(text)
    except ValueError:
        return Check("export", WARN, "no leak, but the export of canary scope a is not valid JSON", "")
    return Check(
        "export",
        OK,
        gettext_noop("the scope export (episodes, profiles and audit) carries the scope's own canary only"),
    )


def check_delete(probe: Canaries) -> Check:
    leaks = []
    try:
        episodes.delete(probe.a, PROBE_ACTOR, [probe.id_b])
    except NotFound:
        pass
    else:
        leaks.append("deleting canary b through canary scope a's keys succeeded")
    ids = list(EpisodeFilter.build(probe.a, statuses=None).episodes().values_list("episode_id", flat=True))
    deleted = episodes.delete(probe.a, PROBE_ACTOR, ids) if ids else 0
    b_row = Episode.objects.in_scope(probe.b.user_key).filter(episode_id=probe.id_b).exists()
    b_vector = probe.id_b in vectors.get(probe.b.user_key, [probe.id_b])
    if not (b_row and b_vector):
        leaks.append("deleting canary scope a's episodes removed canary b's " + ("row" if not b_row else "vector"))
    if deleted > 1:
        leaks.append(f"deleting by canary scope a's filter deleted {deleted} episodes, expected 1")
    if leaks:
        return _leak("delete", leaks)
    if deleted == 0:
        return Check("delete", WARN, "deleting by canary scope a's filter deleted nothing (expected 1)", REINDEX_FIX)
    if probe.id_a in vectors.get(probe.a.user_key, [probe.id_a]):
        return Check("delete", WARN, "the deleted canary's row is gone but its vector remains", REINDEX_FIX)
    return Check(
        "delete", OK, gettext_noop("deleting by a scope's filter removed exactly its own canary (row and vector)")
    )
