"""Browser fixtures: real Chromium (Debian's package) driven by Playwright's sync API against
pytest-django's live server.

Without Chromium (or the playwright package) the browser tests skip with the reason, unless
MEMCONSOLE_REQUIRE_BROWSER=1 (set by CI), where they fail instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from memconsole.memory import episodes, injection, profiles
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys
from tests.conftest import PASSWORD
from tests.jobs.work import run_queued_jobs

CHROMIUM = Path(os.environ.get("MEMCONSOLE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
TIMEOUT_MS = 15_000
# Held while the live server serves a request on SQLite (one_request_at_a_time); reentrant, so a
# wrapper that runs queued jobs first (tests/jobs/work.py) serves under the same lock.
SERVING = threading.RLock()

XSS = "<img src=x onerror=window.__xss=1><script>window.__xss=2</script>"
EPISODE_COUNT = 23  # with 10 per page: three pages


def browser_required() -> bool:
    return os.environ.get("MEMCONSOLE_REQUIRE_BROWSER") == "1"


def playwright_expect() -> Any:
    """Playwright's `expect`, for a test module to call at import. Without the playwright package
    the module is skipped, or fails under MEMCONSOLE_REQUIRE_BROWSER=1, like the fixtures below."""
    try:
        from playwright.sync_api import expect  # noqa: PLC0415  optional: without it the browser tests skip
    except ImportError:
        if browser_required():
            raise
        pytest.skip("the playwright package is not installed", allow_module_level=True)
    return expect


def accept_dialogs(console: Console) -> list[str]:
    """Accepts every window.confirm (htmx's hx-confirm) and returns the list of their messages."""
    seen: list[str] = []

    def answer(dialog: Any) -> None:
        seen.append(dialog.message)
        dialog.accept()

    console.page.on("dialog", answer)
    return seen


def _skip_or_fail(reason: str) -> None:
    if browser_required():
        pytest.fail(f"{reason} (MEMCONSOLE_REQUIRE_BROWSER=1, so this fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def playwright_instance() -> Iterator[Any]:
    """Playwright for one test module.

    Its sync API runs an event loop in this thread for as long as it lives, and Django's ORM
    refuses to run beside one ("async context") unless DJANGO_ALLOW_ASYNC_UNSAFE is set. So it
    lives per module, not per session, and the variable is set only while it does: the rest of
    the suite keeps Django's check.
    """
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415  optional: without it the browser tests skip
    except ImportError:
        _skip_or_fail("the playwright package is not installed (pip install -r requirements-test.txt)")
    if not CHROMIUM.exists():
        _skip_or_fail(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        manager = sync_playwright()
        instance = manager.start()
        try:
            yield instance
        finally:
            manager.__exit__(None, None, None)


@pytest.fixture(scope="module")
def browser(playwright_instance: Any) -> Iterator[Any]:
    try:
        chromium = playwright_instance.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
    except Exception as exc:  # a broken install: say so rather than erroring in every test
        _skip_or_fail(f"Chromium at {CHROMIUM} does not start: {exc}")
    yield chromium
    chromium.close()


@dataclass
class Console:
    """One browser tab on the live server, with the helpers the tests share."""

    page: Any
    base_url: str
    context: Any

    def url(self, path: str) -> str:
        return self.base_url + path

    def goto(self, path: str) -> Any:
        return self.page.goto(self.url(path))

    def log_in(self, username: str, password: str = PASSWORD) -> None:
        page = self.page
        self.goto("/accounts/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Log in", exact=True).click()
        page.wait_for_url(self.url("/"))

    def xss_fired(self) -> bool:
        return self.page.evaluate("() => typeof window.__xss !== 'undefined'")

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture(autouse=True)
def connection_left_sane(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a live-server test (its consoles closed, before the database is flushed): the shared
    connection is back in autocommit outside any transaction. A request that overlapped the test's
    own database work would leave it otherwise, and every later test would fail far from the cause."""
    yield
    if "live_server" in request.fixturenames and connection.vendor == "sqlite":
        assert connection.get_autocommit() and not connection.in_atomic_block, (
            "a live-server request overlapped this test's database work: the shared connection's "
            "transaction state is corrupted"
        )


@pytest.fixture(scope="session")
def one_request_at_a_time(live_server: Any) -> Any:
    """On SQLite the test database lives in memory, and pytest-django hands the test's own
    connection to the live server's request threads: one connection object, whose transaction
    state (autocommit, the atomic block) two threads at once would corrupt for the rest of the
    run. There, requests are served one at a time under SERVING, and a console's teardown waits on
    it (after closing its tabs) so that no request is still running when the test's database is
    flushed. Concurrency is tested against real servers (file SQLite, PostgreSQL) in tests/reliability."""

    # Not is_in_memory_db(): this session fixture may be set up before the test database is.
    if connection.vendor == "sqlite":
        server = live_server.thread.httpd
        app = server.get_app()

        def serialised(environ: dict, start_response: Any) -> list[bytes]:
            with SERVING:
                result = app(environ, start_response)
                try:
                    return list(result)
                finally:
                    if hasattr(result, "close"):
                        result.close()

        server.set_app(serialised)
    return live_server


@contextmanager
def jobs_run_before_each_request(live_server: Any) -> Iterator[None]:
    """On the live server (in-memory SQLite, requests served one at a time): every request first
    runs the queued jobs with the worker's runner, under SERVING with the request, so a job started
    by one request is done when the job page is next asked for."""
    server = live_server.thread.httpd
    app = server.get_app()

    def serve(environ: dict[str, Any], start_response: Any) -> Any:
        with SERVING:
            run_queued_jobs()
            return app(environ, start_response)

    server.set_app(serve)
    try:
        yield
    finally:
        with SERVING:
            server.set_app(app)


@pytest.fixture
def new_console(browser: Any, one_request_at_a_time: Any) -> Iterator[Any]:
    """Opens a fresh browser context (own cookies and storage): new_console(color_scheme=, viewport=, timezone_id=)."""
    contexts: list[Any] = []

    def open_console(
        color_scheme: str = "light", viewport: dict[str, int] | None = None, timezone_id: str = "UTC"
    ) -> Console:
        context = browser.new_context(
            viewport=viewport or DESKTOP,
            color_scheme=color_scheme,
            locale="en-GB",
            timezone_id=timezone_id,
            accept_downloads=True,
        )
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return Console(context.new_page(), one_request_at_a_time.url, context)

    yield open_console
    for context in contexts:
        context.close()
    with SERVING:  # a request the closed tabs left running finishes before the database is flushed
        pass


@pytest.fixture
def console(new_console: Any) -> Console:
    return new_console()


@dataclass
class Seeded:
    keys: ScopeKeys
    scope: Scope
    other_scope: Scope
    episode_ids: list[str]  # oldest first
    xss_id: str
    trip_id: str


@pytest.fixture
def seeded(db: Any, keys: ScopeKeys, other_keys: ScopeKeys, system: Any) -> Seeded:
    """bot-a/group_100 with EPISODE_COUNT episodes (one holding HTML and script), a session and a
    speaker profile, two injection snapshots; bot-b/group_200 with one episode."""
    start = timezone.now().replace(microsecond=0) - timedelta(days=2)  # recent: recency keeps scores readable
    ids: list[str] = []
    speakers = [("u1", "Alice"), ("u2", "Bob")]
    trip = episodes.remember(
        keys,
        system,
        "I am planning a trip to Beijing next month",
        tags=["travel"],
        importance=4,
        sender_id="u1",
        sender_name="Alice",
        timestamp=start,
    ).episode
    ids.append(trip.episode_id)
    xss = episodes.remember(
        keys,
        system,
        f"Alice pasted this markup: {XSS}",
        tags=["markup"],
        sender_id="u1",
        sender_name="Alice",
        timestamp=start + timedelta(hours=1),
    ).episode
    ids.append(xss.episode_id)
    for n in range(EPISODE_COUNT - 2):
        sender_id, sender_name = speakers[n % 2]
        made = episodes.remember(
            keys,
            system,
            f"Note {n:02d}: {sender_name} mentioned topic number {n} in the group chat",
            tags=["note"],
            sender_id=sender_id,
            sender_name=sender_name,
            timestamp=start + timedelta(hours=2 + n),
        ).episode
        ids.append(made.episode_id)
    profiles.update_profile(
        keys,
        system,
        "session",
        name="Travel club",
        add_traits=["friendly"],
        add_preferences=["short answers"],
        notes="A group planning trips together.",
    )
    profiles.update_profile(keys, system, "speaker", "u1", name="Alice", add_traits=["curious"])
    injection.record_injection(
        keys, system, "when is the trip to Beijing?", query_id="q-1", sender_id="u1", sender_name="Alice"
    )
    injection.record_injection(
        keys, system, "what markup did Alice paste?", query_id="q-2", sender_id="u1", sender_name="Alice"
    )
    episodes.remember(other_keys, system, "Bot B remembers the blue door", sender_id="u9", sender_name="Zed")
    scope = Scope.objects.get(scope_key=keys.scope_key, isolation=keys.isolation)
    other = Scope.objects.get(scope_key=other_keys.scope_key, isolation=other_keys.isolation)
    return Seeded(keys, scope, other, ids, xss.episode_id, trip.episode_id)
