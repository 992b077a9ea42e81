"""The MCP server: the SDK's low-level `Server` with memconsole's tools, served one HTTP request at a time.

Each POST to /mcp is handed to the SDK's own Streamable HTTP transport (`StreamableHTTPSessionManager`)
in its stateless, JSON-response mode, inside a one-request event loop that Django's `async_to_sync`
runs beside the WSGI thread. Stateless: no `Mcp-Session-Id`, nothing kept between requests, so any
gunicorn worker or thread can answer any request. JSON responses: one request in, one JSON answer
out, no open SSE stream holding a worker thread. The SDK still does all of the protocol (both the
handshake era with `initialize` and the 2026 single-exchange era, version and header checks,
notifications answered 202).

The tools touch the database, so they run through `sync_to_async` (thread-sensitive), which under
`async_to_sync` means back on the request's own thread: the same database connection, closed at
the end of the request as for any other view.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.types import Message, Scope

from memconsole.memory.audit import Actor

from .tools import TOOLS, call_tool

ACTOR_KEY = "memconsole.actor"  # where the view puts the token's Actor in the ASGI scope's state

INSTRUCTIONS = (
    "Long-term memory for chat bots. Every tool works on one memory space: bot_uuid + session_name + "
    "isolation ('session' for one chat, 'bot' for what all chats of the bot share). Call list_sessions to "
    "see the spaces this token may use. remember stores an episode, recall searches, inject builds the "
    "memory block for a prompt, get_profile and update_profile keep what is known about a chat or speaker."
)


async def _list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[tool.describe() for tool in TOOLS.values()])


def _actor(ctx: ServerRequestContext[Any]) -> Actor:
    state = getattr(ctx.request, "scope", {}).get("state") or {}
    actor = state.get(ACTOR_KEY)
    if not isinstance(actor, Actor):  # only a request that came through the view has one
        raise MCPError(types.INVALID_REQUEST, "this request carries no authenticated bot token")
    return actor


async def _call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name not in TOOLS:
        raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name[:100]!r}; see tools/list")
    return await sync_to_async(call_tool)(_actor(ctx), params.name, params.arguments)


server: Server[Any] = Server(
    "memconsole",
    version="1",
    title="memconsole memory",
    instructions=INSTRUCTIONS,
    on_list_tools=_list_tools,
    on_call_tool=_call_tool,
)


@dataclass
class Answer:
    """What the SDK answered, to become the Django response."""

    status: int = 500
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)


async def serve(
    method: str, path: str, query_string: bytes, headers: Iterable[tuple[str, str]], body: bytes, actor: Actor
) -> Answer:
    """Run one HTTP request through the SDK's Streamable HTTP transport (stateless, JSON responses)."""
    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=True,
        stateless=True,
        max_request_body_size=settings.MEMCONSOLE_API_MAX_BODY_BYTES,
    )
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("utf-8"),
        "root_path": "",
        "query_string": query_string,
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers],
        "state": {ACTOR_KEY: actor},
    }
    answer = Answer()
    body_sent = False
    done = anyio.Event()

    async def receive() -> Message:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # nothing more to read; the client "disconnects" once the answer is out
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in message["headers"]]
        elif message["type"] == "http.response.body":
            answer.body.extend(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    done.set()
    return answer
