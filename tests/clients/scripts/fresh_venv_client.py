"""Run in a fresh virtual environment with only the installed client (test_packaging.py): remember
with the sync client, recall with the async one.

Arguments: the server's URL and a bot token for bot-a. Prints {"where", "stored", "hits"}.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from memconsole_client import AsyncMemoryClient, MemoryClient
from memconsole_client import __file__ as where


async def recall(url: str, secret: str) -> Any:
    async with AsyncMemoryClient(url, secret, "bot-a", "group_1") as memory:
        return await memory.recall("Where does Alice live?")


def main() -> None:
    url, secret = sys.argv[1:]
    with MemoryClient(url, secret, "bot-a", "group_1") as memory:
        stored = memory.remember("Alice lives in Paris", sender_id="u1")
    print(json.dumps({"where": where, "stored": stored, "hits": anyio.run(recall, url, secret)}))


if __name__ == "__main__":
    main()
