"""Erase a person: a form, a dry run that counts what would go, then the erasure with the speaker
id typed again, run as a background job (the request answers at once with the job's page, which
shows the receipt when it is done). The id travels in request bodies, never in a URL or its logs;
the job keeps it only while it runs."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.views.decorators.http import require_http_methods, require_POST

from memconsole.jobs.queue import submit
from memconsole.memory import erasure, jobs, roles
from memconsole.memory.errors import ValidationError as MemoryValidationError

from .. import forms
from ..access import ConsoleRequest, console_view
from ..screens import render_screen
from .jobs import busy, started


def _erasure_bot(request: ConsoleRequest, form: forms.ErasureForm) -> str:
    """The bot to erase within ('' = every bot): 404 outside the user's grants, 403 for every bot
    when the user is limited to some."""
    bot_uuid: str = form.cleaned_data["bot_uuid"]
    if request.actor.bot_uuids is not None and not bot_uuid:
        raise PermissionDenied
    if not request.actor.may_use_bot(bot_uuid):
        raise Http404("No such bot.")
    return bot_uuid


def _erase(
    request: ConsoleRequest, form: forms.ErasureForm, bot_uuid: str, *, dry_run: bool
) -> erasure.ErasureReport | None:
    """Runs `erase_subject` (which writes the audited receipt); None with the error on the form."""
    try:
        return erasure.erase_subject(
            form.cleaned_data["sender_id"], bot_uuid=bot_uuid or None, actor=request.actor, dry_run=dry_run
        )
    except MemoryValidationError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, exc.in_language())
        return None


def _erasure_screen(request: ConsoleRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    return render_screen(request, "console/erasure.html", "console/_erasure.html", context, status)


@require_http_methods(["GET", "POST"])
@console_view(roles.DELETE)
def erasure_form(request: ConsoleRequest) -> HttpResponse:
    """Steps 1 and 2: the form, then a dry run (POST) that asks for the speaker id again."""
    form = forms.ErasureForm(request.POST if request.method == "POST" else None, bots=request.actor.bot_uuids)
    if not form.is_bound:
        return _erasure_screen(request, {"form": form})
    if not form.is_valid():
        return _erasure_screen(request, {"form": form}, 400)
    bot_uuid = _erasure_bot(request, form)
    report = _erase(request, form, bot_uuid, dry_run=True)
    if report is None:
        return _erasure_screen(request, {"form": form}, 400)
    confirm = forms.ErasureConfirmForm(initial={"sender_id": form.cleaned_data["sender_id"], "bot_uuid": bot_uuid})
    return _erasure_screen(request, {"form": form, "report": report, "confirm": confirm})


@require_POST
@console_view(roles.DELETE)
def erasure_run(request: ConsoleRequest) -> HttpResponse:
    """Step 3: with the speaker id typed again, start the erasure job and show its page."""
    form = forms.ErasureForm(request.POST, bots=request.actor.bot_uuids)
    if not form.is_valid():
        return _erasure_screen(request, {"form": form}, 400)
    bot_uuid = _erasure_bot(request, form)
    confirm = forms.ErasureConfirmForm(request.POST)
    if not confirm.is_valid():  # the typed id did not match: the counts again, with the error
        report = _erase(request, form, bot_uuid, dry_run=True)
        if report is None:
            return _erasure_screen(request, {"form": form}, 400)
        return _erasure_screen(request, {"form": form, "report": report, "confirm": confirm}, 400)
    try:
        job = submit(
            jobs.ERASURE,
            scope=f"bot:{bot_uuid or '*'}",
            bot_uuid=bot_uuid,
            actor=request.actor,
            params={"sender_id": form.cleaned_data["sender_id"], "bot_uuid": bot_uuid},
        )
    except jobs.JobBusy as exc:
        return busy(request, exc)
    return started(request, job)
