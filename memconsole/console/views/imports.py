"""Import: upload a file into a target space. The request stores the file with a background job
and answers at once with the job's page (memconsole/jobs); a dry run (the default) reports without
writing."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from memconsole.jobs.queue import submit
from memconsole.memory import imports, jobs, roles
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.scopes import derive_scope

from .. import forms, import_report
from ..access import ConsoleRequest, console_view, scope_from_query
from ..screens import render_screen
from .jobs import busy, started


def _blank_form(request: ConsoleRequest) -> forms.ImportForm:
    """The form, aimed at the space named by `?scope=<id>` when there is one, or filled in as an
    earlier import was (`import_report.again_query`); the values are only shown, and checked when posted."""
    initial: dict[str, Any] = {"dry_run": request.GET.get("dry_run", "1") != "0"}
    scope = scope_from_query(request)
    if scope is not None:
        initial.update(bot_uuid=scope.bot_uuid, session_name=scope.session_name, isolation=scope.isolation)
    initial.update({name: request.GET[name][:200] for name in import_report.AGAIN_FIELDS if name in request.GET})
    return forms.ImportForm(initial=initial)


def _start_import(request: ConsoleRequest, form: forms.ImportForm) -> jobs.Job | None:
    """The queued import job, or None with the reason on the form (`JobBusy` propagates)."""
    data = form.cleaned_data
    if not request.actor.may_use_bot(data["bot_uuid"]):
        form.add_error("bot_uuid", _("You do not have access to this bot's memory."))
        return None
    session = data["session_name"] or None
    try:
        derive_scope(data["bot_uuid"], session or "check", data["isolation"])
        name, content = imports.read_upload(data["file"])
    except MemoryValidationError as exc:
        form.add_error("file", exc.in_language())
        return None
    params = {
        "format": data["format"],
        "bot_uuid": data["bot_uuid"],
        "session_name": session,
        "isolation": data["isolation"],
        "dry_run": bool(data["dry_run"]),
        "file_name": name,  # shown on the job's page once the file itself is gone
    }
    return submit(
        jobs.IMPORT,
        scope=f"{data['bot_uuid']}:{session or '*'}:{data['isolation']}",
        bot_uuid=data["bot_uuid"],
        actor=request.actor,
        params=params,
        data=content,
        file_name=name,
    )


@require_http_methods(["GET", "POST"])
@console_view(roles.IMPORT)
def import_upload(request: ConsoleRequest) -> HttpResponse:
    if request.method == "GET":
        context: dict[str, Any] = {"form": _blank_form(request)}
        return render_screen(request, "console/import_form.html", "console/_import_report.html", context)
    form = forms.ImportForm(request.POST, request.FILES)
    try:
        job = _start_import(request, form) if form.is_valid() else None
    except jobs.JobBusy as exc:
        return busy(request, exc)
    if job is not None:
        return started(request, job)
    context = {"form": form, "report": None, "targets": []}
    return render_screen(request, "console/import_form.html", "console/_import_report.html", context, 400)
