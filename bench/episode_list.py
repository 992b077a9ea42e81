"""Benchmark 1: the Episodes page of a very large scope.

N episodes (default 100,000; the issue's size is 1,000,000) bulk-loaded into one scope plus N/10
spread over 20 other scopes, interleaved by time as real traffic would be, with a realistic mix of
statuses (85% active, 10% archived, 5% superseded) and ~450 speakers. Then, in this process, through
Django's test Client with a logged-in console user of the *admin* role (every row carries its
archive/restore/delete buttons; page 1 is also timed for a *viewer*) - full middleware stack, full
server-side render, session saved on every request as in production:

- the console's Episodes page (`/scopes/<id>/episodes/`), sorted by event time ("Newest first")
  with its count and position shown: page 1, a page 10,000 rows deep reached by following the
  page's own Next links, the last page, a status filter (archived), a speaker filter and an
  importance filter (both with a filtered count), a tag filter (a count that cannot use an index:
  bounded), and page 1 sorted by importance;
- the baseline: Django's own admin changelist for Episode on the same database (page 1 and
  `?p=1000`, the last page, the same filters and orders), logged in as a superuser. Episode is not
  registered in memconsole's admin, so it is registered here, in this process only, with a
  `ModelAdmin` ordered by event time like the console (Django's defaults otherwise: 100 rows a
  page, a full COUNT for the paginator; the filters it needs in `list_filter`, tags in
  `search_fields`);
- `episodes.list_episodes` itself against Django's Paginator (COUNT + OFFSET) on the scope.

    .venv/bin/python -m bench.episode_list [--episodes 1000000] [--deep 10000]
"""

from __future__ import annotations

import html
import re
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import corpus, dataset, harness

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.test import Client

    from memconsole.memory.scopes import ScopeKeys

TARGET_MS = 15.0
TARGET_DEEP_SLOWDOWN = 1.20
TARGET_ADMIN_RATIO = 50.0
# Issue 22's target for the event-time sorted page with its count: <= 15 ms and >= 4x the admin.
TARGET_ADMIN_RATIO_ISSUE22 = 4.0
OTHER_SCOPES = 20
PAGE_SIZE = 25
NEXT_LINK = re.compile(r'<a rel="next" href="([^"]+)"')
FAULTS_PER_REQUEST = 0.0


def load(n: int) -> tuple[ScopeKeys, int]:
    """Bulk-load the big scope (n) and the small ones (n/10 in all); return the big scope's keys."""
    big = dataset.scope_keys("group_big_chat")
    others = [dataset.scope_keys(f"group_{i:03d}") for i in range(OTHER_SCOPES)]
    total = n + n // 10

    def assignments() -> Iterator[tuple[ScopeKeys, corpus.Text]]:
        for position, text in enumerate(corpus.texts(total)):
            if position % 11 == 10:
                yield others[(position // 11) % OTHER_SCOPES], text
            else:
                yield big, text

    with harness.stopwatch() as elapsed:
        written = dataset.bulk_load(assignments(), total)
    harness.progress(f"bulk-loaded {written:,} episodes in {elapsed():.1f} s")
    return big, written


def users() -> tuple[User, User, User]:
    from django.contrib.auth.models import Group, User

    from memconsole.memory import roles

    console_user = User.objects.create_user("bench_console_admin", password="x")
    console_user.groups.add(Group.objects.get(name=roles.ADMIN))
    viewer = User.objects.create_user("bench_console_viewer", password="x")
    viewer.groups.add(Group.objects.get(name=roles.VIEWER))
    superuser = User.objects.create_superuser("bench_superuser", password="x")
    return console_user, viewer, superuser


def register_admin_baseline() -> str:
    """Django's own changelist for Episode; registered here only when the project does not."""
    from django.contrib import admin

    from memconsole.memory.models import Episode

    if admin.site.is_registered(Episode):
        return "the project's Episode ModelAdmin"

    class ByEventTime(admin.ModelAdmin):  # type: ignore[type-arg]
        list_display = ("episode_id", "timestamp", "importance", "status", "sender_id")
        list_filter = ("status", "sender_id", "importance")
        search_fields = ("tags_text",)
        ordering = ("-timestamp", "-id")

    admin.site.register(Episode, ByEventTime)
    return "ModelAdmin ordered by event time, registered by the benchmark"


def rounds(
    console: Client,
    viewer_client: Client,
    admin_client: Client,
    pages: dict[str, str],
    admin_urls: dict[str, str],
    budget_s: float = 40.0,
    console_per_round: int = 3,
    min_rounds: int = 5,
    max_rounds: int = 20,
) -> tuple[dict[str, harness.Timing], dict[str, harness.Timing], harness.Timing]:
    """Round-robin samples: each round times every console page `console_per_round` times, page 1
    as a viewer as often, and every admin page once, so that both sides meet the same load."""
    for label in pages:  # warm up
        get_ok(console, pages[label])
        get_ok(admin_client, admin_urls[label])
    get_ok(viewer_client, pages["page1"])
    ours: dict[str, list[float]] = {label: [] for label in pages}
    theirs: dict[str, list[float]] = {label: [] for label in pages}
    viewer: list[float] = []

    def timed(client: Client, url: str) -> float:
        t0 = time.perf_counter()
        get_ok(client, url)
        return time.perf_counter() - t0

    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    started = time.perf_counter()
    done = 0
    while done < max_rounds and (done < min_rounds or time.perf_counter() - started < budget_s):
        for label in pages:
            for _ in range(console_per_round):
                ours[label].append(timed(console, pages[label]))
            theirs[label].append(timed(admin_client, admin_urls[label]))
        viewer.extend(timed(viewer_client, pages["page1"]) for _ in range(console_per_round))
        done += 1
    requests = sum(len(v) for v in ours.values()) + sum(len(v) for v in theirs.values()) + len(viewer)
    global FAULTS_PER_REQUEST
    FAULTS_PER_REQUEST = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / max(requests, 1)
    return (
        {k: harness.Timing(v) for k, v in ours.items()},
        {k: harness.Timing(v) for k, v in theirs.items()},
        harness.Timing(viewer),
    )


def through_server(workdir: Path, user: User, url: str, samples: int = 40) -> harness.Timing:
    """Page timings through `make run`'s real server (gunicorn on loopback, keep-alive), logged in
    with a session made for `user`: the production path, at the production call depth."""
    import http.client

    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connections

    from bench import api_load

    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    connections.close_all()
    process, port = api_load.start_gunicorn(harness.bench_environment(workdir), workdir, 1)
    try:
        conn = http.client.HTTPConnection(api_load.HOST, port, timeout=60)
        headers = {"Cookie": f"sessionid={session.session_key}"}

        def get() -> None:
            conn.request("GET", url, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise SystemExit(f"bench: GET {url} through gunicorn answered {response.status}")

        for _ in range(5):
            get()
        timings = []
        for _ in range(samples):
            t0 = time.perf_counter()
            get()
            timings.append(time.perf_counter() - t0)
        conn.close()
    finally:
        api_load.stop(process)
    return harness.Timing(timings)


def get_ok(client: Client, url: str) -> bytes:
    response = client.get(url)
    if response.status_code != 200:
        raise SystemExit(f"bench: GET {url} answered {response.status_code}")
    return response.content


COUNT_SHOWN = re.compile(r'<span id="episode-count"[^>]*>([^<]*)</span>')
POSITION_SHOWN = re.compile(r'<span class="position">([^<]*)</span>')


def count_shown(body: str) -> str:
    """The count and position line the page shows ("9 of 733 match. Showing 1–25 of 9.")."""
    count, position = COUNT_SHOWN.search(body), POSITION_SHOWN.search(body)
    if not count:
        raise SystemExit("bench: the Episodes page shows no count")
    return " ".join(m.group(1).strip() for m in (count, position) if m)


def follow_next(client: Client, url: str, rows_deep: int) -> tuple[str, int]:
    """Follow the page's own Next links until `rows_deep` rows have been skipped."""
    pages = rows_deep // PAGE_SIZE
    for _ in range(pages):
        body = get_ok(client, url).decode()
        match = NEXT_LINK.search(body)
        if not match:
            raise SystemExit(f"bench: no Next link on {url}")
        href = html.unescape(match.group(1))
        url = href if href.startswith("/") else url.split("?", 1)[0] + href
    return url, pages


def run(n: int, deep_rows: int, workdir: Path) -> list[harness.Record]:
    harness.setup_django(workdir)
    admin_kind = register_admin_baseline()

    from django.core.paginator import Paginator
    from django.test import Client
    from django.urls import reverse

    from memconsole.memory import episodes
    from memconsole.memory.models import Episode, EpisodeCounts, Scope

    keys, total = load(n)
    counts = EpisodeCounts.objects.get(user_key=keys.user_key)
    scope = Scope.objects.get(scope_key=keys.scope_key, isolation=keys.isolation)
    deep_rows = min(deep_rows, (counts.active // PAGE_SIZE - 1) * PAGE_SIZE)
    speaker = Episode.objects.in_scope(keys.user_key).order_by("-id").values_list("sender_id", flat=True)[0]
    speaker_rows = Episode.objects.in_scope(keys.user_key).filter(sender_id=speaker, status="active").count()

    console_user, viewer, superuser = users()
    console = Client()
    console.force_login(console_user)
    viewer_client = Client()
    viewer_client.force_login(viewer)
    admin_client = Client()
    admin_client.force_login(superuser)

    base = reverse("console:episodes", args=[scope.pk])
    harness.progress(f"following Next links {deep_rows:,} rows deep")
    with harness.stopwatch() as elapsed:
        deep_url, pages_followed = follow_next(console, base, deep_rows)
    harness.progress(f"{pages_followed} pages followed in {elapsed():.1f} s")

    tag = Episode.objects.in_scope(keys.user_key).order_by("-id").values_list("tags", flat=True)[0][0]
    pages = {
        "page1": base,
        "deep": deep_url,
        "last": f"{base}?cursor=z",
        "status_archived": f"{base}?status=archived",
        "speaker": f"{base}?sender={speaker}",
        "importance_filtered": f"{base}?importance=5",
        "tag_filtered": f"{base}?tag={tag}",
        "sorted_importance": f"{base}?sort=importance",
    }
    changelist = reverse("admin:memory_episode_changelist")
    admin_pages = -(-total // 100)
    admin_deep = min(1000, admin_pages)
    admin_urls = {
        "page1": changelist,
        "deep": f"{changelist}?p={admin_deep}",
        "last": f"{changelist}?p={admin_pages}",
        "status_archived": f"{changelist}?status__exact=archived",
        "speaker": f"{changelist}?sender_id__exact={speaker}",
        "importance_filtered": f"{changelist}?importance__exact=5",
        "tag_filtered": f"{changelist}?q=,{tag},",
        "sorted_importance": f"{changelist}?o=-3.-1",
    }
    shown = {label: count_shown(get_ok(console, url).decode()) for label, url in pages.items()}
    harness.progress(f"counts shown: {shown}")
    with harness.measuring() as measured:
        ours, theirs, as_viewer = rounds(console, viewer_client, admin_client, pages, admin_urls)
        served = through_server(workdir, console_user, base)
    harness.progress(
        f"page1 through gunicorn (HTTP on loopback): median {served.median_ms:.1f} ms; "
        f"{FAULTS_PER_REQUEST:,.0f} page faults per test-client request"
    )
    for label in pages:
        harness.progress(
            f"{label}: console median {ours[label].median_ms:.1f} ms, admin {theirs[label].median_ms:.1f} ms"
        )
    harness.progress(f"page1 as a viewer (no row actions): median {as_viewer.median_ms:.1f} ms")

    common = {"scope_episodes": counts.total, "all_episodes": total}
    records = []
    descriptions = {
        "page1": ("page 1 (active), by event time", "page 1, by event time"),
        "deep": (f"{deep_rows:,} rows deep via Next links", f"?p={admin_deep} (100 rows a page)"),
        "last": ("the last page (cursor=z)", f"?p={admin_pages}"),
        "status_archived": ("status=archived", "?status__exact=archived"),
        "speaker": (f"sender={speaker} ({speaker_rows} rows), filtered count", f"?sender_id__exact={speaker}"),
        "importance_filtered": ("importance=5 (minimum), filtered count", "?importance__exact=5"),
        "tag_filtered": (f"tag={tag}, count bounded at 10,000", f"?q=,{tag}, (search on tags_text)"),
        "sorted_importance": ("page 1 sorted by importance", "?o=-3.-1 (importance, then id)"),
    }
    for label in pages:
        mine, admin = ours[label], theirs[label]
        speedup = harness.ratio(admin.median_ms, mine.median_ms)
        figures = {
            "page": descriptions[label][0],
            "median_ms": round(mine.median_ms, 2),
            "p95_ms": round(mine.p95_ms, 2),
            f"within_{TARGET_MS:g}_ms": mine.median_ms
            <= TARGET_MS,  # the part of the target the admin ratio does not decide
            "samples": len(mine.samples),
            "count_shown": shown[label],
            "issue22_met": mine.median_ms <= TARGET_MS
            and speedup is not None
            and speedup >= TARGET_ADMIN_RATIO_ISSUE22,
            **common,
            "other_cpu_share": measured.share,
        }
        met = mine.median_ms <= TARGET_MS and speedup is not None and speedup >= TARGET_ADMIN_RATIO
        target = f"median <= {TARGET_MS:g} ms and >= {TARGET_ADMIN_RATIO:g}x the admin"
        if label == "page1":
            figures["viewer_median_ms"] = round(as_viewer.median_ms, 2)
            figures["through_gunicorn_median_ms"] = round(served.median_ms, 2)
            figures["page_faults_per_request"] = round(FAULTS_PER_REQUEST)
        if label == "deep":
            slowdown = mine.median_ms / ours["page1"].median_ms
            figures["vs_page1"] = round(slowdown, 2)
            figures["pages_followed"] = pages_followed
            met = met and slowdown <= TARGET_DEEP_SLOWDOWN
            target += f", within {TARGET_DEEP_SLOWDOWN - 1:.0%} of page 1"
        records.append(
            harness.Record(
                name=f"episode_list.console.{label}",
                figures=figures,
                baseline={
                    "name": f"Django admin changelist for Episode, {descriptions[label][1]} ({admin_kind})",
                    "figures": {
                        "median_ms": round(admin.median_ms, 2),
                        "p95_ms": round(admin.p95_ms, 2),
                        "samples": len(admin.samples),
                        "rows_listed": total,
                    },
                    "ratio_of": "admin median / console median",
                },
                ratio=speedup,
                target=target,
                met=met,
            )
        )

    # The domain operation alone, against Django's Paginator (COUNT + OFFSET) on the scope.
    cursor = None
    for _ in range(deep_rows // PAGE_SIZE):
        cursor = episodes.list_episodes(keys, cursor=cursor, limit=PAGE_SIZE, statuses=["active"]).next_cursor
    rows = Episode.objects.in_scope(keys.user_key).filter(status="active").order_by("-id")
    deep_number = deep_rows // PAGE_SIZE + 1
    with harness.measuring() as measured_domain:
        domain = harness.interleaved(
            {
                "op_first": lambda _i: episodes.list_episodes(keys, limit=PAGE_SIZE, statuses=["active"]),
                "op_deep": lambda _i: episodes.list_episodes(keys, cursor=cursor, limit=PAGE_SIZE, statuses=["active"]),
                "off_first": lambda _i: list(Paginator(rows, PAGE_SIZE).page(1)),
                "off_deep": lambda _i: list(Paginator(rows, PAGE_SIZE).page(deep_number)),
            },
            list(range(30)),
        )
    op_first, op_deep, off_first, off_deep = (domain[k] for k in ("op_first", "op_deep", "off_first", "off_deep"))
    slowdown = op_deep.median_ms / op_first.median_ms
    records.append(
        harness.Record(
            name="episode_list.operations.list_episodes",
            figures={
                "page1_median_ms": round(op_first.median_ms, 3),
                "deep_median_ms": round(op_deep.median_ms, 3),
                "deep_rows": deep_rows,
                "deep_vs_page1": round(slowdown, 2),
                **common,
                "other_cpu_share": measured_domain.share,
            },
            baseline={
                "name": "Django Paginator on the same scope (COUNT + OFFSET)",
                "figures": {
                    "page1_median_ms": round(off_first.median_ms, 3),
                    "deep_median_ms": round(off_deep.median_ms, 3),
                    "deep_rows": deep_rows,
                    "deep_vs_page1": round(off_deep.median_ms / off_first.median_ms, 2),
                },
                "ratio_of": "Paginator deep-page median / list_episodes deep-page median",
            },
            ratio=harness.ratio(off_deep.median_ms, op_deep.median_ms),
            target=f"deep page within {TARGET_DEEP_SLOWDOWN - 1:.0%} of page 1",
            met=slowdown <= TARGET_DEEP_SLOWDOWN,
        )
    )
    return records


def main() -> None:
    args = harness.arguments(
        "Console Episodes page vs Django admin changelist",
        episodes=100_000,
        extra=lambda p: p.add_argument(
            "--deep", type=int, default=10_000, help="rows deep for the deep page (default 10,000)"
        ),
    )
    with harness.workspace(args.keep) as workdir:
        for record in run(args.episodes, args.deep, workdir):
            harness.report(record)


if __name__ == "__main__":
    main()
