"""docs/operations.md stays true: every environment variable memconsole reads is documented, every
command it tells operators to run exists, and the sections operators look for are there."""

from __future__ import annotations

import re

from django.apps import apps
from django.core.management import get_commands
from django.db import models

from .conftest import REPO

DOCS = REPO / "docs" / "operations.md"
# env("X"), envbool("X", ...), envint(...), envlist(...) in settings.py; os.environ.get("X") / ["X"] anywhere.
_READ = re.compile(
    r"""\b(?:env|envbool|envint|envlist|_whole_number|os\.environ\.get|os\.getenv)\(\s*["']([A-Z][A-Z0-9_]*)["']"""
)
_INDEXED = re.compile(r"""os\.environ\[\s*["']([A-Z][A-Z0-9_]*)["']\s*\]""")
NOT_SETTINGS = {"DJANGO_SETTINGS_MODULE"}


def configuration_names() -> set[str]:
    """Every environment variable memconsole's code reads."""
    names: set[str] = set()
    for path in (REPO / "memconsole").rglob("*.py"):
        if "migrations" in path.parts:
            continue
        text = path.read_text()
        names |= set(_READ.findall(text)) | set(_INDEXED.findall(text))
    # NAME_FILE variants (secrets from files) are documented once, as a convention.
    return {name for name in names - NOT_SETTINGS if not name.endswith("_FILE")}


def _docs() -> str:
    return DOCS.read_text()


def test_it_documents_every_setting_with_a_default_and_an_example():
    docs = _docs()
    rows = {}
    for line in docs.splitlines():
        match = re.match(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|(.*)$", line)
        if match:
            rows[match[1]] = [cell.strip() for cell in match[2].split("|")]
    missing = configuration_names() - set(rows)
    assert not missing, f"docs/operations.md has no configuration row for {sorted(missing)}"
    for name in configuration_names():
        cells = rows[name]
        assert len(cells) >= 3 and cells[0] and cells[1], f"{name}: the row needs a default and an example"
    assert "NAME_FILE" in docs  # the secrets-from-files convention of settings.env()


def test_it_covers_what_operators_need():
    headings = {line.lstrip("#").strip().lower() for line in _docs().splitlines() if line.startswith("#")}
    for needed in (
        "configuration",
        "docker",
        "docker compose",
        "backup and restore",
        "key rotation",
        "upgrading",
        "monitoring",
        "sizing",
        "threat model",
    ):
        assert any(heading.startswith(needed) for heading in headings), f"no section on {needed}"


def test_it_only_tells_operators_to_run_commands_that_exist():
    mentioned = set(re.findall(r"manage\.py ([a-z_]+)", _docs()))
    unknown = mentioned - set(get_commands())
    assert not unknown, f"docs/operations.md mentions commands that do not exist: {sorted(unknown)}"


def test_it_names_the_health_exit_codes_and_probes():
    docs = _docs()
    for text in ("memory_health", "/healthz", "/readyz", "0", "1", "2"):
        assert text in docs
    assert re.search(r"exit code|exit status", docs, re.IGNORECASE)


def _stored_in_clear_table() -> dict[str, tuple[set[str], set[str]]]:
    """The threat model's table: per model, the columns it names as sealed and as in clear."""
    threat_model = _docs().split("## Threat model", 1)[1]
    table = {}
    for line in threat_model.splitlines():
        match = re.match(r"^\s*\|\s*`(\w+)`\s*\|(.*)\|(.*)\|\s*$", line)
        if match:
            table[match[1]] = (set(re.findall(r"`(\w+)`", match[2])), set(re.findall(r"`(\w+)`", match[3])))
    return table


def test_it_names_every_text_column_of_memory_as_sealed_or_in_clear():
    """Issue 15: the threat model says which stored text is readable in a stolen backup (query ids,
    token names, speaker ids ...); a new text column of the memory app must be added to its table."""
    table = _stored_in_clear_table()
    missing = []
    for model in apps.get_app_config("memory").get_models():
        sealed, clear = table.get(model.__name__, (set(), set()))
        for field in model._meta.concrete_fields:  # noqa: SLF001  Model._meta is Django's documented model API
            if isinstance(field, models.CharField | models.TextField | models.JSONField):
                column = field.db_column or field.name
                is_sealed = column in {"content", "payload", "text"} and hasattr(model, f"set_{column}")
                if column not in (sealed if is_sealed else clear):
                    missing.append(f"{model.__name__}.{column} ({'sealed' if is_sealed else 'in clear'})")
    assert not missing, f"docs/operations.md's threat model does not list: {missing}"
    for name in ("query_id", "speaker_id"):
        assert name in table["InjectionSnapshot"][1]
    assert "name" in table["BotToken"][1]
