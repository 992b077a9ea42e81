"""An import report (`ImportReport.as_dict()`) made ready for the console: a label per listed
item, how many were not listed, and the memory spaces it wrote to (for links)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.utils.translation import gettext, gettext_lazy

from memconsole.memory import queries, wording
from memconsole.memory.models import Scope

# What each kind of conflict, skipped item and warning in an import report means (ImportReport).
KIND_LABELS = {
    "exists": gettext_lazy("Already in the memory space"),
    "duplicate": gettext_lazy("Repeated in the file"),
    "profile_exists": gettext_lazy("Profile exists: imported as a new version"),
    "deleted": gettext_lazy("Deleted in the source"),
    "deleted_here": gettext_lazy("Deleted here: not brought back"),
    "erased": gettext_lazy("Person erased here: not brought back"),
    "newer_here": gettext_lazy("Changed here since: kept as it is"),
    "importance_clamped": gettext_lazy("Importance clamped to 1–5"),
    "unknown_status": gettext_lazy("Unknown status: imported as active"),
    "timestamp_missing": gettext_lazy("Empty time: the import time is used"),
    "timestamp_future": gettext_lazy("Dated in the future: the import time is used"),
    "traits_evicted": gettext_lazy("Too many traits: the oldest left out"),
    "preferences_evicted": gettext_lazy("Too many preferences: the oldest left out"),
    "notes_cut": gettext_lazy("Notes cut at the limit"),
    "name_lines_joined": gettext_lazy("Name joined on one line"),
    "traits_lines_joined": gettext_lazy("Traits joined on one line"),
    "preferences_lines_joined": gettext_lazy("Preferences joined on one line"),
    "superseded_by_missing": gettext_lazy("Replaced by an episode not in the file"),
    "superseded_by_self": gettext_lazy("Replaced by itself: link left empty"),
    "superseded_by_other_speaker": gettext_lazy("Replaced by another speaker's episode: link left empty"),
    "superseded_by_cycle": gettext_lazy("Replacements go round in a circle: link left empty"),
    "future": gettext_lazy("Dated in the future: not stored"),
    "past_retention": gettext_lazy("Older than the window keeps: not stored"),
    "window_full": gettext_lazy("Older than every message the window keeps: not stored"),
}


def labelled(report: dict[str, Any]) -> dict[str, Any]:
    """The report's JSON form with a label per listed item and how many were not listed."""
    for name, count in (("conflicts", "conflict_count"), ("skipped", "skipped_deleted"), ("warnings", "warning_count")):
        for item in report.get(name, []):
            item["label"] = KIND_LABELS.get(item["kind"], item["kind"])
            if "reason" in item:  # the import's words (gettext_noop there), in the reader's language
                item["reason"] = gettext(item["reason"])
            if "said" in item:  # a warning's words and values (`wording`)
                item["message"] = wording.in_language(item["said"], item.get("message", ""))
        report[f"{name}_not_listed"] = report.get(count, 0) - len(report.get(name, []))
    return report


def targets(report: dict[str, Any] | None) -> list[Scope]:
    """The spaces an import wrote to, for links to them (none for a dry run)."""
    if not report or report.get("dry_run"):
        return []
    return queries.registered_scopes(
        (item.get("scope_key"), item.get("isolation")) for item in report.get("scopes", [])
    )


# What `?format=…&bot_uuid=…` may fill in on the import form (a job page's "import again" link):
# the form's own fields but the file, which a browser never lets a page choose.
AGAIN_FIELDS = ("format", "bot_uuid", "session_name", "isolation")


def again_query(params: dict[str, Any], *, for_real: bool = False) -> str:
    """The import form's query that fills it in as the import with these job params was (after a
    dry run that went well, `for_real`: with "Dry run" unticked)."""
    values = {name: params.get(name) or "" for name in AGAIN_FIELDS}
    return urlencode({**values, "dry_run": "1" if params.get("dry_run") and not for_real else "0"})
