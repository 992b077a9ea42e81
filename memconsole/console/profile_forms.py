"""The profile screen's forms: editing a profile (one line per trait or preference), rolling it back
to a version, and choosing two versions to compare."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from memconsole.memory import validation

from .forms import MAX_VERSION, ConsoleForm, MultilineField, cursor_field, lazy_format


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip()]


class ProfileForm(ConsoleForm):
    name = forms.CharField(label=_("Name"), required=False, max_length=validation.MAX_PROFILE_NAME)
    traits = MultilineField(
        label=_("Traits (one per line)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text=lazy_format(_("At most %(n)d traits."), n=validation.MAX_TRAITS),
    )
    preferences = MultilineField(
        label=_("Preferences (one per line)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=lazy_format(_("At most %(n)d preferences."), n=validation.MAX_PREFERENCES),
    )
    notes = MultilineField(
        label=_("Notes"),
        required=False,
        max_length=validation.MAX_NOTES,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text=lazy_format(_("At most %(n)d characters."), n=validation.MAX_NOTES),
    )
    sender_id = forms.CharField(required=False, max_length=validation.MAX_SENDER_CHARS, widget=forms.HiddenInput)
    # The version the form was rendered from: a save over a newer one is a conflict (409), not a silent overwrite.
    version = forms.IntegerField(required=False, min_value=0, max_value=MAX_VERSION, widget=forms.HiddenInput)

    def _items(self, name: str, limit: int) -> list[str]:
        items = _lines(self.cleaned_data[name])
        if len(items) > limit:
            raise forms.ValidationError(
                _("A profile holds at most %(limit)d entries here; you gave %(count)d.")
                % {"limit": limit, "count": len(items)}
            )
        too_long = [item for item in items if len(item) > validation.MAX_ITEM_CHARS]
        if too_long:
            raise forms.ValidationError(
                _("Each entry may have at most %(n)d characters.") % {"n": validation.MAX_ITEM_CHARS}
            )
        return items

    def clean_traits(self) -> list[str]:
        return self._items("traits", validation.MAX_TRAITS)

    def clean_preferences(self) -> list[str]:
        return self._items("preferences", validation.MAX_PREFERENCES)

    def profile_data(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "traits": data["traits"],
            "preferences": data["preferences"],
            "notes": data["notes"],
        }

    @classmethod
    def initial_from(cls, data: dict[str, Any], sender_id: str, version: int = 0) -> dict[str, Any]:
        return {
            "name": data.get("name", ""),
            "traits": "\n".join(data.get("traits", [])),
            "preferences": "\n".join(data.get("preferences", [])),
            "notes": data.get("notes", ""),
            "sender_id": sender_id,
            "version": version,
        }


class RollbackForm(ConsoleForm):
    version = forms.IntegerField(min_value=1, max_value=MAX_VERSION, widget=forms.HiddenInput)
    # The current version the page showed: a profile saved since is a conflict, not rolled over.
    current = forms.IntegerField(required=False, min_value=1, max_value=MAX_VERSION, widget=forms.HiddenInput)
    sender_id = forms.CharField(required=False, max_length=validation.MAX_SENDER_CHARS, widget=forms.HiddenInput)


class VersionDiffForm(ConsoleForm):
    sender = forms.CharField(required=False, max_length=validation.MAX_SENDER_CHARS)
    diff_from = forms.IntegerField(label=_("Compare version"), required=False, min_value=1, max_value=MAX_VERSION)
    diff_to = forms.IntegerField(label=_("with version"), required=False, min_value=1, max_value=MAX_VERSION)
    cursor = cursor_field()
