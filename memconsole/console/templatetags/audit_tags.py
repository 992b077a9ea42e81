"""Template helpers of the audit list: an entry's readable diff and its target, linked to the screen
that shows it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from memconsole.memory import audit, roles, wording
from memconsole.memory.statuses import Status
from memconsole.memory.validation import is_episode_id

from ..diffs import FIELD_LABELS, OPERATION_LABELS, Diff, audit_diff

register = template.Library()


@register.filter
def operation_label(operation: Any) -> SafeString:
    """An operation by its name in the console, with its code (what the filter and the API use);
    an operation without a name as its code."""
    label = OPERATION_LABELS.get(str(operation))
    if label is None:
        return format_html("<code>{}</code>", operation)
    return format_html('<span class="operation">{}</span> <code>{}</code>', label, operation)


@register.filter
def summary_in_language(payload: Any) -> str:
    """The entry's summary in the reader's language (`wording`), as stored when it cannot be."""
    if not isinstance(payload, dict):
        return ""
    return wording.in_language(payload.get("said"), str(payload.get("summary", "")))[: audit.SUMMARY_MAX]


@register.filter
def field_label(name: Any) -> SafeString:
    """A recorded field by its name in the console (its code in the tooltip), or as its code."""
    label = FIELD_LABELS.get(str(name))
    if label is None:
        return format_html("<code>{}</code>", name)
    return format_html('<span title="{}">{}</span>', name, label)


@register.filter
def field_value(value: Any, name: Any) -> Any:
    """A recorded value as the console says it: a status by its translated name, the rest as recorded."""
    if name == "status" and value in Status.values:
        return Status(value).label
    return value


@register.filter
def field_labels(names: Any) -> SafeString:
    """Several fields, as `field_label` names each, comma-separated."""
    return format_html_join(", ", "{}", ((field_label(name),) for name in names))


@register.filter
def changes(payload: Any) -> Diff:
    """The readable diff of an audit payload's before and after."""
    if not isinstance(payload, dict):
        return Diff()
    return audit_diff(payload.get("before"), payload.get("after"))


def target_url(entry: Any, space: Any, user: Any) -> str | None:
    """Where the entry's target is shown, when the viewer can open it; None otherwise."""
    kind, target_id = entry.target_type, entry.target_id
    if space is not None:
        if kind == "episode" and is_episode_id(target_id):
            return reverse("console:episode_detail", args=[space.pk, target_id])
        if kind == "session_profile":
            return reverse("console:profile_detail", args=[space.pk, "session"])
        if kind == "speaker_profile" and target_id.startswith("speaker:"):
            query = urlencode({"sender": target_id.partition(":")[2]})
            return reverse("console:profile_detail", args=[space.pk, "speaker"]) + f"?{query}"
        if kind == "scope":
            return reverse("console:episodes", args=[space.pk])
    if kind == "bot_token" and user.has_perm(roles.TOKENS):
        return reverse("console:tokens") + f"#token-{target_id}"
    if kind == "user" and target_id.isascii() and target_id.isdigit() and user.has_perm(roles.USERS):
        return reverse("console:user_detail", args=[int(target_id)])
    if kind == "health_run":
        return reverse("console:diagnostics")
    return None


@register.simple_tag(takes_context=True)
def audit_target(context: Any, entry: Any) -> SafeString:
    """`type: id`, the id linked to its screen, and a link that filters the list to that target."""
    if not entry.target_type:
        return format_html("{}", "—")
    space = getattr(entry, "space", None) or context.get("scope")
    url = target_url(entry, space, context["request"].user)
    shown = format_html("<code>{}</code>", entry.target_id) if entry.target_id else format_html("")
    if url and entry.target_id:
        shown = format_html('<a href="{}">{}</a>', url, shown)
    html = format_html("{}: {}", entry.target_type, shown) if entry.target_id else format_html("{}", entry.target_type)
    list_url = context.get("list_url")
    if list_url and entry.target_id:
        query = urlencode({"target": f"{entry.target_type}:{entry.target_id}"})
        label = _("Only this target’s entries")
        html = format_html(
            '{} <a class="filter-link" href="{}?{}" title="{}"><span aria-hidden="true">⌕</span>'
            '<span class="visually-hidden">{}</span></a>',
            html,
            list_url,
            query,
            label,
            label,
        )
    return html
