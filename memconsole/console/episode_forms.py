"""Forms of editing memory by hand: edit or add an episode, reassign its speaker."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from memconsole.memory import validation
from memconsole.memory.episode_extras import MAX_KIND_CHARS
from memconsole.memory.models import Episode

from . import timezones
from .forms import MAX_VERSION, ConsoleForm, MultilineField
from .timezones import ZonedDateTimeField, datetime_input

IMPORTANCE_CHOICES = [(n, str(n)) for n in range(validation.MIN_IMPORTANCE, validation.MAX_IMPORTANCE + 1)]


def _tags(value: str) -> list[str]:
    return [tag.strip() for tag in value.split(",") if tag.strip()]


class EpisodeForm(ConsoleForm):
    """An episode's editable fields. The event time is read in the console's time zone."""

    content = MultilineField(label=_("Content"), strip=True, widget=forms.Textarea(attrs={"rows": 5}))
    tags = forms.CharField(
        label=_("Tags"),
        required=False,
        max_length=validation.MAX_TAGS * (validation.MAX_TAG_CHARS + 1),
        help_text=_("Separated by commas, for example: travel, correction."),
    )
    importance = forms.TypedChoiceField(
        label=_("Importance"), choices=IMPORTANCE_CHOICES, coerce=int, initial=2, help_text=_("1 (low) to 5 (high).")
    )
    kind = forms.RegexField(  # an episode's kind (issue 20), as the bot API and the list filter take it
        regex=validation.KIND,
        label=_("Kind"),
        required=False,
        max_length=MAX_KIND_CHARS,
        help_text=_("Optional: one word that sorts the memory, for example: preference. Empty for none."),
        error_messages={"invalid": _("A kind is one word: letters, digits and _ . : - only.")},
    )
    sender_id = forms.CharField(
        label=_("Speaker ID"),
        required=False,
        max_length=validation.MAX_SENDER_CHARS,
        widget=forms.TextInput(attrs={"list": "speaker-list", "autocomplete": "off"}),
        help_text=_("Type a name or an id; names are suggested as “name (id)”."),
    )
    sender_name = forms.CharField(label=_("Speaker name"), required=False, max_length=validation.MAX_SENDER_CHARS)
    timestamp = ZonedDateTimeField(label=_("Event time"), required=False, widget=datetime_input())
    # The version the form was rendered from: saving over a newer one is a conflict (409).
    version = forms.IntegerField(required=False, min_value=0, max_value=MAX_VERSION, widget=forms.HiddenInput)

    def clean_content(self) -> str:
        content: str = self.cleaned_data["content"]
        if len(content) > validation.max_content_chars():
            raise forms.ValidationError(
                _("At most %(n)d characters.") % {"n": validation.max_content_chars()}, code="max_length"
            )
        return content

    def clean_tags(self) -> list[str]:
        tags = _tags(self.cleaned_data["tags"])
        if len(tags) > validation.MAX_TAGS:
            raise forms.ValidationError(_("At most %(n)d tags.") % {"n": validation.MAX_TAGS})
        if any(len(tag) > validation.MAX_TAG_CHARS for tag in tags):
            raise forms.ValidationError(
                _("Each tag may have at most %(n)d characters.") % {"n": validation.MAX_TAG_CHARS}
            )
        return tags

    def changes(self, stored: Episode | None = None) -> dict[str, Any]:
        """The edit as `editing.edit_episode` keywords. An empty event time keeps the stored one, and
        so does the stored one as the input showed it (to the minute): saving the form unchanged must
        not cut the event time's seconds off."""
        data = self.cleaned_data
        changes = {name: data[name] for name in ("content", "tags", "importance", "kind", "sender_id", "sender_name")}
        stamp = data.get("timestamp")
        shown = stored.timestamp.replace(second=0, microsecond=0) if stored and stored.timestamp else None
        if stamp and (shown is None or not timezones.same_wall_clock(stamp, shown)):
            changes["timestamp"] = stamp  # (the second of a repeated hour reads as it was shown: kept)
        return changes

    @classmethod
    def initial_from(cls, episode: Episode) -> dict[str, Any]:
        stamp = timezones.local(episode.timestamp) if episode.timestamp else None
        return {
            "content": episode.content,
            "tags": ", ".join(episode.tags),
            "importance": episode.importance,
            "kind": episode.kind,
            "sender_id": episode.sender_id,
            "sender_name": episode.sender_name,
            "timestamp": stamp.replace(tzinfo=None) if stamp else None,
            "version": episode.version,
        }


class SpeakerForm(ConsoleForm):
    """Reassign an episode's speaker: a name or an id, resolved in the scope."""

    speaker = forms.CharField(
        label=_("This memory is about"),
        max_length=validation.MAX_SENDER_CHARS,
        widget=forms.TextInput(attrs={"list": "speaker-list", "autocomplete": "off"}),
        help_text=_("A speaker’s name or id."),
    )
    new_speaker = forms.BooleanField(label=_("A new speaker: use what I typed as their id"), required=False)
    version = forms.IntegerField(required=False, min_value=0, max_value=MAX_VERSION, widget=forms.HiddenInput)
