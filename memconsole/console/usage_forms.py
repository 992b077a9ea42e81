"""The Episodes list's Usage filter (issue 18): any, never used, or used in the last N days.

Usage means injections that put an episode into a prompt (memory/usage.py); looking at memory in
the console or recalling it is no use. A mixin of `forms.EpisodeFilterForm`, kept here so that
forms.py stays under the house's line limit.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.functional import lazy
from django.utils.translation import gettext_lazy as _

from memconsole.memory.usage import DEFAULT_USED_DAYS, MAX_USED_DAYS

USAGE_ANY = ""
USAGE_NEVER = "never"
USAGE_RECENT = "recent"
USAGE_CHOICES = [
    (USAGE_ANY, _("Any")),
    (USAGE_NEVER, _("Never used")),
    (USAGE_RECENT, _("Used in the last N days")),
]


def _days_error() -> str:
    return str(_("Enter a whole number of days from 1 to %(max)d.")) % {"max": MAX_USED_DAYS}


DAYS_ERROR = lazy(_days_error, str)()


class UsageFilter(forms.Form):
    """The `usage` choice and its `used_days` (read only with "used in the last N days")."""

    usage = forms.ChoiceField(
        label=_("Usage"),
        choices=USAGE_CHOICES,
        required=False,
    )
    used_days = forms.IntegerField(
        label=_("N (days)"),
        required=False,
        min_value=1,
        max_value=MAX_USED_DAYS,
        widget=forms.NumberInput(attrs={"inputmode": "numeric"}),
        error_messages={"invalid": DAYS_ERROR, "min_value": DAYS_ERROR, "max_value": DAYS_ERROR},
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if (data.get("usage") or USAGE_ANY) != USAGE_RECENT:
            # Days matter with "used in the last N days" only: a stale value beside "any" is no error.
            self.errors.pop("used_days", None)
            data["used_days"] = None
        return data

    def usage_filters(self) -> dict[str, Any]:
        """The Usage filter as `EpisodeFilter.build` keywords (`used_within_days`, `never_used`)."""
        usage = self.cleaned_data.get("usage") or USAGE_ANY
        if usage == USAGE_NEVER:
            return {"never_used": True}
        if usage == USAGE_RECENT:
            return {"used_within_days": self.cleaned_data.get("used_days") or DEFAULT_USED_DAYS}
        return {}
