"""The client's retries (429 and 503 after Retry-After, within a budget), against a scripted transport."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import anyio
import httpx
import pytest
from memconsole_client import AsyncMemoryClient, MemconsoleError, MemoryClient, Retry
from memconsole_client.types import Profile

PROFILE: Profile = {
    "type": "session",
    "sender_id": "",
    "name": "",
    "traits": [],
    "preferences": [],
    "notes": "",
    "version": 0,
    "updated_at": None,
}


def limited(retry_after: str | None = "2", status: int = 429) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    code = "rate_limited" if status == 429 else "unavailable"
    return httpx.Response(status, json={"error": {"code": code, "message": "wait"}}, headers=headers)


def scripted(*answers: httpx.Response) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    return httpx.MockTransport(handler), seen


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr("memconsole_client.client.time.sleep", slept.append)
    return slept


def sync_client(transport: httpx.MockTransport, retry: Retry | None = None) -> MemoryClient:
    return MemoryClient(
        "http://memory.test", "mct_x", "bot-a", "g", retry=retry, http_client=httpx.Client(transport=transport)
    )


def test_it_retries_429_and_503_after_retry_after(sleeps):
    transport, seen = scripted(limited("2"), limited("1", status=503), httpx.Response(200, json=PROFILE))
    assert sync_client(transport).get_profile() == PROFILE
    assert sleeps == [2.0, 1.0] and len(seen) == 3
    assert {request.url.params["bot_uuid"] for request in seen} == {"bot-a"}  # the same request each time


def test_it_backs_off_exponentially_without_retry_after(sleeps):
    transport, _ = scripted(limited(None, 503), limited(None, 503), httpx.Response(200, json=PROFILE))
    sync_client(transport, Retry(backoff=0.25)).get_profile()
    assert sleeps == [0.25, 0.5]


def test_it_reads_an_http_date_retry_after(sleeps):
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True)
    transport, _ = scripted(limited(when), httpx.Response(200, json=PROFILE))
    sync_client(transport).get_profile()
    assert len(sleeps) == 1 and 3 <= sleeps[0] <= 6


def test_it_gives_up_when_the_wait_would_overrun_the_budget(sleeps):
    transport, seen = scripted(limited("5"), limited("30"))
    with pytest.raises(MemconsoleError) as error:
        sync_client(transport, Retry(budget=20)).get_profile()
    assert (error.value.status, error.value.code, error.value.retry_after) == (429, "rate_limited", 30)
    assert sleeps == [5.0] and len(seen) == 2  # waited 5 s, then 30 more would pass 20: raised at once


def test_it_gives_up_after_its_attempts(sleeps):
    transport, seen = scripted(*[limited("1")] * 3)
    with pytest.raises(MemconsoleError) as error:
        sync_client(transport, Retry(attempts=2)).recall("x")
    assert error.value.status == 429 and sleeps == [1.0, 1.0] and len(seen) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 500])
def test_it_never_retries_other_errors(sleeps, status):
    transport, seen = scripted(httpx.Response(status, json={"error": {"code": "no", "message": "no"}}))
    with pytest.raises(MemconsoleError) as error:
        sync_client(transport).get_profile()
    assert error.value.status == status and sleeps == [] and len(seen) == 1


@pytest.mark.parametrize("code", ["row_integrity", "encryption_key_missing"])
def test_it_never_retries_a_503_that_waiting_does_not_mend(sleeps, code):
    """docs/api.md: retrying does not help a tampered row or a missing key; the bot hears it at once."""
    transport, seen = scripted(httpx.Response(503, json={"error": {"code": code, "message": "no"}}))
    with pytest.raises(MemconsoleError) as error:
        sync_client(transport).get_profile()
    assert (error.value.status, error.value.code) == (503, code) and sleeps == [] and len(seen) == 1


def test_it_can_be_told_never_to_retry(sleeps):
    transport, seen = scripted(limited("1"))
    with pytest.raises(MemconsoleError):
        sync_client(transport, Retry.never()).get_profile()
    assert sleeps == [] and len(seen) == 1


def test_it_reports_a_non_json_answer():
    transport, _ = scripted(httpx.Response(200, text="<html>proxy</html>"))
    with pytest.raises(MemconsoleError) as error:
        sync_client(transport).get_profile()
    assert (error.value.status, error.value.code) == (0, "bad_response")
    transport, _ = scripted(httpx.Response(502, text="Bad gateway"))
    with pytest.raises(MemconsoleError) as error:
        sync_client(transport).get_profile()
    assert (error.value.status, error.value.code, error.value.message) == (502, "http_error", "Bad gateway")


def test_the_async_client_retries_the_same_way(monkeypatch):
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("memconsole_client.async_client.anyio.sleep", sleep)
    transport, seen = scripted(limited("3"), httpx.Response(200, json=PROFILE))

    async def main() -> Profile:
        async with httpx.AsyncClient(transport=transport) as http:
            memory = AsyncMemoryClient("http://memory.test", "mct_x", "bot-a", "g", http_client=http)
            return await memory.get_profile()

    assert anyio.run(main) == PROFILE
    assert slept == [3.0] and len(seen) == 2


@pytest.mark.parametrize("token", ["mct_57ced2a0_\u200bx", "mct_é", "mct_a b", ""])
def test_a_token_no_http_header_can_carry_is_refused_when_the_client_is_made(token):
    """Before, such a token raised a raw UnicodeEncodeError from the first call."""
    with pytest.raises(ValueError, match="token must be the bot token"):
        MemoryClient("http://memory.test", token, "bot-a", "g")


# --- found in review: each failed before its fix ------------------------------------------------


def test_it_backs_off_after_a_retry_after_date_already_past(sleeps):
    """Before, an HTTP date in the past gave a wait of 0: three retries in the same instant."""
    past = format_datetime(datetime.now(UTC) - timedelta(minutes=5), usegmt=True)
    transport, seen = scripted(limited(past), limited("0"), limited(past), httpx.Response(200, json=PROFILE))
    assert sync_client(transport).get_profile() == PROFILE
    assert sleeps == [0.5, 1.0, 2.0] and len(seen) == 4


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8151x", "http://[::1", "http://127.0.0.1:99999", "127.0.0.1:8151", "http://"]
)
def test_it_raises_memconsole_error_for_a_malformed_server_url(url):
    """Before, httpx.InvalidURL, or an ExceptionGroup around an OverflowError (async), escaped."""
    with pytest.raises(MemconsoleError) as error, MemoryClient(url, "mct_x", "bot-a", "g", timeout=2) as memory:
        memory.recall("x")
    assert (error.value.status, error.value.code) == (0, "invalid_url") and "check the URL" in error.value.message

    async def main() -> None:
        async with AsyncMemoryClient(url, "mct_x", "bot-a", "g", timeout=2) as memory:
            await memory.recall("x")

    with pytest.raises(MemconsoleError) as error:
        anyio.run(main)
    assert (error.value.status, error.value.code) == (0, "invalid_url")


@pytest.mark.parametrize(
    "raised",
    [OverflowError("connect(): port must be 0-65535."), ExceptionGroup("connect", [OSError("no route")])],
)
def test_it_wraps_whatever_sending_raises_below_http(raised):
    def handler(request: httpx.Request) -> httpx.Response:
        raise raised

    with pytest.raises(MemconsoleError) as error:
        sync_client(httpx.MockTransport(handler)).get_profile()
    assert error.value.status == 0 and error.value.code in ("invalid_url", "unreachable")

    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            await AsyncMemoryClient("http://memory.test", "mct_x", "bot-a", "g", http_client=http).get_profile()

    with pytest.raises(MemconsoleError) as error:
        anyio.run(main)
    assert error.value.status == 0


@pytest.mark.parametrize("method", ["recall", "get_profile", "inject", "forget", "list_sessions", "list_episodes"])
def test_it_refuses_a_successful_answer_without_what_the_call_returns(method):
    """Before, a 200 `{}` (a proxy, another service at the address) raised KeyError, or was
    handed on as an injection without blocks."""
    transport, _ = scripted(httpx.Response(200, json={}))
    args = {"recall": ("x",), "inject": ("x",), "forget": ("000000000000",)}.get(method, ())
    with pytest.raises(MemconsoleError) as error:
        getattr(sync_client(transport), method)(*args)
    assert (error.value.status, error.value.code) == (200, "bad_response")
    assert "is this address a memconsole server?" in error.value.message
