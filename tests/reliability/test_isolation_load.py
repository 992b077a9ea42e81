"""Isolation under load: while writers fill many scopes through the API, checkers keep reading other
scopes (recall, inject, profile, the console's episode list) and trying to reach across them.

A real server (gunicorn, one worker with four threads, file SQLite and embedded Chroma) serves two
bots: several sessions in session isolation and one bot-isolation space. Every episode carries its
scope's tag in its text; any read returning an episode written to another scope (by id or by tag),
any forget that deletes across scopes, and any 2xx for the other bot's token is a violation.
tests/memory/test_isolation.py proves the same property operation by operation, without load.
"""

from __future__ import annotations

import http.cookiejar
import random
import re
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

import pytest

from .conftest import BOT, Server, post_json, record_figure

pytestmark = pytest.mark.slow

OTHER_BOT = "other-bot"
SCOPES = [
    *[(BOT, f"group_{n}", "session") for n in range(5)],
    (BOT, "person_7", "session"),
    (OTHER_BOT, "group_0", "session"),
    (OTHER_BOT, "group_1", "bot"),  # bot isolation: user_key bot:other-bot
]
WRITERS, CHECKERS = 4, 3
SECONDS = 15.0  # the load runs this long (or until MAX_WRITES)
MAX_WRITES = 400
ID = re.compile(r"/episodes/([0-9a-f]{12})/")


def tag(scope: tuple[str, str, str]) -> str:
    return f"tag{SCOPES.index(scope)}x"


@dataclass
class Ledger:
    written: dict[int, set[str]] = field(default_factory=lambda: {i: set() for i in range(len(SCOPES))})
    violations: list[str] = field(default_factory=list)
    checks: int = 0
    refused: int = 0
    seen: int = 0  # episodes returned by reads and checked
    listed: int = 0  # episode ids read from console pages and checked
    lock: threading.Lock = field(default_factory=threading.Lock)

    def owner(self, episode_id: str) -> int | None:
        with self.lock:
            for index, ids in self.written.items():
                if episode_id in ids:
                    return index
        return None

    def violation(self, text: str) -> None:
        with self.lock:
            self.violations.append(text)


def body(scope: tuple[str, str, str], **extra) -> dict:
    bot, session, isolation = scope
    return {"bot_uuid": bot, "session_name": session, "isolation": isolation, **extra}


def test_it_never_returns_another_scopes_memory_under_load(template_site, tmp_path):
    site = template_site.copy_to(tmp_path / "site")
    site.script(
        "create_superuser.py", {"username": "checker", "email": "c@example.org", "password": "checker-horse-battery"}
    )
    tokens = template_site.tokens
    server = Server.start(site.env)
    ledger = Ledger()
    stop = threading.Event()
    try:
        for index, scope in enumerate(SCOPES):  # every scope exists before the load starts
            status, answer = post_json(
                f"{server.url}/api/v1/remember", body(scope, content=f"{tag(scope)} first memory"), tokens[scope[0]]
            )
            assert status == 201, answer
            ledger.written[index].add(answer["episode_id"])
        scope_ids = site.script("scope_ids.py")

        def writer(seed: int) -> None:
            rng = random.Random(seed)
            while not stop.is_set():
                with ledger.lock:
                    if sum(len(ids) for ids in ledger.written.values()) >= MAX_WRITES:
                        return
                index = rng.randrange(len(SCOPES))
                scope = SCOPES[index]
                content = f"{tag(scope)} note {rng.random():.8f}: the meeting moved to room {rng.randrange(99)}"
                try:
                    status, answer = post_json(
                        f"{server.url}/api/v1/remember", body(scope, content=content), tokens[scope[0]]
                    )
                except OSError as exc:
                    ledger.violation(f"writer: {exc}")
                    return
                if status == 201:
                    with ledger.lock:
                        ledger.written[index].add(answer["episode_id"])

        def check_episodes(where: str, index: int, episodes: list[dict]) -> None:
            with ledger.lock:
                ledger.seen += len(episodes)
            for episode in episodes:
                owner = ledger.owner(episode["episode_id"])
                if tag(SCOPES[index]) not in episode["content"] or (owner is not None and owner != index):
                    ledger.violation(f"{where} in scope {index} returned {episode['episode_id']} of scope {owner}")

        def console_list(opener, index: int) -> None:
            bot, session, isolation = SCOPES[index]
            scope_key = f"{bot}:{session}"
            pk = scope_ids[f"{scope_key}|{isolation}"]
            with opener.open(f"{server.url}/scopes/{pk}/episodes/?status=all&limit=50", timeout=60) as response:
                html = response.read().decode()
            found = set(ID.findall(html))
            with ledger.lock:
                ledger.listed += len(found)
            for episode_id in found:
                owner = ledger.owner(episode_id)
                if owner is not None and owner != index:
                    ledger.violation(f"console list of scope {index} shows {episode_id} of scope {owner}")

        def checker(seed: int) -> None:
            rng = random.Random(seed)
            jar = http.cookiejar.CookieJar()
            opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
            with opener.open(f"{server.url}/accounts/login/", timeout=60) as page:
                page.read()
            csrf = next(c.value for c in jar if c.name == "csrftoken")
            form = urllib.parse.urlencode(
                {"username": "checker", "password": "checker-horse-battery", "csrfmiddlewaretoken": csrf}
            ).encode()
            opener.open(
                urllib.request.Request(
                    f"{server.url}/accounts/login/", data=form, headers={"Referer": f"{server.url}/accounts/login/"}
                ),
                timeout=60,
            ).read()
            while not stop.is_set():
                index = rng.randrange(len(SCOPES))
                scope = SCOPES[index]
                token = tokens[scope[0]]
                foreign = [i for i in range(len(SCOPES)) if i != index and ledger.written[i]]
                other = rng.choice(foreign)
                with ledger.lock:
                    foreign_id = rng.choice(sorted(ledger.written[other]))
                kind = rng.choice(["recall", "recall_by_id", "inject", "forget", "console", "other_token"])
                try:
                    if kind == "recall":
                        status, answer = post_json(
                            f"{server.url}/api/v1/recall",
                            body(
                                scope,
                                query="the meeting moved",
                                top_k=50,
                                statuses=["active", "archived", "superseded"],
                            ),
                            token,
                        )
                        check_episodes("recall", index, answer.get("episodes", []) if status == 200 else [])
                    elif kind == "recall_by_id":  # an id named in the query is matched exactly, but only in scope
                        status, answer = post_json(
                            f"{server.url}/api/v1/recall",
                            body(scope, query=f"what about {foreign_id}", top_k=50),
                            token,
                        )
                        check_episodes("recall by id", index, answer.get("episodes", []) if status == 200 else [])
                    elif kind == "inject":
                        status, answer = post_json(
                            f"{server.url}/api/v1/inject", body(scope, query="meeting", top_k=10), token
                        )
                        check_episodes("inject", index, answer["context"]["episodes"] if status == 200 else [])
                    elif kind == "forget":
                        status, answer = post_json(
                            f"{server.url}/api/v1/forget", body(scope, episode_id=foreign_id), token
                        )
                        if status != 404:
                            ledger.violation(f"forget of scope {other}'s {foreign_id} from scope {index}: {status}")
                        with ledger.lock:
                            ledger.refused += 1
                    elif kind == "console":
                        console_list(opener, index)
                    else:
                        wrong = tokens[OTHER_BOT if scope[0] == BOT else BOT]
                        status, answer = post_json(f"{server.url}/api/v1/recall", body(scope, query="meeting"), wrong)
                        if status != 403:
                            ledger.violation(f"the other bot's token read scope {index}: {status}")
                        with ledger.lock:
                            ledger.refused += 1
                except OSError as exc:
                    ledger.violation(f"checker {kind}: {exc}")
                    return
                with ledger.lock:
                    ledger.checks += 1

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
        threads += [threading.Thread(target=checker, args=(100 + n,)) for n in range(CHECKERS)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        deadline = started + SECONDS
        while time.monotonic() < deadline and any(t.is_alive() for t in threads[:WRITERS]):
            time.sleep(0.1)
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        server.kill()

    assert ledger.violations == [], ledger.violations[:10]
    written = [episode_id for ids in ledger.written.values() for episode_id in ids]
    result = site.check(acknowledged=written)
    assert result["missing"] == [] and result["chain"]["ok"] and result["counters_wrong"] == []
    assert result["check_after"]["ok"]
    assert ledger.checks >= 20 and ledger.seen > 0 and ledger.listed > 0, ledger
    record_figure(
        "isolation_under_load",
        "run",
        {
            "scopes": len(SCOPES),
            "writers": WRITERS,
            "checkers": CHECKERS,
            "seconds": round(elapsed, 1),
            "episodes_written": len(written),
            "cross_scope_checks": ledger.checks,
            "refused_cross_scope_attempts": ledger.refused,
            "episodes_returned_and_checked": ledger.seen,
            "console_ids_checked": ledger.listed,
        },
    )
