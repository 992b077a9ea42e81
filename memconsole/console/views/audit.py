"""The Audit tab: the scope's audit entries with filters, and their export."""

from __future__ import annotations

from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from memconsole.memory import exports, queries, roles
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys

from .. import forms
from ..access import ConsoleRequest, scope_view
from ..screens import render_screen, scope_context

AUDIT_PER_PAGE = 25
# The operations offered by the filter (the log may hold others; typing one filters by it too).
AUDIT_OPERATIONS = (
    "remember",
    "archive",
    "restore",
    "delete",
    "profile_update",
    "profile_rollback",
    "inject",
    "export",
    "audit_export",
    "import",
    "erase_subject",
    "scope_open",
)


@require_GET
@scope_view()
def audit_log(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    form = forms.AuditFilterForm(request.GET)
    page, status = None, 400
    if form.is_valid():
        data = form.cleaned_data
        filters = {"operation": data["operation"].strip(), "actor": data["actor"].strip()}
        page, status = queries.audit_page(keys, data.get("cursor"), AUDIT_PER_PAGE, **filters), 200
    context = scope_context(request, scope, keys, "audit", form=form, page=page, operations=AUDIT_OPERATIONS)
    return render_screen(request, "console/audit_list.html", "console/_audit_list.html", context, status)


@require_POST
@scope_view(roles.EXPORT)
def audit_export(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponseBase:
    """The scope's whole audit log as the JSON envelope of docs/design.md §7 (the export is audited)."""
    chunks = exports.stream_audit_export(keys, request.actor)
    response = StreamingHttpResponse(chunks, content_type="application/json; charset=utf-8")
    name = exports.export_filename(keys).replace("memconsole-", "memconsole-audit-", 1)
    response["Content-Disposition"] = content_disposition_header(True, name)
    return response
