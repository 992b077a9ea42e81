"""A stand-in for the LangBot host, speaking the plugin SDK's own protocol to the real plugin.

The plugin is loaded exactly as the SDK's runtime loads it (`ComponentDiscoveryEngine`, the
manifest's execution entries, `PluginRuntimeController` and its `PluginRuntimeHandler`) and
talks to this host over an in-memory connection with the SDK's real `Handler`s on both ends. The
host answers only what LangBot itself answers: the bot's uuid and the query variables of the
message being handled (`sender_id`, `sender_name`, `user_message_text`, and whatever a plugin
sets). Everything else the plugin does goes over HTTP to a live memconsole server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from langbot_plugin.api.entities import events
from langbot_plugin.api.entities.builtin.provider.message import Message
from langbot_plugin.api.entities.context import EventContext
from langbot_plugin.cli.run.controller import PluginRuntimeController
from langbot_plugin.cli.run.handler import PluginRuntimeHandler
from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction, RuntimeToPluginAction
from langbot_plugin.entities.io.resp import ActionResponse
from langbot_plugin.runtime.io import connection
from langbot_plugin.runtime.io.handler import Handler
from langbot_plugin.utils.discover.engine import ComponentDiscoveryEngine

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "integrations" / "langbot"


class _Pipe(connection.Connection):
    def __init__(self, inbox: asyncio.Queue[str], outbox: asyncio.Queue[str]) -> None:
        self.inbox, self.outbox = inbox, outbox

    async def send(self, message: str) -> None:
        await self.outbox.put(message)

    async def receive(self) -> str:
        return await self.inbox.get()

    async def close(self) -> None:
        return None


class _HostHandler(Handler):
    """The LangBot side: answers the query-based APIs from `Host.queries`."""


class Host:
    def __init__(self, bot_uuid: str, storage: Path) -> None:
        self.bot_uuid = bot_uuid
        self.storage = storage
        self.queries: dict[int, dict[str, Any]] = {}
        self.query_refs: list[dict[str, Any]] = []  # how the plugin named the query it asked about
        self._next_query = 1000

    def new_query(self, text: str, sender_id: str = "", sender_name: str = "", **more: Any) -> int:
        """A message being handled: LangBot's query variables for it; returns its query id."""
        self._next_query += 1
        self.queries[self._next_query] = {
            "user_message_text": text,
            "sender_id": sender_id,
            "sender_name": sender_name,
            "_knowledge_base_uuids": [],
            **more,
        }
        return self._next_query

    @contextlib.asynccontextmanager
    async def running(self, plugin_config: dict[str, Any]) -> AsyncIterator[Host]:
        """The plugin loaded from its folder, initialised with `plugin_config`, for the block's length."""
        engine = ComponentDiscoveryEngine()
        old_cwd = Path.cwd()
        os.chdir(PLUGIN_DIR)  # the SDK resolves a plugin's paths from its own folder, as its worker does
        try:
            manifest = engine.load_component_manifest("manifest.yaml", owner="test", no_save=True)
            assert manifest is not None and manifest.kind == "Plugin"
            components = [
                component
                for group in manifest.spec["components"].values()
                for component in engine.load_blueprint_comp_group(group, owner="test", no_save=True)
            ]
            controller = PluginRuntimeController(manifest, components, stdio=False, ws_debug_url="")
            to_plugin: asyncio.Queue[str] = asyncio.Queue()
            to_host: asyncio.Queue[str] = asyncio.Queue()
            plugin_side = PluginRuntimeHandler(_Pipe(to_plugin, to_host), controller.initialize)
            plugin_side.plugin_container = controller.plugin_container
            controller.handler = plugin_side
            self.handler = _HostHandler(_Pipe(to_host, to_plugin), file_storage_dir=str(self.storage))
            self._answer_query_apis()
            tasks = [asyncio.create_task(plugin_side.run()), asyncio.create_task(self.handler.run())]
            try:
                await self.handler.call_action(
                    RuntimeToPluginAction.INITIALIZE_PLUGIN,
                    {"plugin_settings": {"enabled": True, "priority": 0, "plugin_config": plugin_config}},
                    timeout=30,
                )
                self.components = components
                yield self
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            os.chdir(old_cwd)

    def _answer_query_apis(self) -> None:
        handler = self.handler

        @handler.action(PluginToRuntimeAction.GET_BOT_UUID)
        async def bot_uuid(data: dict[str, Any]) -> ActionResponse:
            return ActionResponse.success({"bot_uuid": self.bot_uuid})

        @handler.action(PluginToRuntimeAction.GET_QUERY_VARS)
        async def query_vars(data: dict[str, Any]) -> ActionResponse:
            self.query_refs.append(dict(data))
            return ActionResponse.success({"vars": dict(self.queries[data["query_id"]])})

        @handler.action(PluginToRuntimeAction.GET_QUERY_VAR)
        async def query_var(data: dict[str, Any]) -> ActionResponse:
            return ActionResponse.success({"value": self.queries[data["query_id"]].get(data["key"])})

        @handler.action(PluginToRuntimeAction.SET_QUERY_VAR)
        async def set_query_var(data: dict[str, Any]) -> ActionResponse:
            self.queries[data["query_id"]][data["key"]] = data["value"]
            return ActionResponse.success({})

    # --- what LangBot sends the plugin ------------------------------------------------------------

    async def prompt_preprocessing(self, query_id: int, session_name: str) -> dict[str, Any]:
        """Emit PromptPreProcessing for a message; the event as the plugin left it."""
        event = events.PromptPreProcessing(
            session_name=session_name,
            default_prompt=[Message(role="system", content="You are a helpful bot.")],
            prompt=[Message(role="user", content=self.queries[query_id]["user_message_text"])],
        )
        context = EventContext.from_event(event)
        context.query_id = query_id
        answer = await self.handler.call_action(
            RuntimeToPluginAction.EMIT_EVENT, {"event_context": context.model_dump()}, timeout=60
        )
        assert answer["emitted"] is True
        return dict(answer["event_context"]["event"])

    async def call_tool(
        self, name: str, parameters: dict[str, Any], query_id: int, session_name: str, query_uuid: str | None = None
    ) -> str:
        launcher_type, _, launcher_id = session_name.partition("_")
        answer = await self.handler.call_action(
            RuntimeToPluginAction.CALL_TOOL,
            {
                "tool_name": name,
                "tool_parameters": parameters,
                "session": {"launcher_type": launcher_type, "launcher_id": launcher_id, "bot_uuid": self.bot_uuid},
                "query_id": query_id,
                **({"query_uuid": query_uuid} if query_uuid else {}),
            },
            timeout=60,
        )
        return str(answer["tool_response"])

    async def command(self, text: str, query_id: int, session_name: str, privilege: int = 1) -> list[str]:
        """`!memory ...`: the texts the command answers. LangBot passes privilege 2 for a chat in its
        `admins` list, else 1."""
        params = text.split()[1:]
        launcher_type, _, launcher_id = session_name.partition("_")
        context = {
            "query_id": query_id,
            "session": {"launcher_type": launcher_type, "launcher_id": launcher_id, "bot_uuid": self.bot_uuid},
            "command_text": text.lstrip("!"),
            "full_command_text": text,
            "command": text.split()[0].lstrip("!"),
            "crt_command": text.split()[0].lstrip("!"),
            "params": params,
            "crt_params": params,
            "privilege": privilege,
        }
        answers = self.handler.call_action_generator(
            RuntimeToPluginAction.EXECUTE_COMMAND, {"command_context": context}, timeout=60
        )
        return [answer["command_response"]["text"] async for answer in answers]
