"""Management commands show a progress bar (tqdm) when stderr is a terminal, plain lines when it
is not, always on stderr only (stdout keeps the result), and keep their exit codes."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memconsole.lib import vectors
from memconsole.memory.management.progress import StderrProgress

pytestmark = pytest.mark.django_db


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def langbot(tmp_path, n: int):
    path = tmp_path / "memory.json"
    episodes = [{"id": f"e{i}", "content": f"fact {i}", "status": "active"} for i in range(n)]
    path.write_text(json.dumps({"version": 1, "scope_key": "b:group_1", "episodes": episodes}))
    return str(path)


def test_it_draws_a_bar_on_a_terminal_and_keeps_stdout_for_the_result(tmp_path):
    out, err = io.StringIO(), Terminal()
    args = ("--format", "langbot", "--bot-uuid", "bot-t", "--isolation", "session")
    call_command("import_memory", langbot(tmp_path, 40), *args, stdout=out, stderr=err)
    bar = err.getvalue()
    assert "indexing" in bar and "40/40" in bar and "100%" in bar and "|" in bar  # tqdm's bar
    assert "imported 40 episodes" in out.getvalue() and "indexing" not in out.getvalue()


def test_it_writes_plain_lines_to_a_stderr_that_is_not_a_terminal(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    args = ("--format", "langbot", "--bot-uuid", "bot-t", "--isolation", "session")
    call_command("import_memory", langbot(tmp_path, 5), *args, stdout=out, stderr=err)
    assert "indexing: 5/5\n" in err.getvalue() and "%|" not in err.getvalue()
    assert "indexing" not in out.getvalue()


def test_it_keeps_the_exit_codes(keys, scope_with_episodes):
    vectors.delete(keys.user_key, [scope_with_episodes[0].episode_id])
    err = Terminal()
    with pytest.raises(CommandError) as drift:
        call_command("reindex", "--check", stdout=io.StringIO(), stderr=err)
    assert drift.value.returncode == 1 and "scan" in err.getvalue()
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command(
            "import_memory",
            "/nonexistent.json",
            "--format",
            "langbot",
            "--bot-uuid",
            "b",
            "--isolation",
            "session",
            stderr=Terminal(),
        )


def test_it_throttles_plain_lines_but_keeps_each_stage_end():
    err = io.StringIO()
    progress = StderrProgress(err, every=3600)
    for done in range(1, 101):
        progress("scan", done, 100)
    assert err.getvalue().splitlines() == ["scan: 1/100", "scan: 100/100"]
