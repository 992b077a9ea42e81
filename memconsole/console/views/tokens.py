"""Bot API tokens: the list with last use, creating one (its secret shown this once) and revoking.
Admin role only; an admin limited to some bots sees and makes tokens for those bots only."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from memconsole.memory import roles, tokens
from memconsole.memory.models import BotToken

from ..access import ConsoleRequest, console_view
from ..account_forms import TokenCreateForm
from ..screens import render_screen, wants_fragment


def _tokens_screen(request: ConsoleRequest, form: TokenCreateForm, status: int = 200, **created: Any) -> HttpResponse:
    context = {"form": form, "tokens": tokens.visible_tokens(request.actor), **created}
    return render_screen(request, "console/token_list.html", "console/_tokens.html", context, status)


@require_http_methods(["GET", "POST"])
@console_view(roles.TOKENS)
def token_list(request: ConsoleRequest) -> HttpResponse:
    """The tokens; a POST creates one and shows its secret once (it is never stored, only its hash)."""
    limits = request.actor.bot_uuids
    if request.method == "GET":
        return _tokens_screen(request, TokenCreateForm(limits=limits))
    form = TokenCreateForm(request.POST, limits=limits)
    if not form.is_valid():
        return _tokens_screen(request, form, 400)
    token, secret = tokens.create_token(form.cleaned_data["name"], form.cleaned_data["bot_uuids"], request.actor)
    return _tokens_screen(request, TokenCreateForm(limits=limits), created=token, secret=secret)


@require_POST
@console_view(roles.TOKENS)
def token_revoke(request: ConsoleRequest, token_id: int) -> HttpResponse:
    """Revoke a token (the bot using it gets 401 from now on): the row again, or back to the list."""
    token: BotToken = tokens.get_visible_token(request.actor, token_id)
    revoked = tokens.revoke(token, request.actor)
    if wants_fragment(request):
        return render(request, "console/_token_row.html", {"token": token, "just_revoked": revoked})
    if revoked:
        messages.success(request, _("The token %(name)s is revoked.") % {"name": token.name})
    else:
        messages.info(request, _("The token %(name)s was already revoked.") % {"name": token.name})
    return redirect("console:tokens")
