"""Console users: the list, creating one, and on a user's page their role, bot grants and whether
the account is active. Admin role only; superuser and staff are never granted here, and a
superuser's account is changed only by a superuser (`memory.accounts` keeps those rules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms as django_forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from memconsole.memory import accounts, roles
from memconsole.memory.errors import ValidationError as MemoryValidationError

from ..access import ConsoleRequest, console_view
from ..account_forms import ActiveForm, GrantsForm, RoleForm, UserCreateForm
from ..screens import render_screen


def _users_screen(request: ConsoleRequest, form: UserCreateForm, status: int = 200) -> HttpResponse:
    context = {"form": form, "accounts": accounts.accounts(request.user)}
    return render_screen(request, "console/user_list.html", "console/_users.html", context, status)


@require_http_methods(["GET", "POST"])
@console_view(roles.USERS)
def user_list(request: ConsoleRequest) -> HttpResponse:
    """The users this admin may see; a POST creates one (never staff nor superuser)."""
    limits = request.actor.bot_uuids
    if request.method == "GET":
        return _users_screen(request, UserCreateForm(limits=limits))
    form = UserCreateForm(request.POST, limits=limits)
    if not form.is_valid():
        return _users_screen(request, form, 400)
    data = form.cleaned_data
    user = accounts.create_user(request.user, data["username"], data["password1"], data["role"], data["bot_uuids"])
    messages.success(request, _("The user %(name)s is created.") % {"name": user.username})
    _warn_of_unknown_bots(request, data["bot_uuids"])
    if request.htmx:  # a new page, not a fragment: the browser goes there
        return HttpResponseClientRedirect(reverse("console:user_detail", args=[user.pk]))
    return redirect("console:user_detail", user_id=user.pk)


def _warn_of_unknown_bots(request: ConsoleRequest, bot_uuids: list[str]) -> None:
    """Name the granted bots that nothing here knows yet (most often a typo: the user sees none of it)."""
    unknown = accounts.unknown_bots(bot_uuids)
    if unknown:
        text = _(
            "No space and no token here names bot %(bots)s yet: check the spelling, unless it is a bot still to come."
        )
        messages.warning(request, text % {"bots": ", ".join(unknown)})


def _detail_screen(request: ConsoleRequest, account: accounts.Account, status: int = 200, **forms: Any) -> HttpResponse:
    limits = request.actor.bot_uuids
    context = {
        "account": account,
        "role_form": forms.get("role_form") or RoleForm(initial={"role": account.role}),
        "grants_form": forms.get("grants_form")
        or GrantsForm(initial={"bot_uuids": "\n".join(account.bot_uuids)}, limits=limits),
        "active_form": forms.get("active_form"),
        "is_self": account.user.pk == request.user.pk,
    }
    return render_screen(request, "console/user_detail.html", "console/_user_detail.html", context, status)


@require_GET
@console_view(roles.USERS)
def user_detail(request: ConsoleRequest, user_id: int) -> HttpResponse:
    return _detail_screen(request, accounts.get_account(request.user, user_id))


def _change(
    request: ConsoleRequest,
    user_id: int,
    form: django_forms.Form,
    form_name: str,
    apply: Callable[[Any, dict[str, Any]], bool],
    done: str,
) -> HttpResponse:
    """Validate `form`, apply the change to the user, then show the user's page again (htmx) or go there."""
    account = accounts.get_account(request.user, user_id)
    if not account.editable:  # a superuser's account, for an admin who is none
        raise PermissionDenied
    changed = False
    if form.is_valid():
        try:
            changed = apply(account.user, form.cleaned_data)
        except MemoryValidationError as exc:
            form.add_error(None, exc.in_language())
    if form.errors:
        return _detail_screen(request, account, 400, **{form_name: form})
    if changed:
        messages.success(request, done % {"name": account.user.username})
    account = accounts.get_account(request.user, user_id)
    if request.htmx:
        return _detail_screen(request, account)
    return redirect("console:user_detail", user_id=user_id)


@require_POST
@console_view(roles.USERS)
def user_role(request: ConsoleRequest, user_id: int) -> HttpResponse:
    def apply(user: Any, data: dict[str, Any]) -> bool:
        return accounts.set_role(request.user, user, data["role"])

    return _change(request, user_id, RoleForm(request.POST), "role_form", apply, _("The role of %(name)s is changed."))


@require_POST
@console_view(roles.USERS)
def user_grants(request: ConsoleRequest, user_id: int) -> HttpResponse:
    def apply(user: Any, data: dict[str, Any]) -> bool:
        changed = accounts.set_grants(request.user, user, data["bot_uuids"])
        if changed:
            _warn_of_unknown_bots(request, data["bot_uuids"])
        return changed

    form = GrantsForm(request.POST, limits=request.actor.bot_uuids)
    return _change(request, user_id, form, "grants_form", apply, _("The bots of %(name)s are changed."))


@require_POST
@console_view(roles.USERS)
def user_active(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """Deactivate (logins refused, open sessions end) or reactivate an account."""

    def apply(user: Any, data: dict[str, Any]) -> bool:
        return accounts.set_active(request.user, user, data["active"])

    form = ActiveForm(request.POST)
    done = _("The account %(name)s is reactivated.") if request.POST.get("active") == "1" else None
    return _change(request, user_id, form, "active_form", apply, done or _("The account %(name)s is deactivated."))


@require_POST
@console_view(roles.USERS)
def user_unlock(request: ConsoleRequest, user_id: int) -> HttpResponse:
    """Lift a login lockout (too many failed logins) before it ends by itself."""

    def apply(user: Any, data: dict[str, Any]) -> bool:
        return accounts.unlock(request.user, user)

    form = django_forms.Form(request.POST)
    return _change(request, user_id, form, "unlock_form", apply, _("The account %(name)s may log in again."))
