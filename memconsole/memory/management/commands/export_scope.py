from __future__ import annotations

import getpass
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory import exports
from memconsole.memory.audit import Actor
from memconsole.memory.errors import MemoryError_, ValidationError
from memconsole.memory.models import STATUSES, Scope
from memconsole.memory.scopes import keys_of


class Command(BaseCommand):
    help = (
        "Export one scope (profiles, episodes and optionally its audit log) as one JSON document "
        "(LangBot-compatible envelopes). Content is decrypted: keep the file safe. The export is audited."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("scope_key", help="the scope's key, e.g. '<bot_uuid>:group_123'")
        parser.add_argument("-o", "--output", help="write to this file (created 0600) instead of standard output")
        parser.add_argument(
            "--statuses",
            nargs="+",
            choices=STATUSES,
            metavar="STATUS",
            help=f"only these statuses ({', '.join(STATUSES)}); default all",
        )
        parser.add_argument("--audit", action="store_true", help="include the scope's audit log")
        parser.add_argument(
            "--isolation",
            choices=["session", "bot"],
            help="which of the scope's isolation modes, when it was seen with both",
        )

    def handle(
        self,
        *args: Any,
        scope_key: str,
        output: str | None,
        statuses: list[str] | None,
        audit: bool,
        isolation: str | None,
        **options: Any,
    ) -> None:
        scopes = Scope.objects.filter(scope_key=scope_key)
        if isolation:
            scopes = scopes.filter(isolation=isolation)
        found = list(scopes[:3])
        if not found:
            raise CommandError(f"no scope {scope_key!r}{f' with {isolation} isolation' if isolation else ''} is known")
        if len(found) > 1:
            raise CommandError(f"scope {scope_key!r} exists with session and bot isolation: pass --isolation")
        try:
            keys = keys_of(found[0])
            stream = exports.stream_scope_export(
                keys,
                Actor.system(f"manage.py export_scope ({getpass.getuser()})"),
                statuses=statuses,
                include_audit=audit,
            )
        except ValidationError as exc:
            raise CommandError(exc.message) from None
        except MemoryError_ as exc:
            raise CommandError(str(exc)) from None
        try:
            written = self._write(stream, output)
        except MemoryError_ as exc:  # found while streaming: a row no configured key opens, the index down
            raise CommandError(f"the export stopped: {exc}") from None
        counts = stream.counts
        where = output or "standard output"
        self.stderr.write(
            f"Exported {keys.scope_key} ({keys.isolation}) to {where}: {counts['episodes']} episodes, "
            f"{counts['profiles']} profiles"
            + (f", {counts['audit_entries']} audit entries" if audit else "")
            + f", {written:,} bytes."
        )

    def _write(self, stream: exports.ExportStream, output: str | None) -> int:
        try:
            if output is None:
                return self._copy(stream, sys.stdout)
            return self._write_file(stream, output)
        except BrokenPipeError:
            # Python flushes standard output at exit: into /dev/null, not into the closed pipe again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise CommandError("the reader of the export closed it before the end; the export is incomplete") from None
        except OSError as exc:
            raise CommandError(f"cannot write {output or 'standard output'}: {exc.strerror or exc}") from None

    def _write_file(self, stream: exports.ExportStream, output: str) -> int:
        target = Path(output).resolve()  # a symlink's target is written, the link stays
        if target.is_dir():
            raise CommandError(f"{output} is a directory")
        if not target.parent.is_dir():
            raise CommandError(f"the folder of {output} does not exist")
        if target.exists() and not target.is_file():  # a FIFO or a device (/dev/stdout): written to as it is
            with target.open("w", encoding="utf-8") as out:
                return self._copy(stream, out)
        # Written to a private temporary file beside the target, then renamed: no half-written export.
        handle, temp = tempfile.mkstemp(prefix=".export-", dir=target.parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                written = self._copy(stream, out, progress=True)
            Path(temp).replace(target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        return written

    def _copy(self, stream: exports.ExportStream, out: Any, progress: bool = False) -> int:
        written = reported = 0
        for chunk in stream:
            out.write(chunk)
            written += len(chunk.encode("utf-8"))
            if progress and written - reported >= 1 << 20:
                reported = written
                self.stderr.write(f"\rexporting: {written / (1 << 20):.1f} MiB", ending="")
        out.flush()
        if reported:
            self.stderr.write("")
        return written
