"""What one `POST /api/v1/remember` asks of the database (issue 22: fast writes under load).

Every statement costs ~1 ms of a worker's time here; these guard the ones a remember needs: the
token, the install's encryption state (once for the request's check, once for the write however
many values it seals), the rate-limit count in one statement, and the write's own rows.
"""

from __future__ import annotations

from itertools import pairwise

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memconsole.api.models import RateWindow
from memconsole.memory.audit import verify_audit_chain
from memconsole.memory.install import InstallState
from memconsole.memory.models import AuditEntry

from .conftest import SCOPE_A


def remember(api, content: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = api.post("remember", {**SCOPE_A, "content": content, "sender_id": "u1", "sender_name": "Ann"})
    assert response.status_code == 201, response.content
    return [query["sql"] for query in captured.captured_queries]


def test_a_remember_reads_the_encryption_state_once_for_its_write(api):
    remember(api, "the first memory opens the space")

    statements = remember(api, "the second memory pays only for itself")

    install = [sql for sql in statements if "memory_installstate" in sql]
    assert len(install) == 2  # the request's key check, then one for the write's three sealed values
    # token, key check, rate, scope, episode, lexical (2), pending vector, audit head, entry, head,
    # counters, savepoint and release, and (the suite indexes inline) the vector marked current.
    assert len(statements) <= 17


def test_the_rate_limit_counts_a_request_in_one_statement(api, token_a):
    remember(api, "the minute's first request opens the window")

    statements = remember(api, "later requests add one")

    rate = [sql for sql in statements if "api_ratewindow" in sql]
    assert len(rate) == 1 and "RETURNING" in rate[0]
    assert RateWindow.objects.get(token=token_a[0]).count == 2


def test_a_write_in_a_fresh_savepoint_asks_again(db):
    """The remembered "not encrypted" holds for one atomic block only: another process may mark
    the install between two blocks, and the second must see it."""
    with transaction.atomic():
        assert not InstallState.is_encrypted()
        InstallState.objects.update_or_create(pk=1, defaults={"encrypted_since": "2026-01-01T00:00:00Z"})
        assert not InstallState.is_encrypted()  # the same block: its answer stands
        with transaction.atomic():
            assert InstallState.is_encrypted()


def test_a_batch_writes_its_audit_entries_in_one_statement(api):
    """A batch of 40 episodes takes its chain's head once and writes every entry together: the
    statements do not grow with the batch (they were ~3 more an episode), and the chain verifies,
    each entry recording its own episode."""
    remember(api, "the first memory opens the space")
    items = [{"content": f"fact number {n} about the team", "sender_id": f"u{n % 3}"} for n in range(40)]

    with CaptureQueriesContext(connection) as captured:
        response = api.post("remember", {**SCOPE_A, "episodes": items})

    assert response.status_code == 201, response.content
    statements = [query["sql"] for query in captured.captured_queries]
    audit = [sql for sql in statements if "memory_auditentry" in sql or "memory_audithead" in sql]
    assert len(audit) <= 3, audit  # lock the head, insert the entries, move the head
    assert len(statements) <= 30
    entries = list(AuditEntry.objects.filter(operation="remember").order_by("seq"))[1:]
    assert [entry.target_id for entry in entries] == [answer["episode_id"] for answer in response.json()["episodes"]]
    assert [entry.seq for entry in entries] == list(range(entries[0].seq, entries[0].seq + 40))
    assert all(entry.prev_hash == before.entry_hash for before, entry in pairwise(entries))
    assert verify_audit_chain().ok
