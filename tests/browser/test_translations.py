"""The Chinese and Spanish catalogs: complete, not fuzzy, compiled, and covering the source.

Runs without gettext installed (CI may lack it): the .po files are read here, the committed .mo
files through Python's own gettext module.
"""

from __future__ import annotations

import ast
import gettext
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import translation

ROOT = Path(settings.BASE_DIR)
LOCALES = {"zh_Hans": "zh-hans", "es": "es"}
CHINESE = re.compile(r"[\u4e00-\u9fff]")
PLACEHOLDER = re.compile(r"%(?:\((\w+)\))?[-#0 +]*\d*(?:\.\d+)?[sdfir%]")


@dataclass
class Entry:
    msgid: str = ""
    msgid_plural: str | None = None
    msgctxt: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    line: int = 0

    @property
    def key(self) -> str:
        return f"{self.msgctxt}\x04{self.msgid}" if self.msgctxt is not None else self.msgid


def read_po(path: Path) -> list[Entry]:
    """The entries of a .po file as gettext writes it (blank-line separated; the header first)."""
    entries: list[Entry] = []
    first = 1
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        entry, target = Entry(line=first), ("", 0)
        for number, raw in enumerate(block.splitlines(), start=first):
            line = raw.strip()
            if line.startswith("#,"):
                entry.flags.update(flag.strip() for flag in line[2:].split(","))
            elif line.startswith("#") or not line:
                continue
            elif match := re.match(r'^(msgctxt|msgid_plural|msgid|msgstr)(?:\[(\d+)\])? (".*")$', line):
                keyword, index, text = match.group(1), int(match.group(2) or 0), ast.literal_eval(match.group(3))
                target = (keyword, index)
                if keyword == "msgstr":
                    entry.msgstr[index] = text
                else:
                    setattr(entry, keyword, text)
            elif line.startswith('"') and target[0]:
                text = ast.literal_eval(line)
                if target[0] == "msgstr":
                    entry.msgstr[target[1]] += text
                else:
                    setattr(entry, target[0], getattr(entry, target[0]) + text)
            else:
                raise AssertionError(f"{path}:{number}: cannot read {raw!r}")
        first += len(block.splitlines()) + 1  # and the blank line between blocks
        if entry.msgstr or entry.msgid:
            entries.append(entry)
    return entries


def po_path(locale: str) -> Path:
    return ROOT / "locale" / locale / "LC_MESSAGES" / "django.po"


def messages(locale: str) -> list[Entry]:
    return [entry for entry in read_po(po_path(locale)) if entry.msgid != ""]


def placeholders(text: str) -> list[str]:
    return sorted(match.group(0) if not match.group(1) else match.group(1) for match in PLACEHOLDER.finditer(text))


@pytest.mark.parametrize("locale", LOCALES)
def test_it_translates_every_message_and_none_is_fuzzy(locale: str) -> None:
    entries = read_po(po_path(locale))
    header = entries[0]
    assert header.msgid == "" and "fuzzy" not in header.flags, "the header is fuzzy: msgfmt would drop it"
    assert f"Language: {locale}" in header.msgstr[0]
    body = entries[1:]
    assert len(body) > 100
    problems = []
    for entry in body:
        if "fuzzy" in entry.flags:
            problems.append(f"line {entry.line}: fuzzy: {entry.msgid!r}")
        if not entry.msgstr or any(not text.strip() for text in entry.msgstr.values()):
            problems.append(f"line {entry.line}: not translated: {entry.msgid!r}")
        if "python-format" in entry.flags:
            problems.extend(
                f"line {entry.line}: placeholders differ: {entry.msgid!r} -> {text!r}"
                for text in entry.msgstr.values()
                if placeholders(text) != placeholders(entry.msgid)
                and (entry.msgid_plural is None or placeholders(text) != placeholders(entry.msgid_plural))
            )
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("locale", LOCALES)
def test_it_ships_compiled_catalogs_that_match_the_po_files(locale: str) -> None:
    mo = po_path(locale).with_suffix(".mo")
    assert mo.exists(), f"{mo} is missing: run manage.py compilemessages and commit it"
    with mo.open("rb") as handle:
        # msgid -> msgstr, (msgid, n) for plurals; gettext has no public way to list a compiled catalog
        catalog = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]  # noqa: SLF001
    stale = []
    for entry in messages(locale):
        if entry.msgid_plural is None:
            if catalog.get(entry.key) != entry.msgstr.get(0):
                stale.append(entry.msgid)
        elif any(catalog.get((entry.key, n)) != text for n, text in entry.msgstr.items()):
            stale.append(entry.msgid)
    assert not stale, f"{mo} is older than its .po (run compilemessages): {stale[:5]}"


def test_it_serves_chinese_and_spanish_from_the_catalogs() -> None:
    with translation.override("zh-hans"):
        for msgid in ("Log in", "Log out", "Episodes", "Run health check", "Download JSON"):
            assert CHINESE.search(translation.gettext(msgid)), msgid
        plural = translation.ngettext("%(n)d episode archived.", "%(n)d episodes archived.", 3) % {"n": 3}
        assert CHINESE.search(plural) and "3" in plural
    with translation.override("es"):
        assert translation.gettext("Log in") == "Iniciar sesión"
        assert translation.gettext("Previous") == "Anterior"
        assert translation.ngettext("%(n)d episode archived.", "%(n)d episodes archived.", 1) % {"n": 1} == (
            "1 episodio archivado."
        )


TEMPLATE_TRANSLATE = re.compile(r"""{%\s*(?:translate|trans)\s+("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")
PYTHON_GETTEXT = re.compile(
    r"""\b(?:_|gettext|gettext_lazy|pgettext_lazy)\(\s*("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')\s*\)"""
)


def source_messages() -> set[str]:
    """Literal messages of {% translate %} in templates and _("...") in memconsole's code.

    A cheap stand-in for makemessages (which needs gettext): it catches a string added to the
    source but never extracted and translated. Block translations are left to makemessages.
    """
    found: set[str] = set()
    for template in (ROOT / "templates").rglob("*.html"):
        for match in TEMPLATE_TRANSLATE.finditer(template.read_text(encoding="utf-8")):
            found.add(match.group(1)[1:-1].replace("%", "%%"))
    for module in (ROOT / "memconsole").rglob("*.py"):
        if "migrations" in module.parts:
            continue
        for match in PYTHON_GETTEXT.finditer(module.read_text(encoding="utf-8")):
            found.add(ast.literal_eval(match.group(1)))
    return found


@pytest.mark.parametrize("locale", LOCALES)
def test_it_has_every_message_of_the_source_in_the_catalog(locale: str) -> None:
    known = {entry.msgid for entry in messages(locale)}
    missing = sorted(source_messages() - known)
    assert not missing, (
        "not in the catalog; run `manage.py makemessages -l zh_Hans -l es --ignore=.venv --ignore=bench "
        f"--ignore=tests`, translate, then compilemessages: {missing}"
    )
