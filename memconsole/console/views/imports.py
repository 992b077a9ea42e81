"""Import: upload a file into a target space; a dry run (the default) reports without writing."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from memconsole.memory import imports, queries, roles
from memconsole.memory.errors import PermissionDenied as MemoryPermissionDenied
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.models import Scope

from .. import forms
from ..access import ConsoleRequest, console_view, scope_from_query
from ..screens import render_screen

# What each kind of conflict, skipped item and warning in an import report means (ImportReport).
KIND_LABELS = {
    "exists": gettext_lazy("Already in the memory space"),
    "duplicate": gettext_lazy("Repeated in the file"),
    "profile_exists": gettext_lazy("Profile exists: imported as a new version"),
    "deleted": gettext_lazy("Deleted in the source"),
    "importance_clamped": gettext_lazy("Importance clamped to 1–5"),
    "unknown_status": gettext_lazy("Unknown status: imported as active"),
    "timestamp_missing": gettext_lazy("Empty time: the import time is used"),
    "traits_evicted": gettext_lazy("Too many traits: the oldest left out"),
    "preferences_evicted": gettext_lazy("Too many preferences: the oldest left out"),
    "notes_cut": gettext_lazy("Notes cut at the limit"),
}


def _blank_form(request: ConsoleRequest) -> forms.ImportForm:
    """The form, aimed at the space named by `?scope=<id>` when there is one."""
    initial: dict[str, Any] = {"dry_run": True}
    scope = scope_from_query(request)
    if scope is not None:
        initial.update(bot_uuid=scope.bot_uuid, session_name=scope.session_name, isolation=scope.isolation)
    return forms.ImportForm(initial=initial)


def _run_import(request: ConsoleRequest, form: forms.ImportForm) -> dict[str, Any] | None:
    """The import's report, or None with the reason on the form."""
    data = form.cleaned_data
    if not request.actor.may_use_bot(data["bot_uuid"]):
        form.add_error("bot_uuid", _("You do not have access to this bot's memory."))
        return None
    try:
        report = imports.import_upload(
            data["file"],
            data["format"],
            bot_uuid=data["bot_uuid"],
            session_name=data["session_name"] or None,
            isolation=data["isolation"],
            actor=request.actor,
            dry_run=data["dry_run"],
        )
    except MemoryValidationError as exc:
        form.add_error("file", exc.message)
        return None
    except MemoryPermissionDenied:
        form.add_error("bot_uuid", _("You do not have access to this bot's memory."))
        return None
    return _labelled(report.as_dict())


def _labelled(report: dict[str, Any]) -> dict[str, Any]:
    """The report's JSON form with a label per listed item and how many were not listed."""
    for name, count in (("conflicts", "conflict_count"), ("skipped", "skipped_deleted"), ("warnings", "warning_count")):
        for item in report[name]:
            item["label"] = KIND_LABELS.get(item["kind"], item["kind"])
        report[f"{name}_not_listed"] = report[count] - len(report[name])
    return report


def _targets(report: dict[str, Any] | None) -> list[Scope]:
    """The spaces an import wrote to, for links to them (none for a dry run)."""
    if not report or report.get("dry_run"):
        return []
    return queries.registered_scopes(
        (item.get("scope_key"), item.get("isolation")) for item in report.get("scopes", [])
    )


@require_http_methods(["GET", "POST"])
@console_view(roles.IMPORT)
def import_upload(request: ConsoleRequest) -> HttpResponse:
    if request.method == "GET":
        context: dict[str, Any] = {"form": _blank_form(request)}
        return render_screen(request, "console/import_form.html", "console/_import_report.html", context)
    form = forms.ImportForm(request.POST, request.FILES)
    report = _run_import(request, form) if form.is_valid() else None
    context = {"form": form, "report": report, "targets": _targets(report)}
    status = 200 if report is not None else 400
    return render_screen(request, "console/import_form.html", "console/_import_report.html", context, status)
