"""Concurrency: 8 processes write to the same scope at once, on SQLite and on PostgreSQL.

Each writer (scripts/writer.py) is its own process with its own database connection, released at
the same instant by a "go" file once all are warmed up, and mixes remember, archive, restore and
delete of its own episodes with updates of one shared speaker profile and the session profile.
The embedded Chroma index is single-process, so writers use a Chroma server (tests/chroma_server.py);
gunicorn refusing several workers with the embedded index is proven in tests/deploy/test_gunicorn.py.

Then: every acknowledged write is present with the status its writer last set (deleted ones are
gone, nothing else exists), ids are unique, EpisodeCounts equal the rows, the audit log is
unforked chains (one per space) with contiguous seq, each profile's versions are 1..V with every acknowledged update
holding its own version in chain order, and no writer's last trait was lost.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import PYTHON, REPO, SCRIPTS, Site, record_figure

pytestmark = [pytest.mark.slow, pytest.mark.chroma_server]

WRITERS = 8
OPERATIONS = 24
SESSION = "group_shared"
SPEAKER = "shared-speaker"


def run_writers(site: Site, bot: str, isolation: str, folder: Path) -> tuple[list[dict], float]:
    folder.mkdir(parents=True, exist_ok=True)
    go = folder / "go"
    processes = []
    for index in range(WRITERS):
        job = {
            "index": index,
            "bot_uuid": bot,
            "session_name": SESSION,
            "isolation": isolation,
            "operations": OPERATIONS,
            "seed": index * 7919,
            "ready": str(folder / f"ready-{index}"),
            "go": str(go),
        }
        out = (folder / f"writer-{index}.out").open("w")
        err = (folder / f"writer-{index}.err").open("w")
        process = subprocess.Popen(
            [PYTHON, str(SCRIPTS / "writer.py")],
            cwd=REPO,
            env=site.env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            text=True,
        )
        assert process.stdin is not None
        process.stdin.write(json.dumps(job))
        process.stdin.close()
        processes.append((process, out, err))
    try:
        deadline = time.monotonic() + 300
        while not all((folder / f"ready-{i}").exists() for i in range(WRITERS)):
            dead = [p for p, _, _ in processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                pytest.fail(f"a writer died or hung while starting: {(folder / 'writer-0.err').read_text()[-3000:]}")
            time.sleep(0.05)
        started = time.monotonic()
        go.touch()
        for process, _, _ in processes:
            process.wait(timeout=600)
        elapsed = time.monotonic() - started
    finally:
        for process, out, err in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
            out.close()
            err.close()
    results = []
    for index, (process, _, _) in enumerate(processes):
        output = (folder / f"writer-{index}.out").read_text().strip()
        assert process.returncode == 0 and output, (folder / f"writer-{index}.err").read_text()[-3000:]
        results.append(json.loads(output.splitlines()[-1]))
    return results, elapsed


def assert_nothing_lost(results: list[dict], state: dict) -> dict:
    errors = [error for r in results for error in r["errors"]]
    assert errors == [], errors[:3]
    created = [i for r in results for i in r["created"]]
    assert len(created) == len(set(created)), "two writers were given the same episode id"
    assert state["duplicate_ids"] == []
    expected = {i: s for r in results for i, s in r["status"].items()}
    deleted = {i for r in results for i in r["deleted"]}
    assert not deleted & set(state["episodes"]), "a deleted episode came back"
    assert state["episodes"] == expected  # every acknowledged write, with its writer's last status, and nothing else
    assert state["counters"] == state["real_counts"]  # EpisodeCounts lost no increment
    totals = {
        name: sum(r["counts"].get(name, 0) for r in results) for name in ("remember", "archive", "restore", "delete")
    }
    for name, total in totals.items():
        assert state["operations"].get(name, 0) == total, (name, state["operations"])
    assert state["chain"]["ok"], state["chain"]
    assert state["seq_contiguous"]  # every chain: no fork, no gap, no duplicate seq
    for kind, acks_name in (("speaker", "speaker_acks"), ("session", "session_acks")):
        acks = sorted(v for r in results for v in r[acks_name])
        profile = state[kind]
        assert profile["version"] == len(acks), kind
        assert profile["versions"] == list(range(1, len(acks) + 1)), kind  # no gap
        assert acks == profile["versions"], kind  # every acknowledged update has a version of its own
        assert profile["audit_versions"] == profile["versions"], kind  # strictly increasing along the chain
    last_traits = {r["last_trait"] for r in results if r["last_trait"]}
    assert set(state["speaker"]["traits"]) == last_traits  # no writer's update was overwritten
    assert state["not_indexed"] == []
    assert state["vectors"] == sorted(state["episodes"])  # the Chroma server holds exactly the rows
    return totals


def concurrent_run(site: Site, tmp_path: Path, label: str, isolation: str) -> None:
    bot = f"conc-{label}-{secrets.token_hex(3)}"  # its own collections on the shared Chroma server
    results, elapsed = run_writers(site, bot, isolation, tmp_path / label)
    state = site.script(
        "scope_state.py", {"bot_uuid": bot, "session_name": SESSION, "isolation": isolation, "speaker": SPEAKER}
    )
    totals = assert_nothing_lost(results, state)
    profile_updates = len(state["speaker"]["versions"]) + len(state["session"]["versions"])
    record_figure(
        "concurrency",
        label,
        {
            "writers": WRITERS,
            "isolation": isolation,
            "operations": WRITERS * OPERATIONS,
            **totals,
            "profile_updates": profile_updates,
            "seconds": round(elapsed, 1),
            "audit_entries_checked": state["chain"]["checked"],
        },
    )


def test_it_loses_nothing_with_8_writers_on_sqlite(template_site, chroma_server, tmp_path):
    host, port = chroma_server
    site = template_site.copy_to(tmp_path / "site", CHROMA_HOST=host, CHROMA_PORT=port)
    concurrent_run(site, tmp_path, "sqlite", "session")


def test_it_loses_nothing_with_8_writers_on_postgresql(reliability_postgres_url, chroma_server, tmp_path):
    host, port = chroma_server
    site = Site.create(tmp_path / "site", DATABASE_URL=reliability_postgres_url, CHROMA_HOST=host, CHROMA_PORT=port)
    site.manage("migrate", "--noinput", "-v", "0")
    concurrent_run(site, tmp_path, "postgresql", "bot")
