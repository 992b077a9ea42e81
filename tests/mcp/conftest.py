"""Fixtures for the MCP server tests: a bot token, and the official MCP client connected to /mcp."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from memconsole.memory import tokens
from memconsole.memory.audit import Actor

# Both protocol eras the SDK speaks: "auto" probes server/discover (2026-07-28, one exchange per
# request), "legacy" runs the initialize handshake (2025-11-25 and older, what most assistants speak).
MODES = ["auto", "legacy"]


@pytest.fixture
def token(transactional_db):
    """(row, secret) of a token holding bot-a only."""
    return tokens.create_token("mcp assistant", ["bot-a"], Actor.system("tests"))


@pytest.fixture(params=MODES)
def mode(request) -> str:
    return request.param


@asynccontextmanager
async def mcp_client(url: str, secret: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    """The official MCP client over Streamable HTTP at `url`/mcp, sending `secret` as its bearer token."""
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def run_client(url: str, secret: str | None, mode: str, scenario: Callable[[Client], Awaitable[Any]]) -> Any:
    """Run `scenario(client)` in an event loop of its own (the test's database work stays outside it)."""

    async def main() -> Any:
        async with mcp_client(url, secret, mode) as client:
            return await scenario(client)

    return anyio.run(main)


def _structured(result: types.CallToolResult) -> dict[str, Any]:
    """The result's structured content, checked to say the same as its one text block."""
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text) == result.structured_content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    """The `{"code", "message", "field"?}` of a failed tool call."""
    assert result.is_error, result
    error: dict[str, Any] = _structured(result)["error"]
    return error


def data_of(result: types.CallToolResult) -> dict[str, Any]:
    """The answer of a successful tool call."""
    assert not result.is_error, result
    return _structured(result)
