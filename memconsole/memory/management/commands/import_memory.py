from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory import imports
from memconsole.memory.audit import Actor
from memconsole.memory.errors import MemoryError_, ValidationError
from memconsole.memory.management.progress import StderrProgress, stderr_of


class Command(BaseCommand):
    help = (
        "Import memory from a file into the scope(s) of one bot, all or nothing. Formats: memconsole (our export), "
        "langbot (LongTermMemory episodes/profiles export), jw-agents (memory.db, one scope per session_id), "
        "bot-memory (memory.db facts into --session-name; --include-messages adds each room's messages), "
        "mem0 (an OpenMemory backup zip or mem0's get_all JSON; paused memories arrive archived), "
        "letta (a Letta agent file: core memory blocks into the session profile's notes; or an archival export). "
        "Episodes deleted in the source are skipped; details adjusted on the way in (importance clamped, an unknown "
        "status read as active, an empty timestamp, profile items over the limits) are listed as warnings. "
        "--dry-run reports what would be imported (per scope, per status, conflicts) and writes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the file to import")
        parser.add_argument("--format", required=True, choices=imports.FORMATS, dest="fmt", help="the file's format")
        parser.add_argument("--bot-uuid", required=True, help="the target bot (bot-memory: also the agent_id imported)")
        parser.add_argument(
            "--session-name",
            help="the target session: required for bot-memory facts and letta, and for mem0 memories without a run_id; "
            "for memconsole and langbot it replaces the file's own session; "
            "ignored for jw-agents (each session_id is a session)",
        )
        parser.add_argument(
            "--isolation", required=True, choices=["session", "bot"], help="the target scopes' isolation"
        )
        parser.add_argument("--dry-run", action="store_true", help="check the file and report; write nothing")
        parser.add_argument(
            "--fernet-key", help="jw-agents: the Fernet key of encrypted rows (default: $JW_MEMORY_KEY)"
        )
        parser.add_argument("--include-messages", action="store_true", help="bot-memory: also import messages")

    def handle(
        self,
        *args: Any,
        file: str,
        fmt: str,
        bot_uuid: str,
        session_name: str | None,
        isolation: str,
        dry_run: bool,
        fernet_key: str | None,
        include_messages: bool,
        **options: Any,
    ) -> None:
        try:
            with StderrProgress(stderr_of(self)) as progress:
                report = imports.import_file(
                    file,
                    fmt,
                    bot_uuid=bot_uuid,
                    session_name=session_name,
                    isolation=isolation,
                    actor=Actor.system(f"manage.py import_memory ({getpass.getuser()})"),
                    dry_run=dry_run,
                    fernet_key=fernet_key,
                    include_messages=include_messages,
                    progress=progress,
                )
        except ValidationError as exc:
            said = (
                exc.message if exc.message.endswith("nothing was imported") else f"{exc.message}; nothing was imported"
            )
            raise CommandError(f"{file}: {said}") from None
        except MemoryError_ as exc:
            raise CommandError(f"{file}: {exc}; nothing was imported") from None
        for scope in report.scopes.values():
            statuses = (
                ", ".join(f"{name} {count}" for name, count in sorted(scope["statuses"].items())) or "no episodes"
            )
            self.stdout.write(
                f"  {scope['scope_key']} ({scope['isolation']}): {scope['episodes']} episodes ({statuses}), "
                f"{scope['profiles']} profiles, {scope['conflicts']} conflicts"
            )
        for conflict in report.conflicts:
            self.stdout.write(f"  conflict: {conflict['where']}: {conflict['reason']}")
        if report.conflict_count > len(report.conflicts):
            self.stdout.write(f"  ... and {report.conflict_count - len(report.conflicts)} more conflicts")
        for skipped in report.skipped:
            self.stdout.write(f"  skipped (deleted in the source): {_place(skipped['where'], skipped['id'])}")
        if report.skipped_deleted > len(report.skipped):
            self.stdout.write(f"  ... and {report.skipped_deleted - len(report.skipped)} more deleted episodes skipped")
        for warning in report.warnings:
            self.stdout.write(f"  warning: {_place(warning['where'], warning['id'])}: {warning['message']}")
        if report.warning_count > len(report.warnings):
            self.stdout.write(f"  ... and {report.warning_count - len(report.warnings)} more warnings")
        self.stdout.write(report.summary())


def _place(where: str, old_id: str) -> str:
    return f"{where} ({old_id})" if old_id else where
