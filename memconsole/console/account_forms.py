"""Forms of the admin screens: bot tokens, users (role, bot grants, active) and the bot list they share."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.models import User
from django.utils.functional import lazy
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from memconsole.memory import roles, tokens
from memconsole.memory.accounts import MAX_USERNAME
from memconsole.memory.errors import ValidationError as MemoryValidationError

from .forms import ConsoleForm

ROLE_CHOICES = [
    (roles.VIEWER, _("Viewer: reads memory")),
    (
        roles.OPERATOR,
        _(
            "Operator: also corrects memory (edits, adds, archives and restores episodes, edits profiles) and runs health checks and index repair"
        ),
    ),
    (roles.ADMIN, _("Admin: also deletes, erases, exports, imports, and manages tokens and users")),
]
MAX_BOTS_TEXT = 2000


class BotListField(forms.CharField):
    """Bot UUIDs typed one per line or separated by commas, cleaned as the bot API cleans them."""

    widget = forms.Textarea(attrs={"rows": 2})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_BOTS_TEXT)
        super().__init__(**kwargs)

    def clean(self, value: Any) -> list[str]:
        text = super().clean(value)
        wanted = [part.strip() for part in re.split(r"[,\n]", text or "") if part.strip()]
        if not wanted:
            return []
        try:
            return tokens.validate_bot_uuids(wanted)
        except MemoryValidationError as exc:
            raise forms.ValidationError(
                _("Each bot is a bot UUID without spaces or ':' (%(reason)s)."), params={"reason": exc.in_language()}
            ) from exc


EVERY_BOT_HELP = _("One bot UUID per line. Leave empty to let the user see every bot.")


class BotsWithinGrants(ConsoleForm):
    """A form with a `bot_uuids` field that an admin limited to some bots fills with those only."""

    bot_uuids: BotListField

    def __init__(self, *args: Any, limits: frozenset[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        field = self.fields["bot_uuids"]
        if limits is not None and str(field.help_text) == str(EVERY_BOT_HELP):  # "leave empty" is not theirs to give
            field.help_text = _("One bot UUID per line, among your bots: %(bots)s.") % self._yours()

    def clean_bot_uuids(self) -> list[str]:
        bots: list[str] = self.cleaned_data["bot_uuids"]
        if self.limits is not None:
            if not bots:
                raise forms.ValidationError(_("Name at least one of your bots: %(bots)s."), params=self._yours())
            outside = [bot for bot in bots if bot not in self.limits]
            if outside:
                params = {"bot": outside[0], **self._yours()}
                raise forms.ValidationError(_("You have no access to bot %(bot)s. Your bots: %(bots)s."), params=params)
        return bots

    def _yours(self) -> dict[str, str]:
        return {"bots": ", ".join(sorted(self.limits or ()))}


class TokenCreateForm(BotsWithinGrants):
    name = forms.CharField(
        label=_("Token name"),
        max_length=tokens.MAX_NAME_CHARS,
        help_text=_("Say which bot or deployment uses it, e.g. “support bot, production”."),
    )
    bot_uuids = BotListField(
        label=_("Bots it may use"),
        help_text=_("One bot UUID per line (or separated by commas). The token reaches no other bot."),
    )

    def clean_bot_uuids(self) -> list[str]:
        bots = super().clean_bot_uuids()
        if not bots:
            raise forms.ValidationError(_("A token needs at least one bot UUID."))
        return bots


class UserCreateForm(BotsWithinGrants):
    username = forms.CharField(label=_("Username"), max_length=MAX_USERNAME, validators=[User.username_validator])
    password1 = forms.CharField(
        label=_("Password"),
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=lazy(password_validation.password_validators_help_text_html, SafeString)(),
    )
    password2 = forms.CharField(
        label=_("Password again"), strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )
    role = forms.ChoiceField(label=_("Role"), choices=ROLE_CHOICES, initial=roles.VIEWER)
    bot_uuids = BotListField(
        label=_("Limit to these bots"),
        required=False,
        help_text=EVERY_BOT_HELP,
    )

    def clean_username(self) -> str:
        username: str = self.cleaned_data["username"].strip()
        if User.objects.filter(username__iexact=username).exists():  # only letter case apart: one in the audit log
            raise forms.ValidationError(_("A user with this username already exists."))
        return username

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        first, second = data.get("password1"), data.get("password2")
        if first and second and first != second:
            self.add_error("password2", _("The two passwords differ."))
        elif first:
            try:
                password_validation.validate_password(first, User(username=data.get("username", "")))
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


class RoleForm(ConsoleForm):
    role = forms.ChoiceField(label=_("Role"), choices=ROLE_CHOICES)


class GrantsForm(BotsWithinGrants):
    bot_uuids = BotListField(
        label=_("Limit to these bots"),
        required=False,
        help_text=EVERY_BOT_HELP,
    )


class ActiveForm(ConsoleForm):
    active = forms.TypedChoiceField(
        choices=[("1", _("Active")), ("0", _("Deactivated"))],
        coerce=lambda value: value == "1",
        error_messages={"invalid_choice": _("Choose whether the account is active or deactivated.")},
    )
