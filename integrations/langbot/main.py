"""memconsole as LangBot's long-term memory: the plugin object the runtime loads (manifest.yaml)."""

from __future__ import annotations

import logging

from langbot_plugin.api.definition.plugin import BasePlugin

logger = logging.getLogger("memconsole.langbot")


class MemconsoleMemoryPlugin(BasePlugin):
    """Holds no state of its own: settings are read per invocation (`get_config()`), since one
    object graph may serve several installations, and every call opens its own client."""

    async def initialize(self) -> None:
        logger.info("memconsole memory plugin initialised")
