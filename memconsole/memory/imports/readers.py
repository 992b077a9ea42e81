"""Reading import files safely: the size limit, JSON documents and SQLite databases.

Files over `MEMCONSOLE_IMPORT_MAX_BYTES` are refused before they are read; JSON nested deeper
than Python's recursion limit, NaN/Infinity literals and over-long numbers are refused; a SQLite
file is opened read-only, checked (`quick_check`), and only ordinary tables are read (a view in
a hostile file would run SQL of the file's choosing).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_noop

from ..wording import Said, said
from .fields import fail
from .report import ImportFileError

SQLITE_HEADER = b"SQLite format 3\x00"
FETCH_BATCH = 1000


EMPTY = gettext_noop("%(place)sthe file is empty")
UNREADABLE_DB = gettext_noop("the database cannot be read (damaged or truncated?): %(error)s")


def too_large(size: int, limit: int) -> Said:
    return said(
        gettext_noop("the file is %(size)s bytes; the limit is %(limit)s (MEMCONSOLE_IMPORT_MAX_BYTES)"),
        size=f"{size:,}",
        limit=f"{limit:,}",
    )


def max_import_bytes() -> int:
    return settings.MEMCONSOLE_IMPORT_MAX_BYTES


def check_size(path: Path) -> int:
    """The file's size; `ImportFileError` when it cannot be read, is empty or is over the limit."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ImportFileError(said(gettext_noop("cannot read the file: %(error)s"), error=exc.strerror)) from None
    if path.is_dir():
        raise ImportFileError(said(gettext_noop("%(path)s is a folder, not a file"), path=str(path)))
    if size == 0:
        raise ImportFileError(said(EMPTY, place=""))
    if size > max_import_bytes():
        raise ImportFileError(too_large(size, max_import_bytes()))
    return size


def reject_constant(name: str) -> Any:
    """`json.loads(parse_constant=...)`: NaN, Infinity and -Infinity are not JSON data we take."""
    raise ValueError(f"{name} is not allowed")


def load_json(path: Path, fmt: str) -> Any:
    """The JSON document in `path` (UTF-8, a BOM allowed); errors say the line and column."""
    check_size(path)
    return parse_json(path.read_bytes(), fmt)


def parse_json(raw: bytes, fmt: str, where: str = "") -> Any:
    """The JSON document in `raw` (a file, or a member of an archive named by `where`), read as
    `load_json` reads a file."""
    place = f"{where}: " if where else ""
    if raw.startswith(SQLITE_HEADER):
        raise ImportFileError(
            said(
                gettext_noop(
                    "this is a SQLite database, not a %(format)s JSON export (use the jw-agents or bot-memory format)"
                ),
                format=fmt,
            )
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ImportFileError(
            said(
                gettext_noop("%(place)sline %(line)s: the file is not UTF-8 text (byte %(byte)s)"),
                place=place,
                line=line,
                byte=exc.start,
            )
        ) from None
    if not text.strip():
        raise ImportFileError(said(EMPTY, place=place))
    del raw
    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        at_end = exc.pos >= len(text.rstrip())
        what = gettext_noop("the file is truncated") if at_end else gettext_noop("the file is not valid JSON")
        raise ImportFileError(
            said(
                gettext_noop("%(place)sline %(line)s, column %(column)s: %(what)s (%(error)s)"),
                place=place,
                line=exc.lineno,
                column=exc.colno,
                what=said(what),
                error=exc.msg,
            )
        ) from None
    except RecursionError:
        # json's C parser guards its recursion: a bracket bomb stops here, at Python's recursion limit,
        # instead of exhausting the stack. Nothing memconsole reads nests more than a few levels.
        raise ImportFileError(said(gettext_noop("%(place)sthe JSON is nested too deeply"), place=place)) from None
    except ValueError as exc:  # NaN/Infinity, or an integer with too many digits
        # Python's hint for the latter ("use sys.set_int_max_str_digits()") is not the reader's to follow.
        error = "a number has too many digits" if "int_max_str_digits" in str(exc) else str(exc)
        raise ImportFileError(
            said(
                gettext_noop("%(place)sthe file holds a value that is not allowed: %(error)s"),
                place=place,
                error=error,
            )
        ) from None


def open_sqlite(path: Path, fmt: str, tables: dict[str, set[str]]) -> sqlite3.Connection:
    """A read-only connection to the SQLite file `path`, once `tables` (name: columns) are there.

    Values come back as bytes (decode them with `text_of`), so bad UTF-8 is an error with a place.
    """
    check_size(path)
    with path.open("rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise ImportFileError(
            said(gettext_noop("not a %(format)s memory.db: the file is not a SQLite database"), format=fmt)
        )
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        connection.text_factory = bytes
        check = connection.execute("PRAGMA quick_check").fetchone()[0]
        if check != b"ok":
            raise ImportFileError(
                said(
                    gettext_noop("the database is damaged or truncated (%(error)s)"),
                    error=check.decode(errors="replace")[:200],
                )
            )
        for table, columns in tables.items():
            # Only an ordinary table: a view (or virtual table) in a hostile file runs SQL of the
            # file's choosing on every read, e.g. an endless recursive query (a CPU/memory bomb).
            kind = connection.execute(
                "SELECT type, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE", (table,)
            ).fetchone()
            if kind is not None and (
                kind[0] != b"table" or (kind[1] or b"").lstrip().upper().startswith(b"CREATE VIRTUAL")
            ):
                raise ImportFileError(
                    said(
                        gettext_noop("not a %(format)s memory.db: '%(table)s' is not an ordinary table"),
                        format=fmt,
                        table=table,
                    )
                )
            found = {row[1].decode() for row in connection.execute(f"PRAGMA table_info({table})")}
            if not found:
                raise ImportFileError(
                    said(
                        gettext_noop("not a %(format)s memory.db: there is no '%(table)s' table"),
                        format=fmt,
                        table=table,
                    )
                )
            missing = columns - found
            if missing:
                raise ImportFileError(
                    said(
                        gettext_noop("not a %(format)s memory.db: table '%(table)s' lacks %(columns)s"),
                        format=fmt,
                        table=table,
                        columns=", ".join(sorted(missing)),
                    )
                )
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(said(UNREADABLE_DB, error=str(exc))) from None
    return connection


def rows(connection: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The rows of a query, fetched in batches; a damaged page is an `ImportFileError`."""
    try:
        cursor = connection.execute(sql, params)
        while batch := cursor.fetchmany(FETCH_BATCH):
            yield from batch
    except sqlite3.DatabaseError as exc:
        raise ImportFileError(said(UNREADABLE_DB, error=str(exc))) from None


def text_of(value: Any, where: str, name: str) -> str | None:
    """A SQLite value as text (bytes decoded as UTF-8), None for NULL."""
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise fail(where, name, gettext_noop("is not UTF-8 text")) from None
    return str(value)
