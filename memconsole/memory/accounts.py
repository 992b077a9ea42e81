"""Console accounts (docs/design.md §6): users, their role and their bot grants, changed from the
console by an admin; every change is audited in its own transaction.

The rules every console screen keeps (the Django admin keeps the same ones):
- nobody is made superuser or staff here: that stays with `createsuperuser` and the Django admin;
- a superuser's account is changed only by a superuser;
- an admin limited to some bots sees and manages only users limited to those bots, and every user
  it creates or grants stays limited to them (a user with no grant sees every bot);
- nobody deactivates their own account (the console would lock its last admin out).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import Group, User
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from . import audit, roles
from .audit import Actor
from .errors import NotFound, PermissionDenied, ValidationError
from .models import BotGrant, BotToken, Scope
from .tokens import validate_bot_uuids
from .wording import Said, said

MAX_USERNAME = 150


@dataclass(frozen=True)
class Account:
    """One row of the Users screen: the user, its role, its grants, and whether the viewer may change it."""

    user: User
    role: str
    bot_uuids: list[str]
    editable: bool
    locked_until: datetime | None = None  # too many failed logins (django-axes): refused until then


def actor_for(user: Any) -> Actor:
    return Actor.for_user(user, roles.allowed_bots(user))


def role_of(user: User) -> str:
    """The highest console role among the user's groups ('' when it has none)."""
    names = {group.name for group in user.groups.all()}
    return next((role for role in reversed(roles.ROLES) if role in names), "")


def grants_of(user: User) -> list[str]:
    return sorted(grant.bot_uuid for grant in user.bot_grants.all())


def _visible_to(by: Any, user: User) -> bool:
    """A limited admin sees only users limited to some of its own bots."""
    limits = roles.allowed_bots(by)
    if limits is None:
        return True
    grants = set(grants_of(user))
    return bool(grants) and grants <= limits and not user.is_superuser


def may_change(by: Any, user: User) -> bool:
    return _visible_to(by, user) and (by.is_superuser or not user.is_superuser)


def accounts(by: Any) -> list[Account]:
    """The users `by` may see, by username."""
    users = [
        u for u in User.objects.order_by("username").prefetch_related("groups", "bot_grants") if _visible_to(by, u)
    ]
    locked = locked_out([user.username for user in users])
    return [
        Account(user, role_of(user), grants_of(user), may_change(by, user), locked.get(user.username)) for user in users
    ]


def locked_out(usernames: Iterable[str]) -> dict[str, datetime]:
    """{username: until when} of the accounts django-axes refuses after too many failed logins (from
    some address; the lockout lasts MEMCONSOLE_LOGIN_COOLOFF_MINUTES after the last failure)."""
    cooloff = timedelta(hours=float(settings.AXES_COOLOFF_TIME))
    attempts = AccessAttempt.objects.filter(
        username__in=list(usernames),
        failures_since_start__gte=settings.AXES_FAILURE_LIMIT,
        attempt_time__gt=timezone.now() - cooloff,
    )
    until: dict[str, datetime] = {}
    for username, last in attempts.values_list("username", "attempt_time"):
        until[username] = max(until.get(username, last + cooloff), last + cooloff)
    return until


def unlock(by: Any, user: User) -> bool:
    """Lift `user`'s login lockout (every address). False when there was none. Audited."""
    _require_change(by, user)
    with transaction.atomic():
        if user.username not in locked_out([user.username]):
            return False
        AccessAttempt.objects.filter(username=user.username).delete()
        summary = said(gettext_noop("user %(user)s unlocked after failed logins"), user=repr(user.username))
        _record("user_unlock", by, user, summary, {"locked_out": True}, {"locked_out": False})
    return True


def get_account(by: Any, user_id: int) -> Account:
    """One visible user; `NotFound` when absent or outside `by`'s bots (never confirmed to exist)."""
    user = User.objects.prefetch_related("groups", "bot_grants").filter(pk=user_id).first()
    if user is None or not _visible_to(by, user):
        raise NotFound("no such user")
    return Account(
        user, role_of(user), grants_of(user), may_change(by, user), locked_out([user.username]).get(user.username)
    )


def _require_change(by: Any, user: User) -> None:
    if not may_change(by, user):
        raise PermissionDenied("only a superuser may change a superuser's account")


def _clean_role(role: str) -> str:
    if role not in roles.ROLES:
        raise ValidationError(f"a role is one of {', '.join(roles.ROLES)}", field="role")
    return role


def _clean_grants(by: Any, bot_uuids: Iterable[str]) -> list[str]:
    """Sorted, validated bot_uuids ([] = every bot); a limited admin grants only within its own bots."""
    wanted = [bot for bot in bot_uuids if bot.strip()]
    bots = sorted(validate_bot_uuids(wanted)) if wanted else []
    limits = roles.allowed_bots(by)
    if limits is not None and (not bots or not set(bots) <= limits):
        raise PermissionDenied("an admin limited to some bots grants only those bots")
    return bots


def _set_role_group(user: User, role: str) -> None:
    user.groups.remove(*Group.objects.filter(name__in=roles.ROLES))
    user.groups.add(Group.objects.get(name=role))


def _set_grant_rows(user: User, bots: list[str]) -> None:
    BotGrant.objects.filter(user=user).exclude(bot_uuid__in=bots).delete()
    for bot in bots:
        BotGrant.objects.get_or_create(user=user, bot_uuid=bot)


def _record(operation: str, by: Any, user: User, summary: Said, before: Any, after: Any) -> None:
    audit.append(
        operation,
        actor_for(by),
        target_type="user",
        target_id=str(user.pk),
        summary=summary,
        before=before,
        after=after,
    )


# The account fields the Django admin changes that the audit entry records with their values.
ADMIN_FIELDS = ("username", "first_name", "last_name", "email", "is_active", "is_staff", "is_superuser")


def record_admin_change(by: Any, user: User, changed: Iterable[str], before: dict[str, Any], *, created: bool) -> None:
    """Audit an account added, changed or deleted in the Django admin (roles and grants are only
    changed on the console's Users screen): the fields changed, with their values before and after
    (a password only by name)."""
    changed = sorted(set(changed))
    fields = [name for name in changed if name in ADMIN_FIELDS]
    after = {name: getattr(user, name) for name in fields}
    if created:
        summary = said(gettext_noop("user %(user)s created in the Django admin"), user=repr(user.username))
        _record("user_create", by, user, summary, None, after)
    elif changed:
        summary = said(
            gettext_noop("user %(user)s changed in the Django admin: %(fields)s"),
            user=repr(user.username),
            fields=", ".join(changed),
        )
        _record("user_admin_change", by, user, summary, {name: before.get(name) for name in fields}, after)


def record_admin_password(by: Any, user: User) -> None:
    """Audit a password set for an account in the Django admin (never the password)."""
    summary = said(gettext_noop("password of user %(user)s set in the Django admin"), user=repr(user.username))
    with transaction.atomic():  # the admin's password view runs outside any transaction
        _record("password_change", by, user, summary, None, None)


def record_admin_delete(by: Any, user: User) -> None:
    """Audit an account deleted in the Django admin."""
    summary = said(gettext_noop("user %(user)s deleted in the Django admin"), user=repr(user.username))
    _record("user_delete", by, user, summary, {"username": user.username, "role": role_of(user)}, None)


def create_user(by: Any, username: str, password: str, role: str, bot_uuids: Iterable[str] = ()) -> User:
    """A new active console user (never staff nor superuser) with its role and grants. Audited."""
    username = (username or "").strip()
    if not username or len(username) > MAX_USERNAME:
        raise ValidationError(f"a username is 1 to {MAX_USERNAME} characters", field="username")
    role = _clean_role(role)
    bots = _clean_grants(by, bot_uuids)
    with transaction.atomic():
        if User.objects.filter(username__iexact=username).exists():  # "ADMIN" beside "admin" reads as one actor
            raise ValidationError("a user with this username already exists", field="username")
        user = User.objects.create_user(username, password=password, is_staff=False, is_superuser=False)
        _set_role_group(user, role)
        _set_grant_rows(user, bots)
        after = {"username": username, "role": role, "bot_uuids": bots, "is_active": True}
        summary = said(gettext_noop("user %(user)s created (%(role)s)"), user=repr(username), role=role)
        _record("user_create", by, user, summary, None, after)
    return user


def set_role(by: Any, user: User, role: str) -> bool:
    """Give `user` exactly this console role. False when it already had it. Audited. Nobody
    changes their own role (an admin demoting themselves would lose this screen at once)."""
    _require_change(by, user)
    role = _clean_role(role)
    with transaction.atomic():
        before = role_of(user)
        if before == role:
            return False
        if user.pk == by.pk:
            raise ValidationError(
                said(gettext_noop("you cannot change your own role; another admin can")), field="role"
            )
        _set_role_group(user, role)
        _record(
            "user_role",
            by,
            user,
            said(
                gettext_noop("user %(user)s: role %(before)s → %(role)s"),
                user=repr(user.username),
                before=before or "-",
                role=role,
            ),
            {"role": before},
            {"role": role},
        )
    return True


def set_grants(by: Any, user: User, bot_uuids: Iterable[str]) -> bool:
    """Limit `user` to these bots (none: every bot). False when nothing changed. Audited."""
    _require_change(by, user)
    bots = _clean_grants(by, bot_uuids)
    with transaction.atomic():
        before = grants_of(user)
        if before == bots:
            return False
        if user.pk == by.pk:
            raise ValidationError(
                said(gettext_noop("you cannot change the bots of your own account; another admin can")),
                field="bot_uuids",
            )
        _set_grant_rows(user, bots)
        summary = (
            said(gettext_noop("user %(user)s: bots %(bots)s"), user=repr(user.username), bots=", ".join(bots))
            if bots
            else said(gettext_noop("user %(user)s: all bots"), user=repr(user.username))
        )
        _record("user_grants", by, user, summary, {"bot_uuids": before}, {"bot_uuids": bots})
    return True


def unknown_bots(bot_uuids: Iterable[str]) -> list[str]:
    """The bots among these that no space and no token here names yet: a grant to one is most often
    a typo, or a bot still to come (the console warns; it does not refuse)."""
    wanted = set(bot_uuids)
    known = set(Scope.objects.filter(bot_uuid__in=wanted).values_list("bot_uuid", flat=True))
    for bots in BotToken.objects.values_list("bot_uuids", flat=True):
        known.update(bots or ())
    return sorted(wanted - known)


def set_active(by: Any, user: User, active: bool) -> bool:
    """Deactivate (no more logins, open sessions end) or reactivate `user`. False when unchanged. Audited."""
    _require_change(by, user)
    if not active and user.pk == by.pk:
        raise ValidationError(said(gettext_noop("you cannot deactivate your own account")), field="active")
    with transaction.atomic():
        if user.is_active == active:
            return False
        user.is_active = active
        user.save(update_fields=["is_active"])
        if not active:
            end_sessions(user)
        state = gettext_noop("user %(user)s reactivated") if active else gettext_noop("user %(user)s deactivated")
        summary = said(state, user=repr(user.username))
        _record("user_active", by, user, summary, {"is_active": not active}, {"is_active": active})
    return True


def end_sessions(user: User) -> int:
    """Delete every open console session of `user` (deactivation): reactivating the account later
    does not bring a session back, the user logs in again. Returns how many ended."""
    ended = [
        session.pk
        for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator()
        if session.get_decoded().get(SESSION_KEY) == str(user.pk)
    ]
    Session.objects.filter(pk__in=ended).delete()
    return len(ended)


def change_password(user: User, password: str) -> None:
    """Set a user's own new password (already validated by the form). Audited, without the password."""
    with transaction.atomic():
        user.set_password(password)
        user.save(update_fields=["password"])
        summary = said(gettext_noop("user %(user)s changed their password"), user=repr(user.username))
        _record("password_change", user, user, summary, None, None)
