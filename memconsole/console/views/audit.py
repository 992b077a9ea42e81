"""The audit log: one screen across every space the user may see, and a space's Audit tab, which
is the same list filtered to that space; plus the space's audit export."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from memconsole.memory import audit, exports, queries, roles
from memconsole.memory.models import Scope
from memconsole.memory.scopes import ScopeKeys

from .. import forms
from ..access import ConsoleRequest, console_view, scope_view
from ..diffs import OPERATION_LABELS
from ..screens import render_screen, scope_context, user_permissions

AUDIT_PER_PAGE = 25


def _audit_list(request: ConsoleRequest, keys: ScopeKeys | None) -> tuple[dict[str, Any], int]:
    """The filter form, the page of entries (each with its `space`) and the page's chain check."""
    form = forms.AuditFilterForm(request.GET)
    if not form.is_valid():
        return {"form": form, "page": None, "operations": OPERATION_LABELS.items()}, 400
    data = form.cleaned_data
    filters = queries.AuditFilter(
        operation=data["operation"].strip(),
        actor=data["actor"].strip(),
        after=data.get("after"),
        before=data.get("before"),
        space="" if keys else data["space"].strip(),
        target=data["target"].strip(),
        batch=data.get("batch") or "",
    )
    page = queries.audit_page(keys, data.get("cursor"), AUDIT_PER_PAGE, filters=filters, viewer=request.actor)
    queries.attach_spaces(page.items, request.actor)
    if not filters.batch:
        _fold_batches(page.items, keys)
    context = {
        "form": form,
        "page": page,
        "operations": OPERATION_LABELS.items(),
        "filtered": any(
            getattr(filters, name) for name in ("operation", "actor", "after", "before", "space", "target", "batch")
        ),
        "chain": audit.verify_entries(page.items) if page.items else None,
    }
    return context, 200


def _fold_batches(entries: list[Any], keys: ScopeKeys | None) -> None:
    """Show a bulk action as one row: the first of a run of entries sharing a batch id carries
    `batch_size` (the batch's in the list shown, linked to the batch alone), the others `batch_folded`."""
    sizes = queries.batch_sizes((entry.batch_id for entry in entries), keys)
    previous = ""
    for entry in entries:
        entry.batch_folded = bool(entry.batch_id) and entry.batch_id == previous
        entry.batch_size = sizes.get(entry.batch_id, 0) if entry.batch_id and not entry.batch_folded else 0
        previous = entry.batch_id


@require_GET
@console_view()
def audit_all(request: ConsoleRequest) -> HttpResponse:
    """Every audit entry the user may read: memory changes, imports, erasure receipts, health runs,
    token and user events (a user limited to some bots sees their spaces' entries only)."""
    context, status = _audit_list(request, None)
    context.update(user_permissions(request.user), list_url=reverse("console:audit_all"), scope=None)
    return render_screen(request, "console/audit_all.html", "console/_audit_list.html", context, status)


@require_GET
@scope_view()
def audit_log(request: ConsoleRequest, scope: Scope, keys: ScopeKeys) -> HttpResponse:
    """The space's Audit tab: the audit list filtered to this space."""
    context, status = _audit_list(request, keys)
    context = scope_context(
        request, scope, keys, "audit", list_url=reverse("console:audit", args=[scope.pk]), **context
    )
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
