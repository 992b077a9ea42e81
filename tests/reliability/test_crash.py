"""Crash safety: real processes killed with SIGKILL half way, then a restart that checks everything.

Each scenario copies a prepared installation (file SQLite + embedded Chroma folder), starts the
real thing in its own process group (`manage.py import_memory`, `manage.py reindex`,
`manage.py rotate_keys`, gunicorn serving the bot API), kills the whole group at a chosen point
(a progress line, or a number of acknowledged writes, plus a delay that varies), and then runs
scripts/check_site.py in a fresh process: `PRAGMA integrity_check`, the audit chain, the episode
counters, `reindex --check` after one `reindex`, and every acknowledged write. Key rotation
(tests/memory/test_rotation.py) is killed once there with a detailed census; here it is killed at
several points and checked like the others.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from .conftest import BOT, MANAGE, PYTHON, Server, Site, Victim, post_json, record_figure

pytestmark = pytest.mark.slow


def assert_recovered(result: dict, where: str) -> None:
    """What every restart must find, whatever the kill point."""
    assert result["integrity"] == ["ok"], where
    assert result["chain"]["ok"], (where, result["chain"])
    assert result["seq_contiguous"], where
    assert result["counters_wrong"] == [], (where, result["counters_wrong"])
    assert result["repair"]["ok"], (where, result["repair"])
    assert result["check_after"]["ok"], (where, result["check_after"])  # no drift after one repair run
    assert result["not_current"] == 0, where
    assert result["missing"] == [], (where, result["missing"])
    assert result["unreadable"] == [], (where, result["unreadable"])
    for step in result["recover"]:
        assert step["ok"], (where, step)


@dataclass(frozen=True)
class KillPoint:
    name: str
    marker: str  # kill once this text has appeared in the output
    delay: float = 0.0  # ... and this many seconds more
    indexed: int = 0  # ... and (when set) once this many episodes are marked vector_current

    def reached(self, text: str) -> bool:
        return self.marker in text


def indexed_rows(database: Path) -> int:
    """Episodes marked vector_current, read beside the running process (WAL: readers never block)."""
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return connection.execute("SELECT COUNT(*) FROM memory_episode WHERE vector_current").fetchone()[0]
    finally:
        connection.close()


def kill_at(args: list[str], env: dict[str, str], point: KillPoint, database: Path | None = None) -> Victim:
    victim = Victim.start(args, env)
    victim.wait_for(point.reached)
    if point.indexed:
        assert database is not None, f"{point.name} counts indexed rows: it needs the database"
        victim.wait_for(lambda _: indexed_rows(database) >= point.indexed)
    time.sleep(point.delay)
    killed = victim.kill()
    assert killed, f"{point.name}: the process had already ended; output:\n{victim.text()[-2000:]}"
    return victim


# --- bulk import --------------------------------------------------------------------------------


def langbot_file(path: Path, count: int) -> Path:
    episodes = [
        {
            "id": f"old-{i}",
            "content": f"imported fact {i} about topic {i % 50}",
            "tags": ["imported"],
            "importance": 1 + i % 5,
            "timestamp": 1_700_000_000 + i,
            "sender_id": f"u{i % 9}",
            "status": "archived" if i % 10 == 0 else "active",
        }
        for i in range(count)
    ]
    path.write_text(json.dumps({"version": 1, "scope_key": f"{BOT}:group_old", "episodes": episodes, "count": count}))
    return path


BIG, SMALL = 20_000, 600
IMPORT_KILL_POINTS = [
    # The big file's write transaction takes seconds: these land inside it (rolled back whole).
    ("big", KillPoint("import: file read, before the write transaction", "reading: ")),
    ("big", KillPoint("import: inside the write transaction (1st batch)", "writing: 500/")),
    ("big", KillPoint("import: inside the write transaction (21st batch)", "writing: 10500/", 0.01)),
    # The small file commits quickly: these land while its vectors are written (after the commit).
    ("small", KillPoint("import: committed, half indexed", "indexing: 256/")),
    ("small", KillPoint("import: committed, indexing starts", f"writing: {SMALL}/{SMALL}", 0.15)),
]


@pytest.fixture(scope="module")
def import_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("import-files")
    return {"big": langbot_file(folder / "big.json", BIG), "small": langbot_file(folder / "small.json", SMALL)}


@pytest.mark.parametrize(("size", "point"), IMPORT_KILL_POINTS, ids=[p.name for _, p in IMPORT_KILL_POINTS])
def test_it_survives_a_kill_during_a_bulk_import(template_site, import_files, tmp_path, size, point):
    site = template_site.copy_to(tmp_path / "site")
    count = BIG if size == "big" else SMALL
    args = [
        PYTHON,
        str(MANAGE),
        "import_memory",
        str(import_files[size]),
        "--format",
        "langbot",
        "--bot-uuid",
        BOT,
        "--session-name",
        "group_import",
        "--isolation",
        "session",
    ]

    victim = kill_at(args, site.env, point)
    result = site.check()

    assert_recovered(result, point.name)
    imported = result["by_source"].get("import", 0)
    assert imported in (0, count), f"{point.name}: a partial import of {imported} of {count} episodes"
    if imported:  # committed: one audit entry per scope says so, and the repair indexed the rest
        assert result["imports"] == [{"scope_key": f"{BOT}:group_import", "episodes": count}]
    else:
        assert result["imports"] == []
    outcome = "committed" if imported else "rolled back"
    record_figure(
        "crash",
        "kill_points",
        [
            {
                "scenario": "import",
                "point": point.name,
                "outcome": outcome,
                "drift_before_repair": result["drift_before"]["drift"],
            }
        ],
    )
    assert "Traceback" not in victim.text()


# --- reindex ------------------------------------------------------------------------------------

REINDEX_PLAIN = 768


@pytest.fixture(scope="module")
def reindex_site(template_site, tmp_path_factory) -> Site:
    site = template_site.copy_to(tmp_path_factory.mktemp("reindex") / "site")
    site.seed = site.script("seed.py", {"kind": "reindex", "plain": REINDEX_PLAIN})
    return site


# 768 rows to embed in three batches of 256 (one per scope); 9 rows start current.
REINDEX_KILL_POINTS = [
    KillPoint("reindex: scan done, repairs starting", "scan: 3/"),
    KillPoint("reindex: one batch written, embedding the second", "scan: 3/", indexed=9 + 256),
    KillPoint("reindex: two batches written, embedding the third", "scan: 3/", 0.05, indexed=9 + 512),
]


@pytest.mark.parametrize("point", REINDEX_KILL_POINTS, ids=[p.name for p in REINDEX_KILL_POINTS])
def test_it_survives_a_kill_during_a_reindex(reindex_site, tmp_path, point):
    site = reindex_site.copy_to(tmp_path / "site")

    kill_at([PYTHON, str(MANAGE), "reindex"], site.env, point, site.database)
    result = site.check()

    assert_recovered(result, point.name)
    assert result["episodes"] == reindex_site.seed["episodes"]  # nothing lost, nothing added
    assert result["drift_before"]["drift"] > 0  # the kill left work, which one run finished
    record_figure(
        "crash",
        "kill_points",
        [
            {
                "scenario": "reindex",
                "point": point.name,
                "outcome": "resumed",
                "drift_before_repair": result["drift_before"]["drift"],
            }
        ],
    )


# --- key rotation -------------------------------------------------------------------------------

OLD_KEY, NEW_KEY = Fernet.generate_key().decode(), Fernet.generate_key().decode()
ROTATION_EPISODES = 1000


@pytest.fixture(scope="module")
def rotation_site(template_site, tmp_path_factory) -> Site:
    site = template_site.copy_to(tmp_path_factory.mktemp("rotation") / "site", MEMCONSOLE_FERNET_KEYS=OLD_KEY)
    site.seed = site.script("seed.py", {"kind": "rotation", "episodes": ROTATION_EPISODES, "plain": 40})
    return site


ROTATION_KILL_POINTS = [
    KillPoint("rotate_keys: episodes, early", "episodes: 100/"),
    KillPoint("rotate_keys: episodes, the plain rows and their vectors", f"episodes: {ROTATION_EPISODES}/", 0.02),
    KillPoint("rotate_keys: audit entries", "profile_versions: "),
]


@pytest.mark.parametrize("point", ROTATION_KILL_POINTS, ids=[p.name for p in ROTATION_KILL_POINTS])
def test_it_survives_a_kill_during_a_key_rotation(rotation_site, tmp_path, point):
    site = rotation_site.copy_to(tmp_path / "site", MEMCONSOLE_FERNET_KEYS=f"{NEW_KEY},{OLD_KEY}")

    kill_at([PYTHON, str(MANAGE), "rotate_keys", "--batch", "20"], site.env, point)
    result = site.check(recover=[["rotate_keys", "--batch", "500"]])  # the operator runs it again

    assert_recovered(result, point.name)
    assert result["episodes"] == rotation_site.seed["episodes"]
    assert result["not_under_newest_key"] == 0  # every sealed row now opens with the new key alone
    assert result["operations"]["key_rotation_started"] == 2 and result["operations"]["key_rotation"] == 1
    record_figure(
        "crash",
        "kill_points",
        [
            {
                "scenario": "rotate_keys",
                "point": point.name,
                "outcome": "resumed",
                "drift_before_repair": result["drift_before"]["drift"],
            }
        ],
    )


# --- a burst of API remembers -------------------------------------------------------------------


class Burst:
    """Threads posting /api/v1/remember until the server dies; keeps every acknowledged id."""

    def __init__(self, server: Server, token: str, threads: int = 6) -> None:
        self.server, self.token = server, token
        self.acknowledged: list[str] = []
        self.refused: dict[int, int] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(threads)]

    def _run(self, n: int) -> None:
        number = 0
        while not self.stop.is_set():
            number += 1
            body = {
                "bot_uuid": BOT,
                "session_name": f"group_api_{n % 2}",
                "isolation": "bot" if n % 3 == 0 else "session",
                "content": f"burst {n}-{number}: the deploy of service {number} went fine",
                "sender_id": f"u{n}",
            }
            try:
                status, answer = post_json(f"{self.server.url}/api/v1/remember", body, self.token, timeout=60)
            except OSError:
                return  # the server is gone
            with self.lock:
                if status == 201:
                    self.acknowledged.append(answer["episode_id"])
                else:
                    self.refused[status] = self.refused.get(status, 0) + 1

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def wait_for_acks(self, count: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.acknowledged) >= count:
                    return
            time.sleep(0.01)
        pytest.fail(f"only {len(self.acknowledged)} acknowledged writes in {timeout} s (refused: {self.refused})")

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=90)


API_KILL_POINTS = [(3, 0.0), (20, 0.05), (45, 0.3)]  # (acknowledged writes, then seconds)


@pytest.mark.parametrize(("acks", "delay"), API_KILL_POINTS, ids=[f"after {a} acks +{d}s" for a, d in API_KILL_POINTS])
def test_it_keeps_every_acknowledged_api_write_through_a_server_kill(template_site, tmp_path, acks, delay):
    site = template_site.copy_to(tmp_path / "site")
    server = Server.start(site.env)
    burst = Burst(server, template_site.tokens[BOT])
    try:
        burst.start()
        burst.wait_for_acks(acks)
        time.sleep(delay)
        killed = server.kill()  # master and worker at once: the whole process group
    finally:
        server.kill()
        burst.join()
    assert killed
    acknowledged = list(burst.acknowledged)

    result = site.check(acknowledged=acknowledged, list_episodes=True)

    assert_recovered(result, f"API kill after {acks} acks")
    assert len(set(acknowledged)) == len(acknowledged)
    # Every stored episode has its audit entry and the other way round; requests in flight at the
    # kill may be stored without having been acknowledged, never the reverse.
    assert result["episode_ids"] == result["remember_targets"]
    assert set(acknowledged) <= set(result["episode_ids"])
    in_flight = len(result["episode_ids"]) - len(acknowledged)
    assert 0 <= in_flight <= len(burst.threads)
    record_figure(
        "crash",
        "kill_points",
        [
            {
                "scenario": "api_burst",
                "point": f"after {acks} acks +{delay}s",
                "outcome": f"{len(acknowledged)} acknowledged, {in_flight} more stored",
                "drift_before_repair": result["drift_before"]["drift"],
            }
        ],
    )
    record_figure("crash", "api_acknowledged_writes_checked", len(acknowledged))

    if acks == API_KILL_POINTS[-1][0]:  # the restarted server serves what it acknowledged before
        server = Server.start(site.env)
        try:
            status, answer = post_json(
                f"{server.url}/api/v1/recall",
                {
                    "bot_uuid": BOT,
                    "session_name": "group_api_1",
                    "query": "the deploy of service 1 went fine",
                    "statuses": ["active"],
                    "top_k": 5,
                },
                template_site.tokens[BOT],
            )
        finally:
            server.kill()
        assert status == 200 and answer["episodes"], answer
