"""Small template helpers of the console: times, status pills, JSON blocks, health levels."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from memconsole.memory import wording
from memconsole.memory.models import Status

from .. import timezones

register = template.Library()


@register.simple_tag
def timestamp(value: datetime | None) -> str:
    """<time> in the console's time zone (`console/timezones.py`), the title in UTC. Until the
    browser's zone is known (no choice, no cookie yet) console.js rewrites the text into it."""
    if not value:
        return format_html('<span class="muted">{}</span>', _("no time"))
    utc = value.astimezone(UTC)
    title = timezones.spelled(utc, " %H:%M:%S UTC")
    local = timezones.local(value)
    text = timezones.spelled(local, " %H:%M:%S ") + (local.tzname() or timezone.get_current_timezone_name())
    return format_html('<time datetime="{}" title="{}">{}</time>', utc.isoformat(), title, text)


def status_label(status: str) -> str:
    """The translated label; a stored value outside `Status` reads as active."""
    return str(Status(status).label if status in Status.values else Status.ACTIVE.label)


@register.filter
def status_name(status: Any) -> str:
    """`status_label` as a template filter."""
    return status_label(str(status))


@register.simple_tag
def status_pill(status: str) -> str:
    status = status if status in Status.values else Status.ACTIVE
    return format_html('<span class="pill pill-{}">{}</span>', status, status_label(status))


@register.filter
def source_label(source: str) -> str:
    """Who wrote an episode (`models.SOURCES`), translated; an unknown value as stored."""
    labels = {
        "agent": _("Bot (API)"),
        "import": _("Import"),
        "console": _("Console"),
        "health_probe": _("Health probe"),
    }
    return labels.get(source, source)


# The ranking's factors in its order (docs/design.md §4): two scores, then multipliers shown as "×1.16".
BREAKDOWN_ORDER = ("similarity", "lexical", "relevance", "recency", "importance", "speaker", "update", "exact")
BREAKDOWN_SCORES = frozenset({"similarity", "lexical", "relevance", "recency"})


def breakdown_label(name: str) -> str:
    labels = {
        "similarity": _("similarity"),
        "lexical": _("lexical"),
        "relevance": _("relevance"),
        "recency": _("recency"),
        "importance": _("importance"),
        "speaker": _("speaker"),
        "update": _("update"),
        "exact": _("exact"),
    }
    return labels.get(name, name)


@register.filter
def breakdown_factors(breakdown: Any) -> list[dict[str, Any]]:
    """The factors of a score breakdown (a ranking.Breakdown, or the dict a snapshot stored) in the
    ranking's order, each with its key, translated label and value; an unknown key keeps its name."""
    values = breakdown.as_dict() if hasattr(breakdown, "as_dict") else breakdown
    if not isinstance(values, dict):
        return []
    keys = [key for key in BREAKDOWN_ORDER if key in values] + [key for key in values if key not in BREAKDOWN_ORDER]
    return [
        {
            "key": key,
            "label": breakdown_label(str(key)),
            "value": values[key],
            "multiplier": key not in BREAKDOWN_SCORES,
        }
        for key in keys
    ]


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


HEALTH_LEVELS = {
    "ok": "green",
    "green": "green",
    "pass": "green",
    "healthy": "green",
    "warn": "amber",
    "warning": "amber",
    "amber": "amber",
    "degraded": "amber",
}


# The health check's checks (`health.CHECK_IDS`) by name; the id itself is shown beside it.
CHECK_LABELS = {
    "database": gettext_lazy("Database"),
    "vector_index": gettext_lazy("Vector index"),
    "embedding": gettext_lazy("Embedding model"),
    "write": gettext_lazy("Writing a memory"),
    "search": gettext_lazy("Search stays in its space"),
    "list": gettext_lazy("Lists stay in their space"),
    "get": gettext_lazy("Reading by id stays in its space"),
    "recall": gettext_lazy("Recall stays in its space"),
    "inject": gettext_lazy("Injection stays in its space"),
    "export": gettext_lazy("Export stays in its space"),
    "delete": gettext_lazy("Deleting by a space's filter"),
    "cleanup": gettext_lazy("Probe cleanup"),
    "index_drift": gettext_lazy("Index matches the database"),
    "index_backlog": gettext_lazy("Vectors waiting for the index"),
    "audit_chain": gettext_lazy("Audit chain"),
    "row_integrity": gettext_lazy("Rows unchanged outside memconsole"),
    "encryption": gettext_lazy("Encryption at rest"),
    "erasure": gettext_lazy("Unfinished erasures"),
}


@register.filter
def check_label(check_id: Any) -> str:
    return str(CHECK_LABELS.get(str(check_id), check_id))


@register.simple_tag(takes_context=True)
def check_text(context: Any, check: Any, name: str) -> str:
    """A check's `detail` or `fix` in the reader's language, from the words it kept (`Check.said`).
    The health check is install-wide: its details name rows, counts and paths of every bot, so a
    user limited to some bots reads only each check's name and state."""
    if not isinstance(check, dict):
        return ""
    actor = getattr(context.get("request"), "actor", None)
    if actor is None or actor.bot_uuids is not None:
        return _("Its details are shown only to users who may see every bot.") if name == "detail" else ""
    kept = check.get("said") or {}
    english = str(check.get(name) or "")
    words = kept.get(name) if isinstance(kept, dict) else None
    return wording.in_language(words, english) if words is not None else (english and _(english))


@register.filter
def health_level(status: Any) -> str:
    """green, amber or red for any status word the health check uses (unknown reads as red)."""
    return HEALTH_LEVELS.get(str(status).lower(), "red")


@register.simple_tag
def health_badge(status: Any) -> str:
    level = health_level(status)
    labels = {"green": _("OK"), "amber": _("Warning"), "red": _("Failing")}
    return format_html('<span class="badge badge-{}">{}</span>', level, labels[level])


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        return None


@register.filter
def is_mapping(value: Any) -> bool:
    return isinstance(value, dict)


@register.filter
def is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


@register.filter
def join_if_list(value: Any) -> str:
    """A list shown as "a, b, c"; anything else as itself (a profile field's value in a diff)."""
    return ", ".join(str(item) for item in value) if isinstance(value, list) else str(value)
