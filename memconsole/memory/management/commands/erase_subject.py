from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.memory import erasure
from memconsole.memory.audit import Actor
from memconsole.memory.errors import MemoryError_, ValidationError


class Command(BaseCommand):
    help = (
        "Erase one person everywhere (or within one bot): their speaker profiles, the episodes they sent, their "
        "injection snapshots, their content in the audit log (redacted; the chain stays verifiable), then rebuild "
        "the vector collections and compact the files that held them. Writes one audited receipt. "
        "Run --dry-run first to see the counts. With embedded Chroma, stop the web server first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sender-id", required=True, help="the person's sender id")
        parser.add_argument("--bot-uuid", help="only within this bot's scopes (default: every bot)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be erased; change nothing")

    def handle(self, *args: Any, sender_id: str, bot_uuid: str | None, dry_run: bool, **options: Any) -> None:
        if not dry_run:
            self.stderr.write("erasing ...")
        try:
            report = erasure.erase_subject(
                sender_id,
                bot_uuid=bot_uuid,
                actor=Actor.system(f"manage.py erase_subject ({getpass.getuser()})"),
                dry_run=dry_run,
            )
        except ValidationError as exc:
            raise CommandError(exc.message) from None
        except MemoryError_ as exc:
            raise CommandError(str(exc)) from None
        if not dry_run:
            index, database = report.vector_index, report.database
            self.stderr.write(
                f"vector index: {report.collections_rebuilt} collections rebuilt, "
                f"{'compacted' if index.get('compacted') else 'not compacted: ' + str(index.get('reason') or index.get('error', ''))}; "
                f"database: {'compacted' if database.get('compacted') else 'not compacted: ' + str(database.get('reason', ''))}"
            )
        self.stdout.write(
            report.summary() + (f" (receipt {report.receipt_audit_id})" if report.receipt_audit_id else "")
        )
        if not dry_run and not report.vector_index.get("ok", True):
            raise CommandError(
                f"the database part is done but the vector index was not purged: {report.vector_index.get('error')}"
            )
