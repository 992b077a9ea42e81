"""Queue one background job the way the console does (`memconsole.jobs.queue.submit`) and print
its id as JSON. Payload (stdin JSON): {"kind", "scope", "bot_uuid", "params", "file"?}."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memconsole.settings")

import django

django.setup()

from memconsole.jobs.queue import submit  # noqa: E402
from memconsole.memory.audit import Actor  # noqa: E402

payload = json.load(sys.stdin)
data = Path(payload["file"]).read_bytes() if payload.get("file") else None
job = submit(
    payload["kind"],
    scope=payload["scope"],
    bot_uuid=payload["bot_uuid"],
    actor=Actor.system("tests/jobs"),
    params=payload["params"],
    data=data,
    file_name="upload.json" if data is not None else "",
)
print(json.dumps({"job_id": str(job.pk)}))
