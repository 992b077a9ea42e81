"""`!memory`: this chat's memory as memconsole holds it (overview, list, search, forget, export).

`forget` and `export` manage the memory: LangBot runs a command with privilege 2 for a chat in its
`admins` list. A member without it forgets only their own memories and exports nothing. `export`
never puts the document into a chat (a memory's export can be megabytes, and under bot isolation it
holds every chat's memories): it says how much this chat holds and where the console exports it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from langbot_plugin.api.definition.components.command.command import Command
from langbot_plugin.api.entities.builtin.command.context import CommandReturn, ExecuteContext
from langbot_plugin.api.proxies.query_based_api import QueryBasedAPIProxy
from memconsole_bridge import (
    ADMIN_PRIVILEGE,
    MemconsoleError,
    SettingsError,
    Turn,
    error_text,
    forget_refusal,
    not_found,
    one_line,
    query_text,
    session_name_of,
    speaker_line,
    turn_of,
)

logger = logging.getLogger("memconsole.langbot")

LIST_DEFAULT, LIST_MAX = 10, 50
USAGE = "Usage: !memory | !memory list [n] | !memory search <query> | !memory forget <id> | !memory export"


async def _turn(command: Command, context: ExecuteContext) -> Turn:
    api = QueryBasedAPIProxy(
        query_id=context.query_id,
        query_uuid=context.query_uuid,
        plugin_runtime_handler=command.plugin.plugin_runtime_handler,
    )
    return await turn_of(command, api, session_name_of(context.session))


def _is_admin(context: ExecuteContext) -> bool:
    return int(context.privilege) >= ADMIN_PRIVILEGE


def _failed(what: str, error: Exception) -> CommandReturn:
    """The answer to a subcommand that failed: memconsole's or the settings' reason, or (anything
    else, logged) a plain error; a command never fails the message."""
    if not isinstance(error, (SettingsError, MemconsoleError)):
        logger.exception("!memory %s failed unexpectedly", what)
    return CommandReturn(text=error_text(error))


def _line(episode: Mapping[str, Any]) -> str:
    who = speaker_line(episode.get("sender_id"), episode.get("sender_name"))
    when = (episode.get("timestamp") or "")[:10] or "-"
    return f"- {episode['episode_id']} ({when}) {who}: {one_line(episode['content'])}"


class Memory(Command):
    def __init__(self) -> None:
        super().__init__()

        @self.subcommand(name="", help="Show this chat's memory in memconsole", usage="!memory")
        async def overview(self: Memory, context: ExecuteContext) -> AsyncGenerator[CommandReturn, None]:
            try:
                turn = await _turn(self, context)
                async with turn.client() as memory:
                    session = await memory.get_profile("session")
                    speaker = await memory.get_profile("speaker", turn.speaker.id) if turn.speaker.id else None
                    newest = await memory.list_episodes(limit=1)
            except Exception as error:
                yield _failed("overview", error)
                return
            lines = [f"[Memory] memconsole, isolation: {turn.settings.isolation}", f"Session: {turn.session_name}"]
            lines.append(f"Current speaker: {one_line(turn.speaker.name) or '-'} ({turn.speaker.id or '-'})")
            lines.append(
                f"Session profile: {one_line(session['name']) or '-'}, {len(session['traits'])} traits, "
                f"{len(session['preferences'])} preferences (version {session['version']})"
            )
            if speaker is not None:
                lines.append(
                    f"Speaker profile: {one_line(speaker['name']) or '-'}, {len(speaker['traits'])} traits, "
                    f"{len(speaker['preferences'])} preferences (version {speaker['version']})"
                )
            lines.append("Newest memory: " + (_line(newest["episodes"][0])[2:] if newest["episodes"] else "(none)"))
            lines.append(USAGE)
            yield CommandReturn(text="\n".join(lines))

        @self.subcommand(name="list", help="List the newest memories", usage="!memory list [n]", aliases=["ls"])
        async def list_(self: Memory, context: ExecuteContext) -> AsyncGenerator[CommandReturn, None]:
            count = LIST_DEFAULT
            if context.crt_params:
                given = context.crt_params[0]
                if not (given.isascii() and given.isdecimal()) or not 1 <= int(given) <= LIST_MAX:
                    yield CommandReturn(text=f"Usage: !memory list [n], n from 1 to {LIST_MAX}")
                    return
                count = int(given)
            try:
                turn = await _turn(self, context)
                async with turn.client() as memory:
                    page = await memory.list_episodes(limit=count)
            except Exception as error:
                yield _failed("list", error)
                return
            if not page["episodes"]:
                yield CommandReturn(text="[Memory] no memories in this chat yet.")
                return
            more = " (more: see the memconsole console)" if page["next_cursor"] else ""
            text = f"[Memory] newest {len(page['episodes'])}{more}:\n" + "\n".join(map(_line, page["episodes"]))
            yield CommandReturn(text=text)

        @self.subcommand(name="search", help="Search the memories", usage="!memory search <query>", aliases=["s"])
        async def search(self: Memory, context: ExecuteContext) -> AsyncGenerator[CommandReturn, None]:
            query = query_text(" ".join(context.crt_params))
            if not query:
                yield CommandReturn(text="Usage: !memory search <query>")
                return
            try:
                turn = await _turn(self, context)
                async with turn.client() as memory:
                    hits = await memory.recall(query, top_k=LIST_DEFAULT, speaker_id=turn.speaker.id or None)
            except Exception as error:
                yield _failed("search", error)
                return
            if not hits:
                yield CommandReturn(text=f"[Memory] nothing matches {query!r}.")
                return
            lines = [f"{_line(hit)} (score {hit['score']:.2f})" for hit in hits]
            yield CommandReturn(text=f"[Memory] {len(hits)} matching {query!r}:\n" + "\n".join(lines))

        @self.subcommand(name="forget", help="Delete one memory", usage="!memory forget <id>", aliases=["rm"])
        async def forget(self: Memory, context: ExecuteContext) -> AsyncGenerator[CommandReturn, None]:
            if len(context.crt_params) != 1:
                yield CommandReturn(text="Usage: !memory forget <id>")
                return
            episode_id = context.crt_params[0].strip()
            try:
                turn = await _turn(self, context)
                async with turn.client() as memory:
                    refusal = None if _is_admin(context) else await forget_refusal(memory, episode_id, turn.speaker)
                    if refusal is None:
                        await memory.forget(episode_id)
            except MemconsoleError as error:
                text = f"[Memory] no memory {episode_id} in this chat." if not_found(error) else error_text(error)
                yield CommandReturn(text=text)
                return
            except Exception as error:
                yield _failed("forget", error)
                return
            yield CommandReturn(text=f"[Memory] {refusal}" if refusal else f"[Memory] forgot {episode_id}.")

        @self.subcommand(name="*", help="An alias (ls, s, rm), or the usage", usage=USAGE)
        async def other(self: Memory, context: ExecuteContext) -> AsyncGenerator[CommandReturn, None]:
            # The SDK hands every word it does not know here, aliases included (it never resolves them).
            word = context.crt_params[0] if context.crt_params else ""
            name = next((n for n, sub in self.registered_subcommands.items() if word in sub.aliases), None)
            if name is None:
                yield CommandReturn(text=f"[Memory] unknown subcommand {word!r}. {USAGE}")
                return
            context.shift()
            async for answer in self.registered_subcommands[name].subcommand(self, context):
                yield answer

        @self.subcommand(name="export", help="How to export this chat's memory (admins)", usage="!memory export")
        async def export(self: Memory, context: ExecuteContext) -> AsyncGenerator[CommandReturn, None]:
            if not _is_admin(context):
                yield CommandReturn(text="[Memory] export is for an admin of the bot (LangBot's admins list).")
                return
            try:
                turn = await _turn(self, context)
                async with turn.client() as memory:
                    sessions = await memory.list_sessions()
            except Exception as error:
                yield _failed("export", error)
                return
            isolation = turn.settings.isolation
            written = sum(
                row["episodes"]
                for row in sessions
                if row["session_name"] == turn.session_name and row["isolation"] == isolation
            )
            where = f"bot {turn.bot_uuid}, session {turn.session_name}, {isolation} isolation"
            lines = [
                f"[Memory] memories written in this chat ({turn.session_name}, {isolation} isolation): {written}.",
                (
                    "The export document is not sent into a chat. Export it in the memconsole console "
                    f"({turn.console_url}): open the memory of {where}, then Export."
                ),
            ]
            if isolation == "bot":
                lines.append("This memory is shared by all the bot's chats: its export holds every chat's memories.")
            yield CommandReturn(text="\n".join(lines))
