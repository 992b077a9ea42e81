"""Django admin: bot tokens (list, revoke), users (audited), and read-only views of grants, scopes and audit.

Tokens are created with `manage.py create_bot_token` (the secret is printed once), not here.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group, User
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from . import accounts, tokens
from .audit import Actor
from .models import AuditEntry, BotGrant, BotToken, Scope
from .roles import allowed_bots

_M = TypeVar("_M", bound=Model)
TOKEN_FIELDS = ("name", "prefix", "bot_uuids", "created_at", "created_by", "last_used_at", "revoked_at")


@admin.register(BotToken)
class BotTokenAdmin(admin.ModelAdmin[BotToken]):
    list_display = ["name", "prefix", "bots", "created_at", "created_by", "last_used_at", "state"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix"]
    ordering = ["-created_at"]
    fields = TOKEN_FIELDS
    readonly_fields = TOKEN_FIELDS
    actions = ["revoke_tokens"]

    @admin.display(description=_("bots"))
    def bots(self, token: BotToken) -> str:
        return ", ".join(token.bot_uuids)

    @admin.display(description=_("state"))
    def state(self, token: BotToken) -> str:
        return gettext("active") if token.is_active else gettext("revoked")

    @admin.action(description=_("Revoke the selected tokens"), permissions=["change"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[BotToken]) -> None:
        actor = Actor.for_user(request.user, allowed_bots(request.user))
        revoked = sum(tokens.revoke(token, actor) for token in queryset)
        self.message_user(
            request,
            ngettext("%(count)d token revoked.", "%(count)d tokens revoked.", revoked) % {"count": revoked},
            messages.SUCCESS,
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the secret must be shown once: use `manage.py create_bot_token`

    def has_delete_permission(self, request: HttpRequest, obj: BotToken | None = None) -> bool:
        return False  # revoke instead: the audit log keeps naming the token


class ReadOnlyAdmin(admin.ModelAdmin[_M]):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(BotGrant)
class BotGrantAdmin(ReadOnlyAdmin[BotGrant]):
    """Read only: grants are changed on the console's Users screen, which audits each change."""

    list_display = ["user", "bot_uuid"]
    list_filter = ["bot_uuid"]
    search_fields = ["user__username", "bot_uuid"]


@admin.register(Scope)
class ScopeAdmin(ReadOnlyAdmin[Scope]):
    list_display = ["scope_key", "isolation", "user_key", "bot_uuid", "first_seen", "last_seen"]
    list_filter = ["isolation"]
    search_fields = ["scope_key", "bot_uuid", "session_name"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin[AuditEntry]):
    """Structural fields only: payloads (personal content) are read in the console's audit view."""

    list_display = ["chain", "seq", "timestamp", "operation", "actor", "scope_key", "target_type", "target_id"]
    list_filter = ["operation", "actor_type"]
    search_fields = ["audit_id", "scope_key", "target_id", "actor"]
    fields = [
        "chain",
        "seq",
        "audit_id",
        "timestamp",
        "operation",
        "scope_key",
        "user_key",
        "actor_type",
        "actor",
        "sender_id",
        "target_type",
        "target_id",
        "query_id",
        "redacted",
        "prev_hash",
        "entry_hash",
    ]
    ordering = ["-id"]


# What makes a user more powerful than an ordinary console account: only superusers change these.
PRIVILEGE_FIELDS = ("is_superuser", "is_staff", "groups", "user_permissions")


class ConsoleUserAdmin(UserAdmin):  # type: ignore[type-arg]
    """Django's user admin, where only superusers change privileges or touch a superuser's account.

    A console admin (staff in the *admin* group, not a superuser) manages ordinary accounts, but
    cannot grant superuser, staff, groups (roles) or permissions to anyone, itself included, nor
    change, set the password of, or delete a superuser (which would let it log in as one).
    """

    def get_readonly_fields(self, request: HttpRequest, obj: User | None = None) -> tuple[str, ...]:
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None and not request.user.is_superuser:
            return (*fields, *PRIVILEGE_FIELDS)
        return (*fields, "groups")  # roles: the console's Users screen, which audits each change

    def save_model(self, request: HttpRequest, obj: User, form: Any, change: bool) -> None:
        """Save, and audit what changed (the console audits its own account changes the same way)."""
        before = dict(User.objects.filter(pk=obj.pk).values(*accounts.ADMIN_FIELDS).first() or {}) if change else {}
        super().save_model(request, obj, form, change)
        changed = [name for name in form.changed_data if name != "password2"]
        accounts.record_admin_change(request.user, obj, changed, before, created=not change)

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
        with transaction.atomic():  # the new password and its audit entry, or neither
            response = super().user_change_password(request, id, form_url)
            if request.method == "POST" and response.status_code == 302:  # the password was set
                accounts.record_admin_password(request.user, User.objects.get(pk=id))
        return response

    def delete_model(self, request: HttpRequest, obj: User) -> None:
        accounts.record_admin_delete(request.user, obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            accounts.record_admin_delete(request.user, user)
        super().delete_queryset(request, queryset)

    def has_change_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)


admin.site.unregister(User)
admin.site.register(User, ConsoleUserAdmin)


class RoleAdmin(ReadOnlyAdmin[Group]):
    """The roles (viewer, operator, admin) as `roles.ensure_roles` defines them: read only, since a
    permission added to one here would give every member of the role more, with no audit entry."""

    search_fields = ["name"]


admin.site.unregister(Group)
admin.site.register(Group, RoleAdmin)


def _admin_site_permission(request: HttpRequest) -> bool:
    """The Django admin manages users, grants and tokens for every bot, so only staff without
    per-bot grants may use it: a bot-limited admin could otherwise widen their own grants."""
    user = request.user
    return user.is_active and user.is_staff and allowed_bots(user) is None


# The default site keeps its registry; only its permission check changes.
admin.site.has_permission = _admin_site_permission  # type: ignore[method-assign]
