"""What operators read in the logs: a refused request (403) is one line, not a traceback (issue 15)."""

from __future__ import annotations

import logging
import sys

import pytest
from django.contrib.auth.models import User

from memconsole.logfilters import OneLineForbidden

pytestmark = pytest.mark.django_db


def _request_records(caplog) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "django.request"]


@pytest.mark.parametrize(
    ("caller", "path"),
    [("viewer_client", "/import/"), ("admin_client_", "/admin/memory/auditentry/")],
    ids=["console role too low", "django admin model permission"],
)
def test_it_logs_a_403_as_one_line(caller, path, request, caplog):
    client = request.getfixturevalue(caller)
    if caller == "admin_client_":
        User.objects.filter(pk=request.getfixturevalue("admin_user").pk).update(
            is_staff=True
        )  # the admin is staff-only
    with caplog.at_level(logging.INFO):
        assert client.get(path).status_code == 403

    records = _request_records(caplog)
    assert [(r.levelname, r.getMessage()) for r in records] == [("WARNING", f"Forbidden (Permission denied): {path}")]
    assert records[0].exc_info is None
    assert "Traceback" not in caplog.text


def test_it_keeps_the_traceback_of_every_other_status():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        exc_info = sys.exc_info()
    for status, kept in ((403, False), (404, True), (500, True)):
        record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "x", (), exc_info)
        record.status_code = status
        assert OneLineForbidden().filter(record)
        assert (record.exc_info is not None) == kept, status
