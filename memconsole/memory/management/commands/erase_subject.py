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
        "Run --dry-run first to see the counts. An erasure interrupted half way is finished by running it again, "
        "or by --resume (every unfinished one, no sender id needed). With embedded Chroma, stop the web server first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--sender-id", help="the person's sender id")
        parser.add_argument("--bot-uuid", help="only within this bot's scopes (default: every bot)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be erased; change nothing")
        parser.add_argument(
            "--resume", action="store_true", help="finish the vector-index part of every unfinished erasure"
        )

    def _progress(self, line: str) -> None:
        self.stderr.write(line)
        self.stderr.flush()

    def handle(
        self, *args: Any, sender_id: str | None, bot_uuid: str | None, dry_run: bool, resume: bool, **options: Any
    ) -> None:
        if resume:
            if sender_id is not None or dry_run:
                raise CommandError("--resume takes no --sender-id or --dry-run (run the erasure itself again instead)")
            self._resume()
            return
        if sender_id is None:
            raise CommandError("give --sender-id (or --resume to finish the unfinished erasures)")
        if not dry_run:
            self._progress("erasing ...")
        try:
            report = erasure.erase_subject(
                sender_id,
                bot_uuid=bot_uuid,
                actor=Actor.system(f"manage.py erase_subject ({getpass.getuser()})"),
                dry_run=dry_run,
                progress=None if dry_run else self._progress,
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
        resumed = " (finished an interrupted erasure)" if report.resumed else ""
        self.stdout.write(
            report.summary() + (f" (receipt {report.receipt_audit_id})" if report.receipt_audit_id else "") + resumed
        )
        if not dry_run and not report.vector_index.get("ok", True):
            raise CommandError(
                f"the database part is done but the vector index was not purged: {report.vector_index.get('error')}; "
                "run the same erasure again (or erase_subject --resume) to finish it"
            )

    def _resume(self) -> None:
        results = erasure.resume_unfinished(progress=self._progress)
        failed = [r for r in results if not r["ok"]]
        for result in results:
            state = "finished" if result["ok"] else f"not finished: {result['error']}"
            self.stderr.write(
                f"erasure {result['subject_digest'][:12]}: {result['rebuilt']} collections rebuilt, {state}"
            )
        self.stdout.write(f"resumed {len(results)} unfinished erasures, {len(results) - len(failed)} finished")
        if failed:
            raise CommandError(
                f"{len(failed)} erasures are still unfinished; run --resume again once the index is reachable"
            )
