"""A speaker typed as a name or an id, in a console form (the erasure form): `people.py` resolves it."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from memconsole.memory import people
from memconsole.memory.scopes import ScopeKeys


class PersonLookup:
    """Mixin for a form with `sender_id` and `bot_uuid` fields and a `bots` attribute (None: every
    bot): a name typed instead of an id becomes the one id it names, or the form asks which."""

    bots: frozenset[str] | None = None
    cleaned_data: dict[str, Any]
    fields: dict[str, Any]

    def __init__(self, *args: Any, bots: frozenset[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bots = bots
        self.fields["sender_id"].help_text = gettext_lazy(
            "The speaker’s ID, or their name: a name several IDs share asks which."
        )

    def clean(self) -> dict[str, Any]:
        super().clean()  # type: ignore[misc]
        data = self.cleaned_data
        if data.get("sender_id") is None or "bot_uuid" not in data:
            return data
        lookup = people.find_everywhere(data["sender_id"], bots=self.bots, bot_uuid=data["bot_uuid"])
        if lookup.ambiguous:
            choices = ", ".join(person.label for person in lookup.choices)
            message = _("Several speakers are called “%(name)s”: type the ID of one of %(choices)s.")
            self.add_error("sender_id", message % {"name": data["sender_id"], "choices": choices})  # type: ignore[attr-defined]
        elif lookup.person:
            data["sender_id"] = lookup.person.sender_id
        return data


def resolve_speaker_filter(keys: ScopeKeys, form: Any, field: str = "sender") -> bool:
    """The Episodes filter's speaker, typed as a name or an id, made the id it names (in the
    form's `cleaned_data`); False, with the choices on the form, for a name several ids share. An
    unknown text stays as typed (an id with no episodes lists nothing)."""
    typed = form.cleaned_data.get(field) or ""
    if not typed:
        return True
    lookup = people.find_in_scope(keys, typed)
    if lookup.ambiguous:
        choices = ", ".join(person.label for person in lookup.choices)
        message = _("Several speakers are called “%(name)s”: type one of %(choices)s.")
        form.add_error(field, message % {"name": typed, "choices": choices})
        return False
    if lookup.person:
        form.cleaned_data[field] = lookup.person.sender_id
    return True
