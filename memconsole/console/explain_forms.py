"""The forms of the explanation screens (issue 18): what the bot knew at a moment, and the fixes
made from an injection snapshot."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from memconsole.memory import validation

from .forms import ConsoleForm
from .timezones import ZonedDateTimeField, in_console_zone


def _to_the_second() -> forms.DateTimeInput:
    # To the second: "before I changed it a moment ago" is a question people ask.
    return forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}, format="%Y-%m-%dT%H:%M:%S")


class KnownAtForm(ConsoleForm):
    """ "What did the bot know at T", optionally compared with a second moment and for one speaker."""

    at = ZonedDateTimeField(label=in_console_zone(_("At (%(zone)s)")), required=False, widget=_to_the_second())
    compare = ZonedDateTimeField(
        label=in_console_zone(_("Compare with (%(zone)s)")), required=False, widget=_to_the_second()
    )
    speaker = forms.CharField(label=_("Only this speaker (id)"), required=False, max_length=validation.MAX_SENDER_CHARS)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        now = timezone.now()
        for name in ("at", "compare"):
            value: datetime | None = data.get(name)
            if value is not None and value > now:
                self.add_error(name, _("Choose a moment in the past."))
        data["speaker"] = (data.get("speaker") or "").strip()
        return data


class SnapshotFixForm(ConsoleForm):
    """Mark a memory an injection used as wrong: archive it or lower its importance, saying why."""

    episode_id = forms.CharField(widget=forms.HiddenInput, max_length=64)
    action = forms.ChoiceField(
        label=_("Fix"),
        choices=[("archive", _("Archive it (it is wrong)")), ("lower_importance", _("Lower its importance"))],
    )
    reason = forms.CharField(label=_("Why is it wrong?"), max_length=500)
    version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=0)  # the one shown
