"""Python clients for the memconsole bot API (docs/api.md in the memconsole repository).

    from memconsole_client import MemconsoleError, MemoryClient

    with MemoryClient("https://memory.example.org", token, bot_uuid="bot-1", session_name="group_123") as memory:
        memory.remember("Alice lives in Paris", sender_id="u1", sender_name="Alice", tags=["fact"])
        hits = memory.recall("where does Alice live?")
        injection = memory.inject("where does Alice live?", sender_id="u1", sender_name="Alice")

`AsyncMemoryClient` has the same calls, awaitable.
"""

from __future__ import annotations

from .async_client import AsyncMemoryClient
from .client import MemoryClient
from .errors import MemconsoleError
from .transport import Retry

__all__ = ["AsyncMemoryClient", "MemconsoleError", "MemoryClient", "Retry"]
__version__ = "0.1.0"
