"""Time travel (issue 18): what the bot of one memory space knew at a moment, and how that changed
between two moments."""

from __future__ import annotations

from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from memconsole.memory import timetravel
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys

from ..access import ConsoleRequest, scope_view
from ..explain_forms import KnownAtForm
from ..screens import render_screen, scope_context


@require_GET
@scope_view()
def known_at(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    form = KnownAtForm(request.GET or None)
    shown = timetravel.SHOWN  # listed of each moment's memories; all of them count and are compared
    context = scope_context(request, scope, keys, "insights", form=form, shown=shown, shown_slice=f":{shown}")
    status = 200
    if form.is_bound and not form.is_valid():
        status = 400
    elif form.is_bound:
        at = form.cleaned_data.get("at") or timezone.now()
        speaker = form.cleaned_data["speaker"]
        knowledge = timetravel.known_at(keys, request.actor, at, speaker_id=speaker)
        context["knowledge"] = knowledge
        compare = form.cleaned_data.get("compare")
        if compare is not None:
            other = timetravel.known_at(keys, request.actor, compare, speaker_id=speaker)
            earlier, later = (other, knowledge) if compare < at else (knowledge, other)
            context.update(earlier=earlier, later=later, difference=timetravel.difference(earlier, later))
    return render_screen(request, "console/known_at.html", "console/_known_at.html", context, status)
