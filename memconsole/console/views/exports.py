"""The Export tab: choose what to export, then download the scope as one JSON document."""

from __future__ import annotations

from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from memconsole.memory import exports, roles
from memconsole.memory.errors import ValidationError as MemoryValidationError
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys

from .. import forms
from ..access import ConsoleRequest, scope_view
from ..screens import render_screen, scope_context


def _export_form(
    request: ConsoleRequest, scope: Scope, keys: ScopeKeys, form: forms.ExportForm, status: int = 200
) -> HttpResponse:
    context = scope_context(request, scope, keys, "export", form=form)
    return render_screen(request, "console/export_form.html", "console/_export_form.html", context, status)


@require_GET
@scope_view()
def export(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    return _export_form(request, scope, keys, forms.ExportForm())


@require_POST
@scope_view(roles.EXPORT)
def export_download(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponseBase:
    """The download (audited when it starts); a bad choice is shown on the form (400)."""
    form = forms.ExportForm(request.POST)
    if not form.is_valid():
        return _export_form(request, scope, keys, form, 400)
    data = form.cleaned_data
    try:
        chunks = exports.stream_scope_export(
            keys, request.actor, statuses=data["statuses"], include_audit=data["include_audit"]
        )
    except MemoryValidationError as exc:
        form.add_error(None, exc.in_language())
        return _export_form(request, scope, keys, form, 400)
    response = StreamingHttpResponse(chunks, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, exports.export_filename(keys))
    return response
