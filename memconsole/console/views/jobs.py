"""A background job's page: progress bar, counts, ETA, then the report or the error in words.

The fragment (`_job.html`) polls itself with htmx every second while the job is queued or running
and stops once it has ended; without JavaScript the page has a refresh link. Views that start a
job answer with `started` (a redirect to this page) or `busy` (409: one of its kind is active)."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRedirect

from memconsole.memory import jobs, roles

from .. import import_report
from ..access import ConsoleRequest, console_view, require_perm
from ..screens import render_screen

# Who may see (and start) a job of each kind.
KIND_PERMISSIONS = {
    jobs.IMPORT: roles.IMPORT,
    jobs.ERASURE: roles.DELETE,
    jobs.HEALTH: roles.OPERATE,
    jobs.REINDEX: roles.OPERATE,
    jobs.ROTATION: roles.USERS,
    jobs.REEMBED: roles.OPERATE,
    jobs.BULK: roles.OPERATE,
}
STAGE_LABELS = {
    "reading": gettext_lazy("Reading the file"),
    "writing": gettext_lazy("Writing to the database"),
    "indexing": gettext_lazy("Indexing for search"),
    "scan": gettext_lazy("Comparing the database and the index"),
    "repair": gettext_lazy("Repairing the index"),
    "erasing": gettext_lazy("Erasing"),
    "checking": gettext_lazy("Checking"),
    "reembed": gettext_lazy("Re-embedding with the new model"),
    "archive": gettext_lazy("Archiving"),
    "restore": gettext_lazy("Restoring"),
    "delete": gettext_lazy("Deleting"),
}
# What a bulk action did (said at once, or on its job's page).
BULK_DONE = {
    "archive": lambda n: ngettext("%(n)d episode archived.", "%(n)d episodes archived.", n),
    "restore": lambda n: ngettext("%(n)d episode restored.", "%(n)d episodes restored.", n),
    "delete": lambda n: ngettext("%(n)d episode deleted.", "%(n)d episodes deleted.", n),
}
NO_WORKER_AFTER = 10  # seconds a job may wait before the page says no worker seems to be running


def started(request: ConsoleRequest, job: jobs.Job) -> HttpResponse:
    """The answer to a request that started a job: its page (a full navigation for htmx too)."""
    url = reverse("console:job", args=[job.pk])
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


def busy(request: ConsoleRequest, exc: jobs.JobBusy) -> HttpResponse:
    """409: a job of this kind is already active for this scope; links to it when the user may see it."""
    job = exc.job
    visible = request.actor.bot_uuids is None or (job.bot_uuid and job.bot_uuid in request.actor.bot_uuids)
    context = {"busy": job, "visible": visible}
    return render_screen(request, "console/job_busy.html", "console/_job_busy.html", context, 409)


def job_context(job: jobs.Job) -> dict[str, Any]:
    waiting = (
        job.status == jobs.QUEUED
        and job.attempts == 0
        and (job.created_at is not None)
        and (_age(job) > NO_WORKER_AFTER)
    )
    silent = job.silent_seconds
    return {
        "job": job,
        "stage_label": STAGE_LABELS.get(job.stage, job.stage),
        "no_worker": waiting,
        "worker_silent": silent if silent is not None and silent > jobs.stale_after().total_seconds() / 2 else None,
        "report": job.report or {},
        "error": jobs.error_in_language(job) if job.status == jobs.FAILED else "",
        "import_again": _import_again(job) if job.kind == jobs.IMPORT else "",
        **(_bulk_done(job) if job.kind == jobs.BULK and job.status == jobs.SUCCEEDED else {}),
    }


def _bulk_done(job: jobs.Job) -> dict[str, Any]:
    """A finished bulk action in words, with the way back to its list and to its audit entries."""
    report = job.report or {}
    action, changed = report.get("action", ""), report.get("changed", 0)
    audit_url = reverse("console:audit", args=[job.params["scope_id"]])
    return {
        "bulk_done": BULK_DONE[action](changed) % {"n": changed} if action in BULK_DONE else "",
        "bulk_audit_url": f"{audit_url}?batch={report.get('batch_id', '')}",
        "bulk_back": job.params.get("back") or reverse("console:episodes", args=[job.params["scope_id"]]),
    }


def _import_again(job: jobs.Job) -> str:
    """The import form filled in as this import was; for real after a dry run that succeeded."""
    for_real = job.status == jobs.SUCCEEDED and bool(job.params.get("dry_run"))
    return f"{reverse('console:import')}?{import_report.again_query(job.params, for_real=for_real)}"


def _age(job: jobs.Job) -> float:
    return (timezone.now() - job.created_at).total_seconds()


@require_GET
@console_view()
def job_detail(request: ConsoleRequest, job_id: uuid.UUID) -> HttpResponse:
    job = jobs.get_for(job_id, request.actor)
    require_perm(request.user, KIND_PERMISSIONS.get(job.kind, roles.USERS))
    context = job_context(job)
    if job.kind == jobs.IMPORT and job.report:
        context.update(import_report_context(job.report))
    return render_screen(request, "console/job_detail.html", "console/_job.html", context)


def import_report_context(report: dict[str, Any]) -> dict[str, Any]:
    shown = import_report.labelled(dict(report))
    return {"import_report": shown, "targets": import_report.targets(shown)}
